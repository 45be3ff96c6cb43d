"""Extraction schemas: the subset of JSON Schema that a model can fill and a person can read.

A schema is an object of up to 40 fields. A field is a scalar (text, number, integer, yes/no, date…),
a list of scalars, or a table: an array of objects whose columns are scalars (one level of nesting).
The keywords people write for them are supported (`minItems`, `maxItems`, `minimum`, `maximum`,
`exclusiveMinimum/Maximum`, `minLength`, `maxLength`, `pattern`, `enum`, `const`, `format` date,
date-time, email or uri, `default`, `description`, `title`, `examples`, and nullable types such as
`["number", "null"]`); anything else is refused with a JSON pointer to it, before any model call, and so
is a bound past what a grammar may cost (app/schema_limits.py, as for every schema).
Templates live as files in `assets/schemas/`; `fields.py` makes a schema from a field table.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.validators import Draft202012Validator, validator_for

from app.errors import Refused
from app.schema_exact import format_checker
from app.schema_limits import CostlySchema, check_cost

log = logging.getLogger(__name__)

MAX_FIELDS = 40
MAX_COLUMNS = 20
DRAFT = "https://json-schema.org/draft/2020-12/schema"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
NAME_RULE = "letters, digits and _, starting with a letter or _, at most 64 characters"
SCALARS = ("string", "number", "integer", "boolean")
FORMATS = ("date", "date-time", "email", "uri")
TABLE = "table"
_TOP_KEYS = {"$schema", "title", "description", "type", "properties", "required", "additionalProperties"}
_NOTES = {"description", "title", "examples", "default", "$comment"}
_SCALAR_KEYS = {"type", "enum", "const", "format", *_NOTES}
_NUMBER_KEYS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
_STRING_KEYS = {"minLength", "maxLength", "pattern"}
_ARRAY_KEYS = {"type", "items", "minItems", "maxItems", *_NOTES}
_ROW_KEYS = {"type", "properties", "required", "additionalProperties", "title", "description"}
_COMBINATORS = {"oneOf", "anyOf", "allOf", "not", "if", "patternProperties"}
_A_TYPE = {"string": "a string", "number": "a number", "integer": "an integer", "boolean": "true or false"}


class SchemaProblem(Refused):
    """A schema or field table we cannot use (kind `request`); `pointer` is where (a JSON pointer, or "row 3")."""

    def __init__(self, message: str, pointer: str = "") -> None:
        super().__init__(f"{pointer}: {message}" if pointer else message)
        self.pointer = pointer


@dataclass(frozen=True)
class Template:
    name: str  # the file's stem
    title: str
    description: str
    schema: dict[str, Any]


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The validator every extracted record and every correction goes through (formats checked)."""
    return Draft202012Validator(schema, format_checker=format_checker())


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
        raise SchemaProblem(_schema_error_message(e), pointer(*e.path)) from None
    try:
        check_cost(schema)  # the grammar's bounds, as for every schema (app/schema_limits.py)
    except CostlySchema as e:
        raise SchemaProblem(e.what, e.pointer) from None
    _check_object(schema, "", top=True)
    checked = copy.deepcopy(schema)
    checked["additionalProperties"] = False
    for spec in checked["properties"].values():
        if is_table(spec):
            spec["items"]["additionalProperties"] = False
    return checked


def is_table(spec: dict[str, Any]) -> bool:
    """Whether a field is a table (an array of objects)."""
    return spec.get("type") == "array" and isinstance(spec.get("items"), dict) and "properties" in spec["items"]


def scalar_type(spec: dict[str, Any]) -> str | None:
    """A scalar's type without its null: "number" for ["number", "null"]."""
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def field_types(schema: dict[str, Any]) -> dict[str, str]:
    """Each field's type in the field table's words: "text", "date", "list of number", "table"…"""
    return {name: type_word(spec) for name, spec in schema.get("properties", {}).items()}


