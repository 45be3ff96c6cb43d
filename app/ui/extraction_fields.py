"""The field table's editing controls: a type dropdown for the row clicked, a button to add a row and
one to delete the row clicked. Used for the field table and for the small table of a table's columns."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from app.errors import Refused
from app.ui.errors import explained

_QUEUED: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}  # queued: gr.Error reaches the page


def editing(frame: gr.Dataframe, *, types: list[str], type_column: int, what: str, elem_prefix: str) -> Any:
    """Under `frame`: "Type of the row clicked" (a dropdown of `types`), "Add a <what>", "Delete the <what>
    clicked". A new row gets the first type; the table's own cells stay editable as text. Returns the
    event of a type chosen (to chain what follows from it)."""
    clicked = gr.State(None)  # the row index last clicked in this browser
    with gr.Row():
        kind = gr.Dropdown(
            types, value=None, label=f"Type of the {what} clicked", scale=2, elem_id=f"{elem_prefix}-type"
        )
        add = gr.Button(f"Add a {what}", scale=1, elem_id=f"{elem_prefix}-add")
        delete = gr.Button(f"Delete the {what} clicked", scale=1, elem_id=f"{elem_prefix}-delete")

    def on_select(table: pd.DataFrame, evt: gr.SelectData) -> tuple[Any, Any]:
        row = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
        now = _text(table.iat[row, type_column]) if row < len(table) else ""
        return row, gr.update(value=now if now in types else None, label=f"Type of {what} {row + 1}")

    @explained
    def on_type(table: pd.DataFrame, row: int | None, chosen: str | None) -> Any:
        if row is None or row >= len(table):
            raise Refused(f"Click a cell of a {what} in the table first, then choose its type.")
        changed = table.copy()
        changed.iat[row, type_column] = chosen or types[0]
        return changed

    def on_add(table: pd.DataFrame) -> tuple[Any, Any, Any]:
        blank = ["" for _ in table.columns]
        blank[type_column] = types[0]
        grown = pd.concat([table.fillna(""), pd.DataFrame([blank], columns=table.columns)], ignore_index=True)
        return grown, len(grown) - 1, gr.update(value=types[0], label=f"Type of {what} {len(grown)}")

    @explained
    def on_delete(table: pd.DataFrame, row: int | None) -> tuple[Any, Any, Any]:
        if row is None or row >= len(table):
            raise Refused(f"Click a cell of the {what} to delete first.")
        kept = table.drop(index=table.index[row]).reset_index(drop=True)
        return kept, None, gr.update(value=None, label=f"Type of the {what} clicked")

    frame.select(on_select, frame, [clicked, kind], **_QUEUED)
    add.click(on_add, frame, [frame, clicked, kind], **_QUEUED)
    delete.click(on_delete, [frame, clicked], [frame, clicked, kind], **_QUEUED)
    return kind.input(on_type, [frame, clicked, kind], frame, **_QUEUED)


def with_column_rows(fields: pd.DataFrame, cols: pd.DataFrame, *, table: str, type_column: int) -> pd.DataFrame:
    """The column table with a first column row for every field of type `table` that has none yet."""
    named = {_text(v) for v in cols.iloc[:, 0]} if len(cols) else set()
    missing = [
        str(row.iloc[0]).strip()
        for _, row in fields.iterrows()
        if _text(row.iloc[type_column]) == table
        and str(row.iloc[0]).strip()
        and str(row.iloc[0]).strip().lower() not in named
    ]
    if not missing:
        return cols
    kept = cols.fillna("")[[any(str(v).strip() for v in row) for row in cols.fillna("").values.tolist()]]
    starters = pd.DataFrame(
        [[name, "", "text", "", "", ""][: len(cols.columns)] for name in missing], columns=cols.columns
    )
    return pd.concat([kept, starters], ignore_index=True)


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value).strip().lower()
