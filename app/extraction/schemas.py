"""Extraction schemas: a flat subset of JSON Schema that a model can fill and a person can read.

A schema is an object of up to 40 fields; a field is a scalar (text, number, integer, yes/no, date)
or a list of scalars. Templates live as files in `assets/schemas/`; a user can also describe fields in
a small table (`schema_from_fields`). Every problem names the part it is about with a JSON pointer.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.validators import Draft202012Validator, validator_for

log = logging.getLogger(__name__)

MAX_FIELDS = 40
DRAFT = "https://json-schema.org/draft/2020-12/schema"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_NAME_RULE = "letters, digits and _, starting with a letter or _, at most 64 characters"
SCALARS = ("string", "number", "integer", "boolean")
# the field table's words for the types, in the order the UI offers them
TABLE_TYPES: dict[str, dict[str, Any]] = {
    "text": {"type": "string"},
    "number": {"type": "number"},
    "integer": {"type": "integer"},
    "yes/no": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "list of text": {"type": "array", "items": {"type": "string"}},
}
TABLE_COLUMNS = ("name", "type", "description", "required", "allowed values")
_TOP_KEYS = {"$schema", "title", "description", "type", "properties", "required", "additionalProperties"}
_SCALAR_KEYS = {"type", "description", "enum", "format", "minimum", "maximum", "maxLength"}
_ARRAY_KEYS = {"type", "description", "items"}
_COMBINATORS = {"oneOf", "anyOf", "allOf", "not", "if", "patternProperties"}
_A_TYPE = {"string": "a string", "number": "a number", "integer": "an integer", "boolean": "true or false"}
_YES = {"yes", "y", "true", "1", "x", "✓", "required"}
_NO = {"", "no", "n", "false", "0"}


class SchemaProblem(ValueError):
    """A schema or field table we cannot use; `pointer` is where (a JSON pointer, or "row 3")."""

    def __init__(self, message: str, pointer: str = "") -> None:
        super().__init__(f"{pointer}: {message}" if pointer else message)
        self.pointer = pointer


@dataclass(frozen=True)
class Template:
    name: str  # the file's stem
    title: str
    description: str
    schema: dict[str, Any]


def check_schema(schema: str | dict[str, Any]) -> dict[str, Any]:
    """The schema as a dict with `additionalProperties: false`, or SchemaProblem saying what is wrong."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaProblem(f"not valid JSON: line {e.lineno}, column {e.colno}: {e.msg}") from None
    if not isinstance(schema, dict):
        raise SchemaProblem(f"a schema is a JSON object, not {_json_type(schema)}")
    if "$schema" in schema and str(schema["$schema"]).rstrip("#") != DRAFT:
        raise SchemaProblem(f"only JSON Schema draft 2020-12 is supported ({DRAFT})", "/$schema")
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as e:
        raise SchemaProblem(_schema_error_message(e), _pointer(*e.path)) from None
    _check_top(schema)
    checked = copy.deepcopy(schema)
    checked["additionalProperties"] = False
    return checked


def field_types(schema: dict[str, Any]) -> dict[str, str]:
    """Each field's type in the field table's words: "text", "date", "list of number"…"""
    return {name: _type_word(spec) for name, spec in schema.get("properties", {}).items()}


def load_templates(folder: Path) -> dict[str, Template]:
    """Every `*.json` template in `folder`, by name; a broken file is logged and skipped."""
    found: dict[str, Template] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            schema = check_schema(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SchemaProblem) as e:
            log.warning("extraction template %s skipped: %s", path, e)
            continue
        found[path.stem] = Template(path.stem, schema.get("title", path.stem), schema.get("description", ""), schema)
    return found


