"""What the model is asked and what is made of its answer: the fields described for the prompt, the
schema the grammar enforces (`bounded`), the check of a record against the user's schema, and a
cut-off answer closed at its last whole table row (`cut`) rather than thrown away or left broken."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import best_match

from app.engine.llama.schema_grammar import pattern_expressible
from app.extraction.json_schema import columns, is_table, scalar_type, type_word, validator

TEXT_CHARS, ITEM_CHARS, CELL_CHARS = 200, 80, 80  # bounds the grammar puts on free text
ITEMS, ROWS = 10, 50  # bounds on the lengths of lists and tables (a user's maxItems may lower them)
_GRAMMAR_FORMATS = ("date", "date-time")  # formats llama.cpp's converter writes as grammar


@dataclass(frozen=True)
class Cut:
    """A cut-off answer closed at a boundary: the record, and what was lost, for people."""

    record: dict[str, Any]
    note: str


def bounded(schema: dict[str, Any], *, whole: bool = False) -> dict[str, Any]:
    """The schema the grammar enforces: the user's, with free text, lists and tables bounded (a small
    model otherwise fills them until the token cap), nullable types as a union the converter keeps the
    bounds of, and patterns the grammar cannot write left to the check after. A schema made only of
    tables has them required in the grammar, with no minimum of rows (the demo model otherwise answers
    `{}`; `clean` drops an empty table before the check). With other fields, tables stay optional: the
    demo model, made to open a table in a document without one, fills it with invented rows up to the
    cap and loses the fields (llama.cpp's converter writes required properties first). Every answer it
    allows that also meets the user's numeric bounds, formats and patterns validates against the
    user's schema. A table's `minItems` holds in the grammar only when the part is the `whole`
    document: a part of a longer one may lack the table and answers [] (the rows of all parts count)."""
    out = copy.deepcopy(schema)
    properties = out.get("properties", {})
    out["properties"] = {name: _bound_field(spec, whole) for name, spec in properties.items()}
    tables = [name for name, spec in properties.items() if is_table(spec)]
    if tables and len(tables) == len(properties):  # only tables: the model must open them; [] says "none"
        out["required"] = list(dict.fromkeys([*out.get("required", []), *tables]))
    return out


def clean(record: Any) -> Any:
    """The record without the fields the answer left empty (null, or a table or list with no rows)."""
    if not isinstance(record, dict):
        return record
    return {name: value for name, value in record.items() if value is not None and value != []}


def check(record: Any, schema: dict[str, Any]) -> str | None:
    """None when the record validates against the user's schema (formats too), else what is wrong."""
    error = best_match(validator(schema).iter_errors(record))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the answer"
    return f"{where}: {error.message}"


def cut(text: str) -> Cut | None:
    """A JSON object cut off mid-answer, closed after its last whole table row or whole field; None
    when nothing whole came before the cut."""
    stack: list[str] = []
    ends: list[tuple[int, str]] = []  # (where the text can be cut, what closes it)
    in_string = escaped = False
    for i, c in enumerate(text):
        if in_string:
            escaped, in_string = (False, True) if escaped else (c == "\\", c != '"')
            continue
        if c == '"':
            in_string = True
        elif c in "{[":
            stack.append(c)
        elif c in "}]" and stack:
            stack.pop()
            if c == "}" and stack == ["{", "["]:
                ends.append((i + 1, "]}"))
        elif c == "," and stack == ["{"]:
            ends.append((i, "}"))
    for end, closing in reversed(ends):
        try:
            record = json.loads(text[:end] + closing)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record:
            last = list(record)[-1]
            if closing == "]}":
                return Cut(record, f"'{last}' cut after {len(record[last])} rows")
            return Cut(record, f"the fields after '{last}' were cut")
    return None


def describe(schema: dict[str, Any]) -> str:
    """The fields for the prompt: name, type in the field table's words, bounds, description; a
    table's columns by name and type on its line, their descriptions indented under it."""
    lines = []
    for name, spec in schema.get("properties", {}).items():
        lines.append(f"- {_line(name, spec)}")
        lines += [
            f"    {column}: {cell['description']}" for column, cell in columns(spec).items() if cell.get("description")
        ]
    return "\n".join(lines)


def _line(name: str, spec: dict[str, Any]) -> str:
    kind = type_word(spec)
    said = []
    if is_table(spec):
        kind = "table"
        if "maxItems" in spec:
            said.append(f"at most {spec['maxItems']} rows")
        said.append("columns " + ", ".join(f"{c} ({type_word(cell)})" for c, cell in columns(spec).items()))
    kind += {"date": " YYYY-MM-DD", "date-time": " YYYY-MM-DDThh:mm:ssZ"}.get(kind, "")
    if spec.get("format") in ("email", "uri"):
        kind += f" ({spec['format']})"
    if "enum" in spec:
        said.append(f"one of {', '.join(map(str, spec['enum']))}")
    for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
        if key in spec:
            said.append(f"{word} {spec[key]}")
    described = f"{name} ({kind}{'; ' + '; '.join(said) if said else ''})"
    text = spec.get("description") or spec.get("title") or ""
    return f"{described}: {text}" if text else described


def _bound_field(spec: dict[str, Any], whole: bool) -> dict[str, Any]:
    if spec.get("type") != "array":
        return _bound_scalar(spec, TEXT_CHARS)
    cap = ROWS if is_table(spec) else ITEMS
    spec["maxItems"] = max(spec.get("minItems", 0), min(spec.get("maxItems", cap), cap))
    if is_table(spec) and not whole:  # a part without the table answers [] (all parts' rows count)
        spec.pop("minItems", None)
    items = spec.get("items", {})
    if is_table(spec):
        items["properties"] = {c: _bound_scalar(cell, CELL_CHARS) for c, cell in items["properties"].items()}
    else:
        spec["items"] = _bound_scalar(items, ITEM_CHARS)
    return spec


def _bound_scalar(spec: dict[str, Any], chars: int) -> dict[str, Any]:
    for note in ("description", "title", "examples", "default", "$comment"):
        spec.pop(note, None)
    if "pattern" in spec and not pattern_expressible(spec["pattern"]):
        del spec["pattern"]
    if (
        scalar_type(spec) == "string"
        and not ({"enum", "const", "pattern"} & spec.keys())
        and spec.get("format") not in _GRAMMAR_FORMATS
    ):
        spec["maxLength"] = max(spec.get("minLength", 0), min(spec.get("maxLength", chars), chars))
    if isinstance(spec.get("type"), list):  # ["number", "null"]: a union keeps the bounds on the first
        kind = scalar_type(spec)
        return {"anyOf": [{**spec, "type": kind}, {"type": "null"}]}
    return spec
