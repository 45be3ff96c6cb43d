"""A JSON Schema as the grammar of answers that validate against it: llama.cpp's converter (as
llama-cpp-python ships it), with what that converter leaves out written here.

Added to the grammar: integer bounds (`minimum`, `maximum`, exclusive or not) digit by digit, number
bounds where whole units fit (app/engine/llama/ranges.py); `enum`/`const` values that break the schema's
other keywords left out; a type list (`["integer", "null"]`) keeping its bounds; `minItems`/`maxItems` on
an array without `items`; a required property the schema does not describe; the formats date (a real
day: no 2023-02-30), time, date-time, uuid, email, uri and ipv4; and strings with no raw control
character or lone surrogate escape (either would make the answer invalid JSON or unusable text). What
no grammar here holds (`multipleOf`, `uniqueItems`, `minProperties`, a `pattern` the converter cannot
write, a length beside a pattern or format, `oneOf`'s "only one", `allOf`, `not`, `if`) is checked on
the answer (app/schema_exact.py), and a schema no answer can meet is refused before it gets here."""

from __future__ import annotations

import copy
import re
from typing import Any

from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, BuiltinRule, SchemaConverter

from app.engine.llama.ranges import integer_rule, number_rule
from app.schema_exact import Bounds, meets_siblings

_CHAR = BuiltinRule(
    r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))',
    [],
)
_DAY28 = '"0" [1-9] | "1" [0-9] | "2" [0-8]'
_LEAP_PAIR = '[02468] [48] | [2468] "0" | [13579] [26]'  # two digits divisible by 4, not 00
_FORMAT_PARTS = {
    "year": '[0-9]{3} [1-9] | [0-9]{2} [1-9] "0" | [0-9] [1-9] "00" | [1-9] "000"',  # 0001-9999
    "leap-year": f'[0-9]{{2}} ({_LEAP_PAIR}) | ({_LEAP_PAIR}) "00"',
    "date": '(year "-" (("0" [13578] | "1" [02]) "-" (day28 | "29" | "3" [01]) | ("0" [469] | "11") "-" '
    '(day28 | "29" | "30") | "02-" day28)) | leap-year "-02-29"',
    "day28": _DAY28,
    "time": '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{3} ([0-9]{3})?)? '
    '("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])',
    "octet": integer_rule(0, 255) or "",
}
_FORMATS = {  # format: (its rule, the parts it uses)
    "date": ("date", ("date", "year", "leap-year", "day28")),
    "time": ("time", ("time",)),
    "date-time": ('date "T" time', ("date", "year", "leap-year", "day28", "time")),
    "uuid": ('[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}', ()),
    "email": ('[A-Za-z0-9] [A-Za-z0-9._+-]{0,40} "@" [A-Za-z0-9] [A-Za-z0-9-]{0,40} ("." [A-Za-z]{2,10}){1,2}', ()),
    "uri": ('[a-z]{2,8} "://" [A-Za-z0-9] [A-Za-z0-9.-]{0,60} ("/" [A-Za-z0-9._~%/?#=&+-]{0,100})?', ()),
    "ipv4": ('octet "." octet "." octet "." octet', ("octet",)),
}
_COMBINED = ("$ref", "anyOf", "oneOf", "allOf")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def to_gbnf(schema: Any) -> str:
    """The GBNF of `schema`; raises what the converter raises for a part it cannot write."""
    converter = _Exact(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(copy.deepcopy(schema), "stdin")
    converter.visit(resolved, "")
    return str(converter.format_grammar())


def pattern_expressible(pattern: str) -> bool:
    """Whether llama.cpp's schema converter turns this regular expression into grammar that keeps the
    JSON string valid: anchored (^…$), no escapes but escaped punctuation (\\d, \\w are not translated),
    no `.` or negated class (either could write a bare quote). Others are checked after the answer."""
    if not (pattern.startswith("^") and pattern.endswith("$")) or "[^" in pattern or '"' in pattern:
        return False
    plain = re.sub(r"\\[^A-Za-z0-9]", "", pattern)
    if "\\" in plain or "." in plain:
        return False
    try:
        SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False).visit(
            {"type": "string", "pattern": pattern}, ""
        )
    except Exception:  # the converter asserts on syntax it does not know
        return False
    return True


