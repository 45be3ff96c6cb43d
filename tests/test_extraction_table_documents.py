"""Tables extracted by the demo model through the running appliance, from documents the test makes:
a two-page invoice PDF with six line items, a lab report PDF with twelve results, a Chinese invoice.
Every record validates; the rows match the known ones to a stated share of cells; each matched row
cites its real page; `maxItems` holds; a capped answer is cut at a row, never broken; a schema that
nests two levels is refused before any model call."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from app.extraction.grounding import normalise
from app.extraction.json_schema import check_schema, format_checker
from tests.gradio_api import Client
from tests.harness import Appliance, api_client, metric, wait_until
from tests.table_documents import Known, chinese_invoice, invoice, lab_report, pdf

# The share of the known cells the 270M demo model got, measured here (lab report: 0.50 alone, 0.29 and 0.13
# in full suites, where other answers share its batches, before it was asked for six rows at least; since,
# 0.50 and 0.69 beside two other streams; invoice: 0.08 (4 of 48), six rows cut at 240 tokens
# with wrong descriptions), with room below the lowest seen: a bound that still fails when tables break (no
# rows: 0, rows from nowhere: ~0, cells in the wrong columns: only the few that land right). On the Chinese
# invoice the demo model's rows are mostly its own, so only validity and pages are checked there (None).
# Each table asks for at least one row (`minItems: 1`), which the grammar holds because each document here is
# read in one part: left free, the demo model answered the invoice with an empty table in some full runs
# (`{}`, no problem named). The subject is the rows and their pages, not whether the model opens a table.
MIN_CELL_SHARE: dict[str, float | None] = {"invoice": 0.05, "lab": 0.15, "chinese": None}

LINE_ITEMS = {
    "type": "array",
    "minItems": 1,
    "maxItems": 8,
    "description": "The invoice's line items, one row per position.",
    "items": {
        "type": "object",
        "required": ["description"],
        "properties": {  # no column descriptions: the demo model copies them into the cells
            "description": {"type": "string"},
            "quantity": {"type": "number"},
            "unit_price": {"type": "number"},
            "amount": {"type": "number"},
        },
    },
}
INVOICE_SCHEMA = {"type": "object", "properties": {"line_items": LINE_ITEMS}}
RESULTS = {
    "type": "array",
    "minItems": 1,
    "maxItems": 14,
    "description": "The table of results, one row per analyte.",
    "items": {
        "type": "object",
        "required": ["analyte"],
        "properties": {
            "analyte": {"type": "string", "description": "The analyte's name."},
            "value": {"type": ["number", "null"], "description": "The result."},
            "unit": {"type": "string", "description": "The unit."},
            "reference_range": {"type": "string", "description": "The reference range, as written."},
        },
    },
}
LAB_SCHEMA = {"type": "object", "properties": {"results": RESULTS}}
ROW_TOKENS = 240  # room for about six rows: more is cut at a row (and keeps a shared, busy machine in its timeout)
DOCUMENTS = {"invoice": "invoice-tables.pdf", "lab": "lab-report-tables.pdf", "chinese": "发票-明细.txt"}


@pytest.fixture(scope="module")
def client(appliance: Appliance, tmp_path_factory: pytest.TempPathFactory) -> Client:
    folder = tmp_path_factory.mktemp("tables")
    (folder / DOCUMENTS["invoice"]).write_bytes(pdf(invoice().pages))
    (folder / DOCUMENTS["lab"]).write_bytes(pdf(lab_report().pages))
    (folder / DOCUMENTS["chinese"]).write_text("\n".join(chinese_invoice().pages[0]), encoding="utf-8")
    c = api_client(appliance.url)
    c.predict([handle_file(str(folder / name)) for name in DOCUMENTS.values()], api_name="/ingest")

    def ready() -> bool:
        docs = {d["name"]: d["status"] for d in c.predict(api_name="/documents")}
        return all(docs.get(name) == "ok" for name in DOCUMENTS.values())

    wait_until(ready, timeout=180, every=0.5)
    return c


def extract(client: Client, document: str, schema: dict[str, Any], max_tokens: int = 0) -> dict[str, Any]:
    result: dict[str, Any] = client.predict(
        DOCUMENTS[document], "", json.dumps(schema), max_tokens, api_name="/extract"
    )
    jsonschema.validate(result["record"], check_schema(schema), format_checker=format_checker())
    return result


def same(got: Any, known: Any) -> bool:
    if isinstance(known, int | float) and isinstance(got, int | float) and not isinstance(got, bool):
        return math.isclose(got, known, abs_tol=0.005)
    return isinstance(got, str) and normalise(got) == normalise(str(known))


def matches(rows: list[dict[str, Any]], known: Known, key: str) -> tuple[float, list[tuple[int, int]]]:
    """The share of the known cells found in the extracted rows (each known row paired with the extracted
    row that shares the most cells with it), and the pairs (extracted index, known index)."""
    cells = sum(len(row) for row in known.rows)
    found, pairs = 0, []
    for k, want in enumerate(known.rows):
        scores = [(sum(same(row.get(c), v) for c, v in want.items()), i) for i, row in enumerate(rows)]
        best, index = max(scores, default=(0, -1))
        found += best
        if index >= 0 and same(rows[index].get(key), want[key]):
            pairs.append((index, k))
    return found / cells, pairs


def check_table(result: dict[str, Any], field: str, known: Known, key: str, document: str) -> float:
    rows = result["record"].get(field, [])
    share, pairs = matches(rows, known, key)
    print(
        f"{document}: {len(rows)} rows, {share:.2f} of the known cells, {len(pairs)} rows by key; "
        f"problems: {result['problems']}"
    )
    assert rows, f"{document}: no rows, though the grammar holds minItems 1 on a document read in one part"
    places = result["fields"].get(field, {}).get("rows", [])
    assert len(places) == len(rows)
    for index, k in pairs:
        if places[index]["verified"]:
            assert places[index]["page"] == known.row_pages[k], f"row {index} {rows[index]} cites the wrong page"
    for place in places:  # a verified row is really on its page, cell by cell
        if place["verified"]:
            assert all(cell["verified"] is not False for cell in place["cells"].values()), place
    bound = MIN_CELL_SHARE[document]
    assert bound is None or share >= bound, f"{document}: only {share:.2f} of the known cells"
    return share


def test_an_invoice_over_two_pages_gives_its_line_items_with_their_pages(client: Client) -> None:
    result = extract(client, "invoice", INVOICE_SCHEMA, max_tokens=ROW_TOKENS)
    check_table(result, "line_items", invoice(), "description", "invoice")


def test_a_lab_report_gives_its_twelve_results(client: Client) -> None:
    # At least six rows, held by the grammar: left at one, the demo model closed the table after its first
    # row in a full run where other answers shared its batches (0.13 of the known cells; 0.50 alone).
    result = extract(client, "lab", {"type": "object", "properties": {"results": {**RESULTS, "minItems": 6}}})
    check_table(result, "results", lab_report(), "analyte", "lab")


def test_a_chinese_invoice_gives_its_line_items(client: Client) -> None:
    result = extract(client, "chinese", INVOICE_SCHEMA, max_tokens=ROW_TOKENS)
    check_table(result, "line_items", chinese_invoice(), "description", "chinese")


def test_max_items_is_obeyed(client: Client) -> None:
    schema = {"type": "object", "properties": {"results": {**RESULTS, "maxItems": 3}}}
    result = extract(client, "lab", schema)
    assert 1 <= len(result["record"]["results"]) <= 3


def test_a_capped_answer_is_cut_at_a_row_and_says_so(client: Client) -> None:
    # 90 tokens hold a row or two. Whether the demo model closes its table before the cap is its own choice
    # (in one full run it closed the lab report's after one row), so two documents are asked: an answer
    # that ended whole must validate and name no cut; one that reached the cap must be cut at a row and
    # count its rows right; and at least one of the two must have reached it.
    cuts = []
    for document, schema, field in (("lab", LAB_SCHEMA, "results"), ("invoice", INVOICE_SCHEMA, "line_items")):
        result = extract(client, document, schema, max_tokens=90)
        rows = result["record"][field]
        capped = [p for p in result["problems"] if "cap of 90 tokens" in p]
        assert 1 <= len(rows) <= 8, rows
        if capped:
            assert any(re.search(rf"cap of 90 tokens: '{field}' cut after {len(rows)} rows", p) for p in capped), capped
            cuts.append(document)
    print(f"answers capped at 90 tokens and cut at a row: {cuts}")
    assert cuts, "neither answer reached the cap of 90 tokens"


def test_a_schema_nesting_two_levels_is_refused_before_any_model_call(client: Client, appliance: Appliance) -> None:
    nested = {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "parts": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}}
                    },
                },
            }
        },
    }
    before = metric(appliance, "quartet_engine_requests_total")
    with pytest.raises(AppError, match=re.escape("/properties/rows/items/properties/parts/type: a table's columns")):
        client.predict(DOCUMENTS["invoice"], "", json.dumps(nested), api_name="/extract")
    assert metric(appliance, "quartet_engine_requests_total") == before


def test_the_templates_with_tables_give_valid_records(client: Client) -> None:
    templates = {t: Path(__file__).resolve().parent.parent / "assets" / "schemas" / f"{t}.json" for t in ("invoice",)}
    for name, path in templates.items():
        schema = json.loads(path.read_text(encoding="utf-8"))
        result = extract(client, "invoice", schema, max_tokens=ROW_TOKENS)
        assert result["record"], f"the {name} template found nothing in an invoice"
