"""The extraction feature's front door: corrections are looked for again on their pages (the review shows
the new snippet, the JSON keeps the original beside the correction), a stopped run says "stopped", the
grids carry a flag on every cell, and no handler reaches into a service's store, extractor or config."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from app.database import Database
from app.errors import Refused
from app.extraction.corrections import Corrections, place_of
from app.extraction.json_schema import load_templates
from app.extraction.merge import PartResult, merge
from app.extraction.store import ExtractionStore
from app.ui.extraction_review import flat_grid, review, table_grid

ROOT = Path(__file__).resolve().parent.parent
INVOICE = load_templates(ROOT / "assets/schemas")["invoice"].schema
PAGES = {
    1: "INVOICE\nInvoice number: INV-2024-0117\nSeller: Nordlicht Instruments GmbH, Hamburg\n",
    2: "Hardened steel shaft     120    18.40    2,208.00\nCNC machining setup   1   350.00   350.00\n"
    "Total: 2,558.00 EUR\nPayment terms: 30 days net; reference INV-2024-0118 for the credit note\n",
}


@pytest.fixture
def filled(tmp_path: Path) -> tuple[ExtractionStore, int, int]:
    store = ExtractionStore(Database(tmp_path / "q.db"))
    run_id = store.create_run(template="invoice", schema=INVOICE, title="Invoices", documents_total=1)
    record = {
        "invoice_number": "INV-2024-0117",
        "total": 2558.0,
        "seller": "Nordlicht Instruments GmbH",
        "line_items": [
            {"description": "Hardened steel shaft", "quantity": 120, "amount": 2208.0},
            {"description": "CNC machining setup", "quantity": 1, "amount": 350.0},
        ],
    }
    result_id = store.save_result(
        run_id, "invoice.pdf", merge([PartResult((1, 2), record)], INVOICE, PAGES), document_id=3
    )
    store.finish_run(run_id)
    return store, run_id, result_id


def test_a_corrected_value_is_found_again_on_its_pages(filled: tuple[ExtractionStore, int, int]) -> None:
    store, run_id, result_id = filled
    corrections = Corrections(store, lambda document_id: PAGES if document_id == 3 else {})
    run = store.run(run_id)
    assert run is not None
    shown = [{"document": "invoice.pdf", "invoice_number": "INV-2024-0118", "total": "2,558.00"}]
    assert corrections.cells(run, shown) == 1  # the total's text is the same number: no correction
    result = store.result(result_id)
    assert result is not None
    place = result.fields["invoice_number"]["correction"]
    assert (place["value"], place["page"], place["verified"]) == ("INV-2024-0118", 2, True)
    assert "INV-2024-0118" in place["snippet"]
    item = next(li for li in review(run, [result]).split("<li>") if li.startswith("<b>invoice_number</b>"))
    assert "credit note" in item and "p. 2" in item, "the review shows the snippet of the new value"
    assert "Invoice number: INV-2024-0117" not in item, "not the snippet of the old one"
    assert "was: INV-2024-0117" in item
    exported = json.loads(store.export_json(run_id))[0]
    assert exported["corrected"] == {"invoice_number": "INV-2024-0118"}
    assert exported["original"] == {"invoice_number": "INV-2024-0117"}, "the JSON keeps the original value"
    assert exported["fields"]["invoice_number"]["correction"]["page"] == 2
    store.revert(result_id, "invoice_number")
    reverted = store.result(result_id)
    assert reverted is not None and "correction" not in reverted.fields["invoice_number"]


def test_a_correction_no_page_holds_is_marked_unverified(filled: tuple[ExtractionStore, int, int]) -> None:
    store, run_id, result_id = filled
    run = store.run(run_id)
    assert run is not None
    Corrections(store, lambda _id: PAGES).cells(run, [{"invoice_number": "INV-9999"}])
    result = store.result(result_id)
    assert result is not None
    assert result.fields["invoice_number"]["correction"]["verified"] is False
    assert "unverified: not found on its page" in review(run, [result])
    assert place_of("x", {"type": "string"}, {}) is None, "no text: nothing to say"


def test_a_corrected_table_row_is_placed_again_and_its_cell_flagged(filled: tuple[ExtractionStore, int, int]) -> None:
    store, run_id, result_id = filled
    run = store.run(run_id)
    assert run is not None
    corrections = Corrections(store, lambda _id: PAGES)
    rows = [
        {
            "document": r.document_name,
            "row": str(i + 1),
            "description": row["description"],
            "quantity": str(row.get("quantity", "")),
            "unit_price": "",
            "amount": str(row.get("amount", "")),
        }
        for r, i, row in corrections.table_rows(run, "line_items")
    ]
    rows[1]["amount"] = "350.00"  # the same number written another way: unchanged
    rows[0]["quantity"] = "12"
    assert corrections.table_cells(run, "line_items", rows) == 2 - 1
    result = store.result(result_id)
    assert result is not None
    grid = table_grid(run, "line_items", corrections.table_rows(run, "line_items"))
    assert grid["data"][0][:4] == ["invoice.pdf", "1", "Hardened steel shaft", "12"]
    marks = grid["metadata"]["display_value"]
    assert marks[0][3] == "12 ✎" and marks[0][2].endswith("✓"), marks[0]
    assert marks[1][2] == "CNC machining setup ✓", "an untouched row keeps its flags"
    page = review(run, [result])
    assert page.count(">corrected<") == 1, "only the edited row is marked corrected"


def test_the_results_grid_has_a_flag_on_every_cell(filled: tuple[ExtractionStore, int, int]) -> None:
    store, run_id, result_id = filled
    run = store.run(run_id)
    assert run is not None
    store.correct(result_id, "seller", "Nordlicht Instruments")
    grid = flat_grid(run, store.results(run_id))
    headers, marks = grid["headers"], grid["metadata"]["display_value"][0]
    shown = dict(zip(headers, marks, strict=True))
    assert shown["invoice_number"] == "INV-2024-0117 ✓" and shown["total"] == "2558.0 ✓"
    assert shown["seller"] == "Nordlicht Instruments ✎"
    assert grid["data"][0][headers.index("seller")] == "Nordlicht Instruments", "the value itself stays editable text"
    styles = dict(zip(headers, grid["metadata"]["styling"][0], strict=True))
    assert styles["seller"].startswith("--q-flag: '✎';") and styles["invoice_number"] == "--q-flag: '✓';"
    assert styles["document"] == "", "the flag travels in the style: an editable cell shows only its value"


def test_a_stopped_run_is_stopped_not_an_error(tmp_path: Path) -> None:
    store = ExtractionStore(Database(tmp_path / "q.db"))
    run_id = store.create_run(template="invoice", schema=INVOICE, title="A", documents_total=3)
    store.finish_run(run_id, error="stopped by the user", stopped=True)
    run = store.run(run_id)
    assert run is not None and run.status == "stopped"


ALLOWED_UI = ("app/ui/", "app/api/")
HIDDEN = {"store", "extractor", "config"}


def test_handlers_never_reach_into_a_service() -> None:
    """app/ui/* and app/api/* call services: never a service's `.store`, `.extractor` or `.config`."""
    wrong = []
    for top in ALLOWED_UI:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in HIDDEN:
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert not wrong, wrong


def test_the_extraction_tab_gets_only_its_service() -> None:
    import inspect

    from app.extraction.service import ExtractionService
    from app.ui import extraction_api, extraction_tab
    from app.ui.callers import Owners

    for module in (extraction_tab.build, extraction_api.register):
        hints = [p.annotation for p in inspect.signature(module).parameters.values()]
        assert hints in (["ExtractionService", "Owners"], [ExtractionService, Owners]), (
            f"{module.__qualname__} takes {hints}"
        )
    registering = sorted(
        p.name for p in (ROOT / "app/ui").glob("*.py") if 'api_name="extract' in p.read_text(encoding="utf-8")
    )
    assert registering == ["extraction_api.py"], "the extraction endpoints live beside their tab"


def test_a_table_with_no_rows_is_said_to_be_empty(tmp_path: Path) -> None:
    """A table the model found nothing for was left out of the review, which read like a failed run."""
    store = ExtractionStore(Database(tmp_path / "q.db"))
    run_id = store.create_run(template="invoice", schema=INVOICE, title="Invoices", documents_total=1)
    record = {"invoice_number": "INV-2024-0117", "line_items": []}
    store.save_result(run_id, "invoice.pdf", merge([PartResult((1, 2), record)], INVOICE, PAGES), document_id=3)
    run = store.run(run_id)
    assert run is not None
    page = review(run, store.results(run_id))
    assert "<b>invoice_number</b>" in page
    assert "line_items" in page and "no rows found in this document" in page
    assert "<table class='q-grid'" not in page


def test_a_cell_that_does_not_fit_its_type_is_refused_naming_the_document_the_field_once_and_the_type(
    filled: tuple[ExtractionStore, int, int],
) -> None:
    """It said "invoice.pdf, total: total: 'abc' is not of type 'number'" (issue 22, item 6)."""
    store, run_id, result_id = filled
    run = store.run(run_id)
    assert run is not None
    corrections = Corrections(store, lambda document_id: PAGES)
    for field, typed, kind in [("total", "abc", "'number'"), ("invoice_date", "next tuesday", "'date'")]:
        with pytest.raises(Refused) as refused:
            corrections.cells(run, [{"document": "invoice.pdf", field: typed}])
        assert refused.value.message == f"invoice.pdf, {field}: '{typed}' is not " + (
            f"of type {kind}" if kind == "'number'" else f"a {kind}"
        )
    result = store.result(result_id)
    assert result is not None and result.corrected == {}, "nothing refused is stored"
