"""A field's value as the text of a table cell, and a cell's text back as the field's JSON type."""

from __future__ import annotations

from typing import Any


def cell_text(value: Any) -> str:
    """Plain text: lists joined with "; ", yes/no for booleans, "" for nothing."""
    if value is None:
        return ""
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return f"{len(value)} row{'s' if len(value) != 1 else ''}"  # a table: its rows are shown apart
    if isinstance(value, list):
        return "; ".join(cell_text(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def cell_value(text: str, spec: dict[str, Any]) -> Any:
    """The text a person typed, as the field's JSON type; text that is not that type stays text
    (the store's schema check then says what is wrong with it). "" clears the field."""
    text = text.strip()
    if not text or text == "nan":
        return None
    kind = spec.get("type")
    if kind == "array":
        return [cell_value(part, spec.get("items", {})) for part in text.split(";") if part.strip()]
    try:
        if kind == "integer":
            return int(text.replace(",", ""))
        if kind == "number":
            number = float(text.replace(",", ""))
            return int(number) if number.is_integer() and "." not in text else number  # "12" stays 12
    except ValueError:
        return text
    if kind == "boolean":
        return text.lower() in ("yes", "true", "y", "1", "是")
    return text
