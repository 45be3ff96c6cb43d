"""Tables in extraction, without the model: the schema subset and its pointers, the grammar's schema,
an answer cut at a row boundary, rows merged across parts, each row traced to its lines, exports."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from app.database import Database
from app.extraction.answers import bounded, check, clean, cut, describe
from app.extraction.fields import column_rows, field_rows, schema_from_fields
from app.extraction.grounding import PageTexts
from app.extraction.json_schema import SchemaProblem, check_schema, field_types, key_columns, load_templates
from app.extraction.merge import PartResult, merge, record_of
from app.extraction.rows import is_short, place_row
from app.extraction.store import ExtractionStore

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = load_templates(ROOT / "assets/schemas")
COUNTRIES = {
    "type": "object",
    "properties": {
        "source": {"type": "string", "title": "Source", "examples": ["World Factbook"], "minLength": 2},
        "countries": {
            "type": "array",
            "minItems": 1,
            "maxItems": 6,
            "items": {
                "type": "object",
                "properties": {
                    "country": {"type": "string", "description": "Name", "maxLength": 60},
                    "capital": {"type": ["string", "null"], "default": None},
                    "population_millions": {"type": "number", "minimum": 0, "exclusiveMaximum": 2000},
                    "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "continent": {"type": "string", "enum": ["Europe", "Asia", "Africa", "Americas", "Oceania"]},
                    "founded": {"type": "string", "format": "date"},
                    "updated": {"type": "string", "format": "date-time"},
                    "contact": {"type": "string", "format": "email"},
                    "site": {"type": "string", "format": "uri"},
                    "kind": {"type": "string", "const": "country"},
                    "area": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 2e7},
                },
                "required": ["country", "capital"],
            },
        },
    },
}
ROW = {
    "country": "France",
    "capital": "Paris",
    "population_millions": 68.2,
    "code": "FRA",
    "continent": "Europe",
    "founded": "1792-09-22",
    "updated": "2024-03-01T10:00:00Z",
    "contact": "info@example.fr",
    "site": "https://www.gouvernement.fr",
    "kind": "country",
    "area": None,
}


def pointer_of(schema: dict[str, Any]) -> str:
    with pytest.raises(SchemaProblem) as caught:
        check_schema(schema)
    return caught.value.pointer


def test_a_table_with_the_keywords_people_write_is_accepted_and_validates() -> None:
    schema = check_schema(json.dumps(COUNTRIES))
    assert field_types(schema) == {"source": "text", "countries": "table"}
    assert schema["properties"]["countries"]["items"]["additionalProperties"] is False
    assert key_columns(schema["properties"]["countries"]) == ["country", "capital"]
    assert check({"source": "CIA", "countries": [ROW]}, schema) is None
    wrong = {
        "code": "fra",
        "population_millions": -1,
        "founded": "22.09.1792",
        "updated": "2024-03-01",
        "contact": "nobody",
        "site": "not a uri",
        "kind": "state",
        "area": 0,
        "continent": "Europa",
    }
    for column, value in wrong.items():
        assert check({"countries": [{**ROW, column: value}]}, schema) is not None, column
    assert "countries: [] should be non-empty" in str(check({"countries": []}, schema))
    assert check({"countries": [ROW] * 7}, schema) is not None, "maxItems"
    assert check({"countries": [{"country": "France"}]}, schema) == "countries/0: 'capital' is a required property"


@pytest.mark.parametrize(
    ("field", "pointer"),
    [
        (
            {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}},
            "/properties/t/items/properties/a/type",
        ),
        (
            {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "array", "items": {}}}}},
            "/properties/t/items/properties/a/type",
        ),
        (
            {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1}},
            "/properties/t/items/minProperties",
        ),
        ({"type": "array", "uniqueItems": True, "items": {"type": "string"}}, "/properties/t/uniqueItems"),
        (
            {"type": "array", "items": {"type": "object", "properties": {"a b": {"type": "string"}}}},
            "/properties/t/items/properties/a b",
        ),
        (
            {
                "type": "array",
                "items": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
            },
            "/properties/t/items/additionalProperties",
        ),
        ({"type": "string", "pattern": "(unclosed"}, "/properties/t/pattern"),
        ({"type": "number", "const": "7"}, "/properties/t/const"),
        ({"type": ["number", "null"], "default": "none"}, "/properties/t/default"),
        ({"type": "number", "maxLength": 3}, "/properties/t/maxLength"),
        ({"type": "string", "format": "ipv4"}, "/properties/t/format"),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "/properties/t/type"),
    ],
)
def test_what_is_still_outside_is_refused_with_its_pointer(field: dict[str, Any], pointer: str) -> None:
    assert pointer_of({"type": "object", "properties": {"t": field}}) == pointer


def test_the_grammar_schema_bounds_tables_and_keeps_the_users_bounds() -> None:
    schema = check_schema(COUNTRIES)
    tight = bounded(schema)
    assert "required" not in bounded(TEMPLATES["invoice"].schema), "beside fields, a table stays optional"
    assert bounded({"type": "object", "properties": {"rows": LINE}})["required"] == ["rows"]
    table = tight["properties"]["countries"]
    assert (table.get("minItems"), table["maxItems"]) == (None, 6), "a part without the table may say []"
    whole = bounded(schema, whole=True)["properties"]["countries"]
    assert (whole["minItems"], whole["maxItems"]) == (1, 6), "a document read in one part: the user's minimum holds"

    assert clean({"source": None, "countries": []}) == {}, "an empty table is left out before the check"
    cells = table["items"]["properties"]
    assert cells["country"]["maxLength"] == 60 and cells["code"] == {"type": "string", "pattern": "^[A-Z]{3}$"}
    assert cells["capital"] == {"anyOf": [{"type": "string", "maxLength": 80}, {"type": "null"}]}
    assert "maxLength" not in cells["founded"] and cells["contact"]["maxLength"] == 80
    loose = bounded({"type": "object", "properties": {"n": {"type": "string", "pattern": r"^\d+$"}}})
    assert "pattern" not in loose["properties"]["n"], "a pattern the grammar cannot write is checked after"
    assert loose["properties"]["n"]["maxLength"] == 200
    assert check({"n": "12a"}, {"type": "object", "properties": {"n": {"type": "string", "pattern": r"^\d+$"}}})


def test_the_prompt_describes_a_tables_columns() -> None:
    text = describe(check_schema(COUNTRIES))
    assert "- countries (table; at most 6 rows; columns country (text), capital (text), population_millions " in text
    assert "    country: Name" in text, "a column's description under its table"


def test_an_answer_cut_by_the_cap_is_closed_at_its_last_whole_row() -> None:
    text = '{"source": "x", "countries": [{"country": "France", "capital": "Paris"}, {"country": "Spain, \\"}", '
    closed = cut(text + '"capital": "Madrid"}, {"country": "Ita')
    assert closed is not None and closed.note == "'countries' cut after 2 rows"
    assert closed.record["countries"][1] == {"country": 'Spain, "}', "capital": "Madrid"}
    fields_only = cut('{"source": "x", "countries": [{"coun')
    assert fields_only is not None and fields_only.record == {"source": "x"}
    assert cut('{"source": "x') is None


def test_the_field_table_has_a_table_type_with_its_columns_in_a_second_table() -> None:
    schema = schema_from_fields(
        [["invoice_number", "text", "", "yes"], ["line_items", "table", "Items"]],
        column_rows=[["line_items", "description", "text", "", "yes"], ["line_items", "amount", "number"], []],
    )
    items = schema["properties"]["line_items"]
    assert items["items"]["properties"] == {"description": {"type": "string"}, "amount": {"type": "number"}}
    assert items["items"]["required"] == ["description"] and items["description"] == "Items"
    assert column_rows(schema) == [
        ["line_items", "description", "text", "", "yes", ""],
        ["line_items", "amount", "number", "", "", ""],
    ]
    assert schema_from_fields(field_rows(schema), title=schema["title"], column_rows=column_rows(schema)) == schema
    with pytest.raises(SchemaProblem, match="row 2: the table 'line_items' has no columns"):
        schema_from_fields([["a", "text"], ["line_items", "table"]])
    with pytest.raises(SchemaProblem, match="column row 1: 'a' is not a field of type 'table'"):
        schema_from_fields([["a", "text"]], column_rows=[["a", "x", "text"]])
    with pytest.raises(SchemaProblem, match="column row 1: type 'table' is not one of"):
        schema_from_fields([["t", "table"]], column_rows=[["t", "x", "table"]])


PAGES = {
    1: "INVOICE INV-7\nPos Description Qty Unit price Amount\n1 Hardened steel shaft 120 18.40 2,208.00\n"
    "2 Bearing housing, cast aluminium 60 42.75 2,565.00\nShipping terms: 1 pallet, EXW\n",
    2: "3 CNC machining setup 1 350.00 350.00\nTotal 5,123.00 EUR\nNotes\n\n\nqty 75 was ordered\n\n\n"
    "price 99.10 agreed\n\n\nwork: Calibration visit\n",
}
LINE = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description"],
        "properties": {
            "description": {"type": "string"},
            "quantity": {"type": "number"},
            "unit_price": {"type": "number"},
            "amount": {"type": "number"},
        },
    },
}
SCHEMA = check_schema({"type": "object", "properties": {"number": {"type": "string"}, "lines": LINE}})


def test_a_row_is_verified_where_its_cells_stand_together_on_one_line() -> None:
    texts = PageTexts(PAGES)
    row = {"description": "Hardened steel shaft", "quantity": 120, "unit_price": 18.4, "amount": 2208}
    place = place_row(row, texts)
    assert (place.page, place.verified) == (1, True)
    assert place.snippet == "1 Hardened steel shaft 120 18.40 2,208.00"
    assert all(cell.verified and cell.page == 1 for cell in place.cells.values())
    assert "2,208.00" in place.cells["amount"].snippet
    wrapped = place_row({"description": "CNC machining setup", "quantity": 1, "amount": 5123}, texts)
    assert (wrapped.page, wrapped.verified) == (2, True), "the next line still counts as the row"


def test_a_row_whose_cells_are_scattered_over_lines_is_not_verified() -> None:
    texts = PageTexts(PAGES)
    scattered = place_row({"description": "Calibration visit", "quantity": 75, "unit_price": 99.1}, texts)
    assert (scattered.page, scattered.verified) == (2, False)
    cells = scattered.cells
    assert cells["description"].verified is True, "a long text found on the page is its own proof"
    assert cells["quantity"].verified is False and cells["unit_price"].verified is False, "numbers need their row"
    mixed = place_row({"description": "Hardened steel shaft", "quantity": 60, "amount": 350}, texts)
    assert mixed.verified is False, "cells of different rows do not make a row"


def test_a_short_value_alone_never_verifies_a_row() -> None:
    texts = PageTexts(PAGES)
    assert is_short(1) and is_short("USD") and is_short("2,208.00") and not is_short("Hardened steel")
    assert place_row({"quantity": 1}, texts).verified is False, "'1' is on every page"
    assert place_row({"description": "EXW"}, texts).verified is False
    assert place_row({"description": "EUR", "quantity": 1}, texts).verified is False, "1 and EUR are not near"
    assert place_row({"description": "USD"}, PageTexts({1: "price in USDT only"})).cells["description"].page == 1
    assert place_row({"description": "teel shaf"}, texts).verified is False, "a whole token, not a piece of one"


def test_rows_from_parts_are_appended_duplicates_folded_and_key_conflicts_flagged() -> None:
    first = [
        {"description": "Hardened steel shaft", "quantity": 120, "amount": 2208},
        {"description": "Bearing housing, cast aluminium", "quantity": 60, "amount": 2565},
    ]
    second = [
        {"description": "hardened  steel shaft", "quantity": 120.0, "amount": 2208.0},  # the same row
        {"description": "CNC machining setup", "quantity": 1, "amount": 350},
        {"description": "Bearing housing, cast aluminium", "quantity": 6, "amount": 2565},
    ]
    fields = merge(
        [PartResult((1,), {"number": "INV-7", "lines": first}), PartResult((2,), {"lines": second})], SCHEMA, PAGES
    )
    lines = fields["lines"]
    assert [r["description"] for r in lines.value] == [
        "Hardened steel shaft",
        "Bearing housing, cast aluminium",
        "CNC machining setup",
        "Bearing housing, cast aluminium",
    ]
    assert [r.parts for r in lines.rows] == [2, 1, 1, 1]
    assert [r.conflict for r in lines.rows] == [False, True, False, True] and lines.conflict
    assert lines.rows[1].conflicts_with == [3] and lines.rows[3].conflicts_with == [1]
    assert [(r.page, r.verified) for r in lines.rows] == [(1, True), (1, True), (2, True), (2, False)]
    assert lines.verified is False
    assert record_of(fields)["lines"][2] == {"description": "CNC machining setup", "quantity": 1, "amount": 350}
    assert check(record_of(fields), SCHEMA) is None


def test_a_table_is_exported_one_csv_row_per_row_and_json_keeps_the_nesting(tmp_path: Path) -> None:
    store = ExtractionStore(Database(tmp_path / "q.db"))
    run_id = store.create_run(template="t", schema=SCHEMA, title="T", documents_total=1)
    rows = [
        {"description": "Hardened steel shaft", "quantity": 120, "amount": 2208},
        {"description": "=cmd", "quantity": 1},
    ]
    result = store.save_result(
        run_id, "a.pdf", merge([PartResult((1,), {"number": "INV-7", "lines": rows})], SCHEMA, PAGES)
    )
    flat = list(csv.DictReader(io.StringIO(store.export_csv(run_id).lstrip("\ufeff"))))
    assert flat[0]["lines"] == "2" and flat[0]["number"] == "INV-7"
    table = list(csv.reader(io.StringIO(store.export_table_csv(run_id, "lines").lstrip("\ufeff"))))
    assert table[0] == [
        "document",
        "row",
        "description",
        "quantity",
        "unit_price",
        "amount",
        "page",
        "verified",
        "conflict",
    ]
    assert table[1] == ["a.pdf", "1", "Hardened steel shaft", "120", "", "2208", "1", "yes", ""]
    assert table[2][:4] == ["a.pdf", "2", "'=cmd", "1"] and table[2][7] == "no"
    with pytest.raises(LookupError, match="'number' is not a table"):
        store.export_table_csv(run_id, "number")
    exported = json.loads(store.export_json(run_id))[0]
    assert exported["record"]["lines"][0]["quantity"] == 120
    cell = exported["fields"]["lines"]["rows"][0]["cells"]["amount"]
    assert cell["page"] == 1 and "2,208.00" in cell["snippet"] and cell["verified"] is True
    with pytest.raises(ValueError, match="lines/1/quantity: 'many' is not of type 'number'"):
        store.correct(result, "lines", [rows[0], {"description": "x", "quantity": "many"}])
    store.correct(result, "lines", [rows[0], {"description": "Wartung", "quantity": 1}])
    corrected = list(csv.reader(io.StringIO(store.export_table_csv(run_id, "lines").lstrip("\ufeff"))))
    assert corrected[2][:4] == ["a.pdf", "2", "Wartung", "1"] and corrected[2][6:] == ["", "", ""]


def test_the_templates_have_real_tables_and_keep_their_flat_fields() -> None:
    types = {name: field_types(t.schema) for name, t in TEMPLATES.items()}
    assert types["invoice"]["line_items"] == "table" and types["invoice"]["total"] == "number"
    assert types["lab_report"]["results"] == "table" and types["lab_report"]["report_date"] == "date"
    assert types["datasheet"]["specifications"] == "table" and types["datasheet"]["weight_kg"] == "number"
    assert types["contract"]["parties"] == "table" and types["contract"]["deadlines"] == "table"
    assert types["contract"]["governing_law"] == "text"
    deadlines = TEMPLATES["contract"].schema["properties"]["deadlines"]["items"]["properties"]
    assert deadlines["due_date"]["format"] == "date"


def test_a_cell_corrected_in_the_table_grid_becomes_a_correction_of_that_documents_table(tmp_path: Path) -> None:
    from app.extraction.service import ExtractionService

    store = ExtractionStore(Database(tmp_path / "q.db"))
    service = ExtractionService(store, None, None, ROOT / "assets/schemas")  # type: ignore[arg-type]
    run_id = store.create_run(template="t", schema=SCHEMA, title="T", documents_total=2, owner="user:ada")
    for name, rows in (
        ("a.pdf", [{"description": "Hardened steel shaft", "quantity": 120}]),
        ("b.pdf", [{"description": "CNC machining setup", "quantity": 1}, {"description": "x"}]),
    ):
        store.save_result(run_id, name, merge([PartResult((1,), {"lines": rows})], SCHEMA, PAGES))
    shown = [
        {
            "document": r.document_name,
            "row": str(i + 1),
            "description": row["description"],
            "quantity": str(row.get("quantity", "")),
            "unit_price": "",
            "amount": "",
        }
        for r, i, row in service.table_rows(run_id, "lines", owner="user:ada")
    ]
    assert [(s["document"], s["row"]) for s in shown] == [("a.pdf", "1"), ("b.pdf", "1"), ("b.pdf", "2")]
    shown[2]["quantity"], shown[2]["amount"] = "3", "1,050.00"
    assert service.correct_table_cells(run_id, "lines", shown, owner="user:ada") == 2
    a, b = store.results(run_id)
    assert a.corrected == {} and b.corrected["lines"][1] == {"description": "x", "quantity": 3, "amount": 1050.0}
    assert b.final["lines"][0] == {"description": "CNC machining setup", "quantity": 1}
    shown[0]["quantity"] = "many"
    with pytest.raises(ValueError, match=r"a\.pdf, lines/0/quantity: 'many' is not of type 'number'"):
        service.correct_table_cells(run_id, "lines", shown, owner="user:ada")
    with pytest.raises(ValueError, match="'number' is not a table"):
        service.correct_table_cells(run_id, "number", shown, owner="user:ada")
