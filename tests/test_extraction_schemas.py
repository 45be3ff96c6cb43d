"""Extraction schemas: the shipped templates, the supported subset, and the field table."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from jsonschema import FormatChecker
from jsonschema.validators import Draft202012Validator

from app.extraction.fields import field_rows
from app.extraction.fields import schema_from_fields as table
from app.extraction.json_schema import SchemaProblem, check_schema, field_types, load_templates

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "assets/schemas"
SAMPLE = {"text": "ACME GmbH", "number": 1234.5, "integer": 30, "yes/no": True, "date": "2024-03-01"}


def sample_record(schema: dict[str, Any]) -> dict[str, Any]:
    """A value of the right type for every field."""
    record: dict[str, Any] = {}
    for name, kind in field_types(schema).items():
        spec = schema["properties"][name]
        if kind == "table":
            record[name] = [sample_record(spec["items"])]
            continue
        item = SAMPLE[kind.removeprefix("list of ")]
        record[name] = [item, item] if kind.startswith("list of ") else spec.get("minimum", item)
    return record


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=FormatChecker())


def problem(schema: str | dict[str, Any]) -> str:
    with pytest.raises(SchemaProblem) as caught:
        check_schema(schema)
    return str(caught.value)


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_the_four_templates_load_and_are_described() -> None:
    templates = load_templates(TEMPLATES)
    assert list(templates) == ["contract", "datasheet", "invoice", "lab_report"]
    for name, template in templates.items():
        assert template.name == name and template.title and template.description
        raw = json.loads((TEMPLATES / f"{name}.json").read_text(encoding="utf-8"))
        assert raw["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert "required" not in raw, "a field that is not found is left out, so none is required"
        for field, spec in template.schema["properties"].items():
            assert spec.get("description"), f"{name}.{field} has no description"
            if spec.get("format") == "date":
                assert "YYYY-MM-DD" in spec["description"], f"{name}.{field}"
        assert template.schema["additionalProperties"] is False


def test_templates_have_the_fields_the_workbench_promises() -> None:
    types = {name: field_types(t.schema) for name, t in load_templates(TEMPLATES).items()}
    assert types["contract"]["parties"] == "table"
    assert types["contract"]["total_value"] == "number"
    assert types["contract"]["termination_notice_days"] == "integer"
    assert types["contract"]["auto_renewal"] == "yes/no"
    assert types["contract"]["effective_date"] == "date"
    assert {"invoice_number", "invoice_date", "due_date", "seller", "buyer", "subtotal", "tax", "total"} <= set(
        types["invoice"]
    )
    assert types["lab_report"]["collection_date"] == "date"
    assert types["datasheet"]["interfaces"] == "list of text"
    assert types["datasheet"]["weight_kg"] == "number"


@pytest.mark.parametrize("name", ["contract", "datasheet", "invoice", "lab_report"])
def test_each_template_validates_a_sample_record_and_rejects_a_wrong_one(name: str) -> None:
    schema = load_templates(TEMPLATES)[name].schema
    record = sample_record(schema)
    assert list(validator(schema).iter_errors(record)) == []
    assert list(validator(schema).iter_errors({})) == [], "every field may be left out"
    assert not validator(schema).is_valid({**record, "invented": "x"})
    for field, kind in field_types(schema).items():
        wrong = {"text": 1, "number": "1,234.50", "integer": 1.5, "yes/no": "yes", "date": "1 March 2024"}.get(
            kind, "x"
        )
        assert not validator(schema).is_valid({**record, field: wrong}), f"{name}.{field}: {wrong!r} passed"


def test_a_broken_template_is_skipped_not_fatal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "b_good.json").write_text(json.dumps(obj(total={"type": "number"})), encoding="utf-8")
    (tmp_path / "a_broken.json").write_text('{"type": "object", "properties": {', encoding="utf-8")
    (tmp_path / "c_nested.json").write_text(json.dumps(obj(a={"type": "object"})), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        templates = load_templates(tmp_path)
    assert list(templates) == ["b_good"]
    assert templates["b_good"].title == "b_good", "no title: the file's name"
    assert "a_broken.json" in caplog.text and "not valid JSON" in caplog.text
    assert "c_nested.json" in caplog.text and "/properties/a/type" in caplog.text


def test_check_schema_adds_additional_properties_false_without_touching_its_input() -> None:
    given = obj(total={"type": "number"})
    checked = check_schema(json.dumps(given))
    assert checked == {**given, "additionalProperties": False}
    assert check_schema(given) == checked and "additionalProperties" not in given


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            '{\n  "type": "object",\n  "properties": {}\n    "x": 1\n}',
            "not valid JSON: line 4, column 5: Expecting ','",
        ),
        ("[1, 2]", "a schema is a JSON object, not an array"),
        (obj(total={"type": "money"}), "/properties/total/type: 'money' is not a JSON Schema type"),
        (obj(total={"type": "number", "minimum": "0"}), "/properties/total/minimum: '0' is not of type 'number'"),
        ({"type": "array", "items": {"type": "string"}}, "/type: the top level must have type 'object'"),
        (obj(), "/properties: there are no fields"),
        (
            obj(address={"type": "object", "properties": {"city": {"type": "string"}}}),
            "/properties/address/type: nested",
        ),
        (obj(address={"properties": {"city": {"type": "string"}}}), "/properties/address/properties: nested objects"),
        (obj(rows={"type": "array", "items": {"type": "object"}}), "/properties/rows/items: a table's rows need"),
        (obj(grid={"type": "array", "items": {"type": "array"}}), "/properties/grid/items/type: lists of lists"),
        (obj(tags={"type": "array"}), "/properties/tags: a list needs 'items'"),
        (obj(a={"$ref": "#/$defs/a"}) | {"$defs": {"a": {"type": "string"}}}, "/properties/a/$ref: '$ref' is not"),
        (obj(a={"oneOf": [{"type": "string"}, {"type": "number"}]}), "/properties/a/oneOf: 'oneOf' is not supported"),
        (obj(a={"type": "string"}) | {"patternProperties": {"^x": {}}}, "/patternProperties: 'patternProperties' is"),
        (obj(a={"type": ["string", "number"]}), '/properties/a/type: type ["string", "number"]; a field is one of'),
        (obj(a={"description": "no type"}), "/properties/a/type: no type; a field is one of"),
        (obj(a={"type": "string"}) | {"required": ["a", "b"]}, "/required/1: 'b' is not one of the properties"),
        (obj(**{"total amount": {"type": "number"}}), "/properties/total amount: 'total amount' is not a usable"),
        (obj(**{"a/b": {"type": "number"}}), "/properties/a~1b: "),
        (obj(when={"type": "string", "format": "ipv4"}), "/properties/when/format: format 'ipv4' is not"),
        (obj(n={"type": "integer", "enum": [1, "two"]}), '/properties/n/enum/1: "two" is not an integer'),
        (obj(s={"type": "string", "enum": []}), "/properties/s/enum: an empty enum allows no value"),
        (obj(s={"type": "string", "minimum": 1}), "/properties/s/minimum: 'minimum' is not supported here"),
        (obj(s={"type": "string", "uniqueItems": True}), "/properties/s/uniqueItems: 'uniqueItems' is not supported"),
        (obj(a={"type": "string"}) | {"additionalProperties": True}, "/additionalProperties: only false"),
        (obj(a={"type": "string"}) | {"$schema": "http://json-schema.org/draft-07/schema#"}, "/$schema: only"),
        (obj(**{f"f{i}": {"type": "string"} for i in range(41)}), "/properties: 41 fields; at most 40"),
    ],
)
def test_unsupported_schemas_are_rejected_with_a_pointer(schema: str | dict[str, Any], message: str) -> None:
    assert problem(schema).startswith(message)


def test_forty_fields_and_every_supported_keyword_pass() -> None:
    fields: dict[str, Any] = {f"f{i}": {"type": "string"} for i in range(37)}
    fields["n"] = {"type": "number", "minimum": 0, "maximum": 10, "description": "n", "enum": [1, 2.5]}
    fields["s"] = {"type": "string", "maxLength": 5, "format": "date"}
    fields["tags"] = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "description": "t"}
    assert len(check_schema(obj(**fields))["properties"]) == 40


def test_the_field_table_makes_a_schema() -> None:
    schema = table(
        [
            ["invoice_number", "text", "As printed", "yes", ""],
            ["total", "Number", "Incl. tax", "", ""],
            [],
            ["", "", "", "", ""],
            {"Name": "lines", "Type": "integer", "Required": True, "Allowed values": "1, 2, 3"},
            {"name": "paid", "type": "yes/no", "allowed_values": None},
            ["due", "date", None, float("nan")],  # a dataframe's empty cells
            ["status", "list of text", "", "no", "open, closed ,"],
            ["note"],  # no type: text
        ],
        title="Invoices",
    )
    assert schema["title"] == "Invoices" and schema["additionalProperties"] is False
    assert schema["required"] == ["invoice_number", "lines"]
    assert schema["properties"]["total"] == {"type": "number", "description": "Incl. tax"}
    assert schema["properties"]["lines"] == {"type": "integer", "enum": [1, 2, 3]}
    assert schema["properties"]["status"] == {"type": "array", "items": {"type": "string", "enum": ["open", "closed"]}}
    assert field_types(schema) == {
        "invoice_number": "text",
        "total": "number",
        "lines": "integer",
        "paid": "yes/no",
        "due": "date",
        "status": "list of text",
        "note": "text",
    }
    assert table(field_rows(schema), title="Invoices") == schema


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [["a", "text"], [], ["total", "money"]],
            "row 3: type 'money' is not one of text, number, integer, yes/no, da",
        ),
        ([["a", "text"], ["", "number", "the total"]], "row 2: name is empty"),
        ([["total amount", "number"]], "row 1: name 'total amount' is not usable"),
        ([["total", "number"], ["x", "text"], ["total", "text"]], "row 3: name 'total' is used twice (also row 1)"),
        ([["n", "number", "", "", "1, two"]], "row 1: allowed value 'two' is not a number"),
        ([["n", "integer", "", "", "1.5"]], "row 1: allowed value '1.5' is not an integer"),
        ([["d", "date", "", "", "2024-01-01"]], "row 1: allowed values do not apply to type 'date'"),
        ([["a", "text", "", "maybe"]], "row 1: required 'maybe' should be yes or no"),
        ([[], ["", ""]], "the table has no fields"),
    ],
)
def test_bad_table_rows_are_named(rows: list[list[Any]], message: str) -> None:
    with pytest.raises(SchemaProblem) as caught:
        table(rows)
    assert str(caught.value).startswith(message)
