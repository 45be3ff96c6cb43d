"""What a JSON schema may cost once it is a grammar, checked before any schema reaches one.

llama.cpp's converter writes a bound out in full: `"maxLength": 1000000000` becomes a rule a billion
characters long (the engine worker grew ~600 MB/s to 15 GB before its watchdog ended it), and so do
`minLength`, `minItems`, `maxItems` and a pattern's `{n,m}`. Nesting, properties and enums cost rules
too. `check_cost` walks a schema and refuses, naming the keyword and its JSON pointer, any of them past
the limits below, and a schema whose bounds add up past `MAX_TOTAL_REPEATS`; it refuses the same way a
subschema no answer could ever meet (bounds that cross, an enum none of whose values fits: see
app/schema_exact.py `unmet`), rather than let the grammar be empty. Every path that turns a
schema into a grammar calls it: /v1 `response_format` and tool parameters (app/api), extraction
(app/extraction/json_schema.py), and the engine itself, last (app/engine/llama/grammar.py). The limits leave
the appliance's own extraction templates (assets/schemas/) and its tool-call wrapper far inside.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

from app.errors import Refused
from app.schema_exact import unmet

# llama.cpp's grammar parser itself refuses an optional run of more than 1,000 ("exceeds sane defaults"):
# a maxLength, maxItems or {0,n} up to 1,000 parses in milliseconds; the minimums are held to the same.
MAX_LENGTH = 1_000  # minLength, maxLength: characters of one string
MAX_ITEMS = 1_000  # minItems, maxItems: items of one array
MAX_PATTERN_CHARS = 1_000  # the text of one pattern
MAX_PATTERN_REPEAT = 1_000  # one {n} or {n,m} of a pattern
MAX_DEPTH = 32  # subschemas inside subschemas
MAX_PROPERTIES = 200  # properties of one object
MAX_ENUM = 1_000  # values of one enum
MAX_SUBSCHEMAS = 5_000  # subschemas in the whole schema
MAX_TOTAL_REPEATS = 100_000  # the bounds above added up over the schema (at the limit: 0.13 s, +50 MB)

_LENGTHS = ("minLength", "maxLength")
_ITEM_COUNTS = ("minItems", "maxItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_SCHEMA_ONES = (
    "items",
    "additionalProperties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)
_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


class CostlySchema(Refused):
    """A schema refused before it becomes a grammar (it would cost more than the appliance allows, or no
    answer could meet it): `pointer` is where in it."""

    def __init__(self, what: str, pointer: str, *, where: str = "") -> None:
        super().__init__(f"{where}{pointer}: {what}")
        self.what, self.pointer = what, pointer


def check_cost(schema: Any, *, where: str = "") -> None:
    """CostlySchema unless every bound of `schema` is within the limits; `where` names the schema in
    the refusal ("response_format.json_schema.schema"), its JSON pointer follows."""
    _check(schema, "", 1, _Total(where))


class _Total:
    """What the whole schema has used so far: subschemas and repeats."""

    def __init__(self, where: str) -> None:
        self.where, self.subschemas, self.repeats = where, 0, 0

    def refuse(self, what: str, at: str) -> CostlySchema:
        return CostlySchema(what, at, where=self.where)

    def add(self, repeats: int, at: str) -> None:
        self.repeats += repeats
        if self.repeats > MAX_TOTAL_REPEATS:
            raise self.refuse(
                f"the schema's lengths and item counts add up to more than the appliance's limit of "
                f"{MAX_TOTAL_REPEATS} (each one is written out in the answer's grammar)",
                at,
            )


def _check(node: Any, at: str, depth: int, total: _Total) -> None:
    if not isinstance(node, dict):
        return  # true/false schemas; anything else is for the schema's validator to refuse
    total.subschemas += 1
    if total.subschemas > MAX_SUBSCHEMAS:
        raise total.refuse(f"more than the appliance's limit of {MAX_SUBSCHEMAS} subschemas", at)
    if depth > MAX_DEPTH:
        raise total.refuse(f"nested {depth} deep, above the appliance's limit of {MAX_DEPTH}", at)
    _check_bounds(node, at, total)
    for sub_at, sub in _subschemas(node, at):
        _check(sub, sub_at, depth + 1, total)


def _check_bounds(node: dict[str, Any], at: str, total: _Total) -> None:
    for keys, limit in ((_LENGTHS, MAX_LENGTH), (_ITEM_COUNTS, MAX_ITEMS)):
        for key in keys:
            value = node.get(key)
            if _number(value) and value > limit:
                raise total.refuse(f"{value} is above the appliance's limit of {limit}", f"{at}/{key}")
        total.add(max((int(node[k]) for k in keys if _number(node.get(k))), default=0), at)
    for key, limit, what in (("properties", MAX_PROPERTIES, "properties"), ("enum", MAX_ENUM, "values")):
        if isinstance(node.get(key), dict | list) and len(node[key]) > limit:
            raise total.refuse(f"{len(node[key])} {what} are above the appliance's limit of {limit}", f"{at}/{key}")
    if isinstance(pattern := node.get("pattern"), str):
        _check_pattern(pattern, f"{at}/pattern", total)
    if (never := unmet(node)) is not None:
        why, key = never
        raise total.refuse(f"{why}, so no answer can meet it", f"{at}/{key}")


def _check_pattern(pattern: str, at: str, total: _Total) -> None:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise total.refuse(
            f"a pattern of {len(pattern)} characters is above the appliance's limit of {MAX_PATTERN_CHARS}", at
        )
    for repeat in _REPEAT.finditer(pattern):
        count = max(int(n) for n in repeat.groups() if n)
        if count > MAX_PATTERN_REPEAT:
            raise total.refuse(
                f"{repeat.group(0)} repeats {count} times, above the appliance's limit of {MAX_PATTERN_REPEAT}", at
            )
        total.add(count, at)


def _subschemas(node: dict[str, Any], at: str) -> list[tuple[str, Any]]:
    """(pointer, subschema) of every subschema directly inside `node`."""
    found: list[tuple[str, Any]] = []
    for key in _SCHEMA_MAPS:
        if isinstance(named := node.get(key), dict):
            found += [(f"{at}/{key}/{_escaped(name)}", sub) for name, sub in named.items()]
    for key in _SCHEMA_LISTS:
        if isinstance(listed := node.get(key), list):
            found += [(f"{at}/{key}/{index}", sub) for index, sub in enumerate(listed)]
    for key in _SCHEMA_ONES:
        if isinstance(node.get(key), dict):
            found.append((f"{at}/{key}", node[key]))
    return found


def _number(value: Any) -> TypeGuard[int | float]:
    """A finite number (others are for the schema's validator to refuse)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _escaped(name: Any) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")