class _Exact(SchemaConverter):  # type: ignore[misc]
    def visit(self, schema: Any, name: str) -> str:
        rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
        if schema is True or schema == {}:
            return str(self._add_rule(rule_name, self._add_primitive("value", PRIMITIVE_RULES["value"])))
        if not isinstance(schema, dict) or any(key in schema for key in _COMBINED):
            return str(super().visit(schema, name))
        kind = schema.get("type")
        if "enum" in schema or "const" in schema:
            values = [schema["const"]] if "const" in schema else list(schema["enum"])
            kept = [value for value in values if meets_siblings(value, schema)]
            if kept:
                return str(self._add_rule(rule_name, " | ".join(self._generate_constant_rule(v) for v in kept)))
        elif isinstance(kind, list):
            alternatives = [{**schema, "type": each} for each in kind]
            return str(self._add_rule(rule_name, self._generate_union_rule(name, alternatives)))
        elif kind in ("integer", "number") and any(key in schema for key in _BOUNDS):
            if (rule := _bounded(kind, schema)) is not None:
                return str(self._add_rule(rule_name, f"({rule}) space"))
        elif kind == "string":
            return self._string(schema, name, rule_name)
        elif _any_items(schema, kind):  # the converter misreads `items: {}` and forgets the counts without it
            return str(super().visit({**schema, "items": True}, name))
        elif kind in (None, "object") and isinstance(schema.get("properties"), dict):
            return str(super().visit(_described_required(schema), name))
        return str(super().visit(schema, name))

    def _string(self, schema: dict[str, Any], name: str, rule_name: str) -> str:
        if isinstance(pattern := schema.get("pattern"), str) and pattern_expressible(pattern):
            return str(super().visit(schema, name))
        if (found := _FORMATS.get(str(schema.get("format")))) is not None:
            rule, parts = found
            for part in parts:
                self._add_rule(part, _FORMAT_PARTS[part])
            return str(self._add_rule(rule_name, rf'"\"" ({rule}) "\"" space'))
        plain = {key: value for key, value in schema.items() if key not in ("pattern", "format")}
        if "minLength" not in plain and "maxLength" not in plain:
            return str(self._add_rule(rule_name, self._add_primitive("string", PRIMITIVE_RULES["string"])))
        return str(super().visit(plain, name))

    def _add_primitive(self, name: str, rule: BuiltinRule) -> str:
        return str(super()._add_primitive(name, _CHAR if name == "char" else rule))


def _bounded(kind: str, schema: dict[str, Any]) -> str | None:
    """The rule of a bounded integer or number (None: not expressible, left to the check after)."""
    bounds = Bounds.of(schema)
    if bounds is None:
        return None
    if kind == "integer":
        return integer_rule(bounds.lowest_integer(), bounds.highest_integer())
    return number_rule(bounds)


def _any_items(schema: dict[str, Any], kind: Any) -> bool:
    """An array schema whose items may be anything."""
    array = kind == "array" or (kind is None and "items" in schema)
    return array and schema.get("items", {}) == {} and "prefixItems" not in schema


def _described_required(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every required property described (llama.cpp's converter writes only the ones in
    `properties`, so a required one missing from it could never be written)."""
    properties = schema["properties"]
    missing = [name for name in schema.get("required", []) if name not in properties]
    if not missing:
        return schema
    extra = schema.get("additionalProperties")
    described = extra if isinstance(extra, dict) else {}
    return {**schema, "properties": {**properties, **{name: described for name in missing}}}