def schema_from_fields(
    rows: Sequence[Sequence[Any] | Mapping[str, Any]], *, title: str = "Custom fields"
) -> dict[str, Any]:
    """A schema from a field table (name, type, description, required, allowed values); blank rows skipped."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    first_row: dict[str, int] = {}
    for number, row in enumerate(rows, start=1):
        cells = _cells(row)
        if not any(cells.values()):
            continue
        name, spec, needed = _field_from_cells(cells, number)
        if name in first_row:
            raise SchemaProblem(f"name '{name}' is used twice (also row {first_row[name]})", f"row {number}")
        first_row[name] = number
        properties[name] = spec
        if needed:
            required.append(name)
    if not properties:
        raise SchemaProblem("the table has no fields: add a row with a name and a type")
    schema: dict[str, Any] = {"$schema": DRAFT, "title": title, "type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return check_schema(schema)


def field_rows(schema: dict[str, Any]) -> list[list[str]]:
    """The field table of a schema (the reverse of `schema_from_fields`), to start from a template."""
    needed = set(schema.get("required", []))
    rows = []
    for name, spec in schema.get("properties", {}).items():
        enum = spec.get("enum") or spec.get("items", {}).get("enum") or []
        allowed = ", ".join(str(v) for v in enum)
        rows.append([name, _type_word(spec), spec.get("description", ""), "yes" if name in needed else "", allowed])
    return rows


def _check_top(schema: dict[str, Any]) -> None:
    if schema.get("type") != "object":
        raise SchemaProblem("the top level must have type 'object'", "/type")
    properties = schema.get("properties")
    if not properties:
        raise SchemaProblem("there are no fields: add at least one property", "/properties")
    if len(properties) > MAX_FIELDS:
        raise SchemaProblem(f"{len(properties)} fields; at most {MAX_FIELDS} are supported", "/properties")
    if schema.get("additionalProperties", False) is not False:
        raise SchemaProblem("only false is supported: a record holds the listed fields only", "/additionalProperties")
    for name, spec in properties.items():
        where = _pointer("properties", name)
        if not NAME.fullmatch(name):
            raise SchemaProblem(f"'{name}' is not a usable field name: {_NAME_RULE}", where)
        _check_field(spec, where)
    for index, name in enumerate(schema.get("required", [])):
        if name not in properties:
            raise SchemaProblem(f"'{name}' is not one of the properties", f"/required/{index}")
    _only(schema, _TOP_KEYS, "")


def _check_field(spec: Any, where: str) -> None:
    if not isinstance(spec, dict):
        raise SchemaProblem("a field is a JSON object with a 'type'", where)
    kind = spec.get("type")
    if kind == "array":
        _only(spec, _ARRAY_KEYS, where)
        if not isinstance(spec.get("items"), dict):
            raise SchemaProblem("a list needs 'items' with one scalar type, e.g. a string", where)
        _check_scalar(spec["items"], f"{where}/items")
    else:
        _check_scalar(spec, where)


def _check_scalar(spec: dict[str, Any], where: str) -> None:
    if "$ref" in spec:
        raise SchemaProblem("'$ref' is not supported: write each field out in full", f"{where}/$ref")
    if combined := sorted(_COMBINATORS & spec.keys()):
        raise SchemaProblem(f"'{combined[0]}' is not supported: give each field one type", f"{where}/{combined[0]}")
    kind = spec.get("type")
    if kind == "object" or "properties" in spec:
        where += "/type" if kind == "object" else "/properties"
        raise SchemaProblem("nested objects are not supported: use flat fields", where)
    if kind == "array":
        raise SchemaProblem("lists of lists are not supported", f"{where}/type")
    if kind not in SCALARS:
        said = "no type" if kind is None else f"type {json.dumps(kind)}"
        said += "; a field is one of string, number, integer, boolean or an array of them"
        if isinstance(kind, list):
            said += " (a field that is not found is left out: no null type is needed)"
        raise SchemaProblem(said, f"{where}/type")
    _only(spec, _SCALAR_KEYS, where)
    if "format" in spec and spec["format"] != "date":
        raise SchemaProblem(f"format '{spec['format']}' is not supported; only 'date' (YYYY-MM-DD)", f"{where}/format")
    if "format" in spec and kind != "string":
        raise SchemaProblem("format 'date' needs type 'string'", f"{where}/format")
    for key in ("minimum", "maximum"):
        if key in spec and kind not in ("number", "integer"):
            raise SchemaProblem(f"'{key}' applies to numbers, not {kind}", f"{where}/{key}")
    if "maxLength" in spec and kind != "string":
        raise SchemaProblem(f"'maxLength' applies to text, not {kind}", f"{where}/maxLength")
    if spec.get("enum") == []:
        raise SchemaProblem("an empty enum allows no value: list the allowed values or drop it", f"{where}/enum")
    for index, value in enumerate(spec.get("enum", [])):
        if not Draft202012Validator({"type": kind}).is_valid(value):
            shown = json.dumps(value, ensure_ascii=False)
            raise SchemaProblem(f"{shown} is not {_A_TYPE[kind]}", f"{where}/enum/{index}")


def _only(spec: dict[str, Any], allowed: set[str], where: str) -> None:
    for key in spec:
        if key == "$ref":
            raise SchemaProblem("'$ref' is not supported: write each field out in full", f"{where}/$ref")
        if key not in allowed:
            supported = ", ".join(sorted(allowed))
            raise SchemaProblem(f"'{key}' is not supported here (supported: {supported})", where + _pointer(key))


def _field_from_cells(cells: dict[str, str], number: int) -> tuple[str, dict[str, Any], bool]:
    where = f"row {number}"
    name = cells["name"]
    if not name:
        raise SchemaProblem("name is empty", where)
    if not NAME.fullmatch(name):
        raise SchemaProblem(f"name '{name}' is not usable: {_NAME_RULE}", where)
    word = " ".join(cells["type"].lower().split()) or "text"
    if word not in TABLE_TYPES:
        raise SchemaProblem(f"type '{cells['type']}' is not one of {', '.join(TABLE_TYPES)}", where)
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
    if word in ("yes/no", "date"):
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


def _cells(row: Sequence[Any] | Mapping[str, Any]) -> dict[str, str]:
    if isinstance(row, Mapping):
        keyed = {" ".join(str(k).replace("_", " ").lower().split()): v for k, v in row.items()}
        values = [keyed.get(column) for column in TABLE_COLUMNS]
    else:
        given = list(row)[: len(TABLE_COLUMNS)]
        values = given + [None] * (len(TABLE_COLUMNS) - len(given))
    return {column: _cell_text(v) for column, v in zip(TABLE_COLUMNS, values, strict=True)}


def _cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):  # a dataframe's empty cell
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).strip()


def _type_word(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if kind == "array":
        return f"list of {_type_word(spec.get('items', {}))}"
    if spec.get("format") == "date":
        return "date"
    words = {"string": "text", "number": "number", "integer": "integer", "boolean": "yes/no"}
    return words.get(kind, "?") if isinstance(kind, str) else "?"


def _schema_error_message(e: jsonschema.SchemaError) -> str:
    if e.path and e.path[-1] == "type" and isinstance(e.instance, str):
        return f"'{e.instance}' is not a JSON Schema type"
    return e.message


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "true/false", type(None): "null"}.get(type(value), "a number")


def _pointer(*parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