def columns(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A table field's columns (name → scalar spec), in order."""
    return dict(spec["items"]["properties"]) if is_table(spec) else {}


def key_columns(spec: dict[str, Any]) -> list[str]:
    """The columns that name a row: the table's required columns, or else its first column."""
    names = list(columns(spec))
    required = [n for n in spec["items"].get("required", []) if n in names] if names else []
    return required or names[:1]


def type_word(spec: dict[str, Any]) -> str:
    if is_table(spec):
        return TABLE
    if spec.get("type") == "array":
        return f"list of {type_word(spec.get('items', {}))}"
    if spec.get("format") in ("date", "date-time"):
        return str(spec["format"])
    words = {"string": "text", "number": "number", "integer": "integer", "boolean": "yes/no"}
    return words.get(scalar_type(spec) or "", "?")


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


def _check_object(schema: dict[str, Any], where: str, *, top: bool) -> None:
    what = "fields" if top else "columns"
    if schema.get("type") != "object":
        raise SchemaProblem(
            "the top level must have type 'object'" if top else "a table's rows are objects", f"{where}/type"
        )
    properties = schema.get("properties")
    if not properties:
        raise SchemaProblem(f"there are no {what}: add at least one property", f"{where}/properties")
    limit = MAX_FIELDS if top else MAX_COLUMNS
    if len(properties) > limit:
        raise SchemaProblem(f"{len(properties)} {what}; at most {limit} are supported", f"{where}/properties")
    if schema.get("additionalProperties", False) is not False:
        raise SchemaProblem(
            f"only false is supported: a {'record' if top else 'row'} holds the listed {what} only",
            f"{where}/additionalProperties",
        )
    for name, spec in properties.items():
        at = where + pointer("properties", name)
        if not NAME.fullmatch(name):
            raise SchemaProblem(f"'{name}' is not a usable name: {NAME_RULE}", at)
        _check_field(spec, at) if top else _check_column(spec, at)
    for index, name in enumerate(schema.get("required", [])):
        if name not in properties:
            raise SchemaProblem(f"'{name}' is not one of the properties", f"{where}/required/{index}")
    _only(schema, _TOP_KEYS if top else _ROW_KEYS, where)


def _check_field(spec: Any, where: str) -> None:
    if not isinstance(spec, dict):
        raise SchemaProblem("a field is a JSON object with a 'type'", where)
    if spec.get("type") != "array":
        _check_scalar(spec, where)
        return
    _only(spec, _ARRAY_KEYS, where)
    items = spec.get("items")
    if not isinstance(items, dict):
        raise SchemaProblem("a list needs 'items': one scalar type, or an object of columns for a table", where)
    if items.get("type") == "object" or "properties" in items:
        if "properties" not in items:
            raise SchemaProblem("a table's rows need 'properties': its columns", f"{where}/items")
        _check_object(items, f"{where}/items", top=False)
    else:
        _check_scalar(items, f"{where}/items")
    for key in ("minItems", "maxItems"):
        if key in spec and spec[key] > 200:
            raise SchemaProblem(f"at most 200 rows or items are supported, not {spec[key]}", f"{where}/{key}")


def _check_column(spec: Any, where: str) -> None:
    if isinstance(spec, dict) and (spec.get("type") in ("object", "array") or "properties" in spec or "items" in spec):
        key = "type" if "type" in spec else ("properties" if "properties" in spec else "items")
        raise SchemaProblem(
            "a table's columns hold single values: nesting two levels deep is not supported", f"{where}/{key}"
        )
    if not isinstance(spec, dict):
        raise SchemaProblem("a column is a JSON object with a 'type'", where)
    _check_scalar(spec, where)


def _check_scalar(spec: dict[str, Any], where: str) -> None:
    if "$ref" in spec:
        raise SchemaProblem("'$ref' is not supported: write each field out in full", f"{where}/$ref")
    if combined := sorted(_COMBINATORS & spec.keys()):
        raise SchemaProblem(f"'{combined[0]}' is not supported: give each field one type", f"{where}/{combined[0]}")
    kind = spec.get("type")
    if kind == "object" or "properties" in spec:
        where += "/type" if kind == "object" else "/properties"
        raise SchemaProblem(
            "nested objects are not supported: use flat fields, or a table (an array of objects)", where
        )
    if kind == "array":
        raise SchemaProblem("lists of lists are not supported", f"{where}/type")
    nullable = isinstance(kind, list) and len(kind) == 2 and "null" in kind
    base = scalar_type(spec) if nullable else kind
    if base not in SCALARS:
        said = "no type" if kind is None else f"type {json.dumps(kind)}"
        raise SchemaProblem(
            said + "; a field is one of string, number, integer, boolean (or one of them and "
            '"null"), an array of them, or an array of objects (a table)',
            f"{where}/type",
        )
    _only(
        spec,
        _SCALAR_KEYS
        | (_NUMBER_KEYS if base in ("number", "integer") else set())
        | (_STRING_KEYS if base == "string" else set()),
        where,
    )
    _check_values(spec, str(base), nullable, where)


def _check_values(spec: dict[str, Any], kind: str, nullable: bool, where: str) -> None:
    if "format" in spec and spec["format"] not in FORMATS:
        raise SchemaProblem(f"format '{spec['format']}' is not supported; only {', '.join(FORMATS)}", f"{where}/format")
    if "format" in spec and kind != "string":
        raise SchemaProblem(f"format '{spec['format']}' needs type 'string'", f"{where}/format")
    if "pattern" in spec:
        try:
            re.compile(spec["pattern"])
        except re.error as err:
            raise SchemaProblem(f"not a regular expression: {err}", f"{where}/pattern") from None
    if spec.get("enum") == []:
        raise SchemaProblem("an empty enum allows no value: list the allowed values or drop it", f"{where}/enum")
    typed = Draft202012Validator({"type": [kind, "null"] if nullable else kind})
    values = [(f"enum/{i}", v) for i, v in enumerate(spec.get("enum", []))]
    values += [(key, spec[key]) for key in ("const", "default") if key in spec]
    for at, value in values:
        if not typed.is_valid(value):
            shown = json.dumps(value, ensure_ascii=False)
            raise SchemaProblem(f"{shown} is not {_A_TYPE[kind]}", f"{where}/{at}")


def _only(spec: dict[str, Any], allowed: set[str], where: str) -> None:
    for key in spec:
        if key == "$ref":
            raise SchemaProblem("'$ref' is not supported: write each field out in full", f"{where}/$ref")
        if key not in allowed:
            supported = ", ".join(sorted(allowed - {"$comment"}))
            raise SchemaProblem(f"'{key}' is not supported here (supported: {supported})", where + pointer(key))


def _schema_error_message(e: jsonschema.SchemaError) -> str:
    if e.path and e.path[-1] == "type" and isinstance(e.instance, str):
        return f"'{e.instance}' is not a JSON Schema type"
    return e.message


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "true/false", type(None): "null"}.get(type(value), "a number")


def pointer(*parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
