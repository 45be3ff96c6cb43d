"""Cells of the review table: values shown as text, and typed text read back as the field's type."""

from __future__ import annotations

from app.extraction.cells import cell_text, cell_value


def test_values_become_the_text_people_edit() -> None:
    assert cell_text(None) == ""
    assert cell_text(True) == "yes" and cell_text(False) == "no"
    assert cell_text(["a", "b"]) == "a; b"
    assert cell_text(1250.5) == "1250.5"


def test_typed_text_becomes_the_fields_type() -> None:
    assert cell_value("1,250.50", {"type": "number"}) == 1250.5
    assert cell_value("42", {"type": "integer"}) == 42
    assert repr(cell_value("12", {"type": "number"})) == "12", "a whole number typed stays whole (not 12.0)"
    assert cell_value("yes", {"type": "boolean"}) is True and cell_value("no", {"type": "boolean"}) is False
    assert cell_value("a; b ;", {"type": "array", "items": {"type": "string"}}) == ["a", "b"]
    assert cell_value("  ", {"type": "string"}) is None  # an emptied cell clears the field
    assert cell_value("twelve", {"type": "integer"}) == "twelve"  # left for the schema check to refuse


def test_text_and_value_round_trip() -> None:
    spec = {"type": "array", "items": {"type": "number"}}
    assert cell_value(cell_text([1.5, 2.0]), spec) == [1.5, 2.0]
