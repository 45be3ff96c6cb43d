"""The field table: a schema described in rows a person can edit (name, type, description, required,
allowed values), and a second small table for the columns of each "table" field (the same columns,
with the table's name first). `field_rows`/`column_rows` give the tables of a schema back."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from app.extraction.json_schema import DRAFT, NAME, NAME_RULE, TABLE, SchemaProblem, check_schema, columns, type_word

# the field table's words for the types, in the order the UI offers them
TABLE_TYPES: dict[str, dict[str, Any]] = {
    "text": {"type": "string"},
    "number": {"type": "number"},
    "integer": {"type": "integer"},
    "yes/no": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "list of text": {"type": "array", "items": {"type": "string"}},
    TABLE: {"type": "array", "items": {"type": "object", "properties": {}}},
}
COLUMN_TYPES = [word for word in TABLE_TYPES if word not in (TABLE, "list of text")]
TABLE_COLUMNS = ("name", "type", "description", "required", "allowed values")
COLUMN_COLUMNS = ("table", *TABLE_COLUMNS)
Row = Sequence[Any] | Mapping[str, Any]
_YES = {"yes", "y", "true", "1", "x", "✓", "required"}
_NO = {"", "no", "n", "false", "0"}


def schema_from_fields(
    rows: Sequence[Row], *, title: str = "Custom fields", column_rows: Sequence[Row] = ()
) -> dict[str, Any]:
    """A schema from a field table; a "table" field's columns come from `column_rows` (table, name, type,
    description, required, allowed values). Blank rows are skipped."""
    properties, required = _specs(rows, TABLE_COLUMNS, "row", allow_table=True)
    if not properties:
        raise SchemaProblem("the table has no fields: add a row with a name and a type")
    tables = {name for name, spec in properties.items() if spec["type"] == "array" and "properties" in spec["items"]}
    grouped: dict[str, list[dict[str, str]]] = {}
    for number, row in enumerate(column_rows, start=1):
        cells = _cells(row, COLUMN_COLUMNS)
        if not any(cells.values()):
            continue
        if cells["table"] not in tables:
            raise SchemaProblem(f"'{cells['table']}' is not a field of type 'table'", f"column row {number}")
        grouped.setdefault(cells["table"], []).append({**cells, "number": str(number)})
    for name in tables:
        found = grouped.get(name, [])
        if not found:
            raise SchemaProblem(
                f"the table '{name}' has no columns: add them in the column table",
                f"row {list(properties).index(name) + 1}",
            )
        cols, needed = _specs(found, TABLE_COLUMNS, "column row", allow_table=False)
        properties[name]["items"] = {"type": "object", "properties": cols, **({"required": needed} if needed else {})}
    schema: dict[str, Any] = {"$schema": DRAFT, "title": title, "type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return check_schema(schema)


def field_rows(schema: dict[str, Any]) -> list[list[str]]:
    """The field table of a schema (the reverse of `schema_from_fields`), to start from a template."""
    return _rows(schema)


def column_rows(schema: dict[str, Any]) -> list[list[str]]:
    """The column table of a schema: each table field's columns, the table's name first."""
    tables = [(name, spec) for name, spec in schema.get("properties", {}).items() if columns(spec)]
    return [[name, *row] for name, spec in tables for row in _rows(spec["items"])]


def _rows(schema: dict[str, Any]) -> list[list[str]]:
    needed = set(schema.get("required", []))
    rows = []
    for name, spec in schema.get("properties", {}).items():
        enum = spec.get("enum") or spec.get("items", {}).get("enum") or []
        allowed = ", ".join(str(v) for v in enum)
        rows.append([name, type_word(spec), spec.get("description", ""), "yes" if name in needed else "", allowed])
    return rows


def _specs(
    rows: Sequence[Row], names: Sequence[str], label: str, *, allow_table: bool
) -> tuple[dict[str, Any], list[str]]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    first_row: dict[str, str] = {}
    for number, row in enumerate(rows, start=1):
        cells = row if isinstance(row, dict) and "number" in row else _cells(row, names)
        where = f"{label} {cells.get('number', number)}"
        if not any(v for k, v in cells.items() if k not in ("number", "table")):
            continue
        name, spec, needed = _field_from_cells(cells, where, allow_table=allow_table)
        if name in first_row:
            raise SchemaProblem(f"name '{name}' is used twice (also {first_row[name]})", where)
        first_row[name] = where
        properties[name] = spec
        if needed:
            required.append(name)
    return properties, required


def _field_from_cells(cells: Mapping[str, str], where: str, *, allow_table: bool) -> tuple[str, dict[str, Any], bool]:
    name = cells["name"]
    if not name:
        raise SchemaProblem("name is empty", where)
    if not NAME.fullmatch(name):
        raise SchemaProblem(f"name '{name}' is not usable: {NAME_RULE}", where)
    word = " ".join(cells["type"].lower().split()) or "text"
    offered = list(TABLE_TYPES) if allow_table else COLUMN_TYPES
    if word not in offered:
        raise SchemaProblem(f"type '{cells['type']}' is not one of {', '.join(offered)}", where)
    spec = copy.deepcopy(TABLE_TYPES[word])
    if cells["description"]:
        spec["description"] = cells["description"]
    if cells["required"].lower() not in _YES | _NO:
        raise SchemaProblem(f"required '{cells['required']}' should be yes or no", where)
    if cells["allowed values"]:
        enum = _allowed(cells["allowed values"], word, where)
        (spec["items"] if word == "list of text" else spec)["enum"] = enum
    return name, spec, cells["required"].lower() in _YES


def _allowed(text: str, word: str, where: str) -> list[Any]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if word in ("yes/no", "date", TABLE):
        raise SchemaProblem(f"allowed values do not apply to type '{word}'", where)
    if word in ("number", "integer"):
        parsed: list[Any] = []
        for v in values:
            try:
                number = int(v) if word == "integer" else float(v)
            except ValueError:
                article = "an" if word == "integer" else "a"
                raise SchemaProblem(f"allowed value '{v}' is not {article} {word}", where) from None
            parsed.append(number)
        return parsed
    return values


def _cells(row: Row, names: Sequence[str]) -> dict[str, str]:
    if isinstance(row, Mapping):
        keyed = {" ".join(str(k).replace("_", " ").lower().split()): v for k, v in row.items()}
        values = [keyed.get(column) for column in names]
    else:
        given = list(row)[: len(names)]
        values = given + [None] * (len(names) - len(given))
    return {column: _cell_text(v) for column, v in zip(names, values, strict=True)}


def _cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):  # a dataframe's empty cell
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).strip()
