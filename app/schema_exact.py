"""Answers that meet their schema exactly: what the grammar holds is written by
app/engine/llama/schema_grammar.py; here is what holds the rest, on every engine (an upstream too).

- `unmet`: why no answer could ever meet one subschema (bounds that cross, no enum value that fits):
  app/schema_limits.py's walk refuses such a schema up front, naming the keyword and its JSON pointer.
- `problem`: the check of a finished answer against the schema (formats too), naming the keyword and
  where it failed: /v1 sends it as an error instead of an answer that does not validate (app/api/exact.py).
- `format_checker`: jsonschema's format checks plus date-time, time and uri without extra packages.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import best_match


@dataclass(frozen=True)
class Bounds:
    """A number's bounds as JSON Schema gives them (None: that side is open)."""

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None

    @classmethod
    def of(cls, node: dict[str, Any]) -> Bounds | None:
        """The bounds of a subschema, or None when it has none or one is not a finite number."""
        keys = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        values = [node.get(key) for key in keys]
        if all(value is None for value in values) or not all(value is None or _finite(value) for value in values):
            return None
        return cls(*values)

    def lowest_integer(self) -> int | None:
        """The smallest integer meeting the lower bounds (None: no lower bound)."""
        found = [math.ceil(self.minimum)] if self.minimum is not None else []
        if self.exclusive_minimum is not None:
            found.append(math.floor(self.exclusive_minimum) + 1)
        return max(found) if found else None

    def highest_integer(self) -> int | None:
        found = [math.floor(self.maximum)] if self.maximum is not None else []
        if self.exclusive_maximum is not None:
            found.append(math.ceil(self.exclusive_maximum) - 1)
        return min(found) if found else None

    def low(self) -> float | None:
        """The lower bound's value (inclusive or not), the higher of the two."""
        found = [b for b in (self.minimum, self.exclusive_minimum) if b is not None]
        return max(found) if found else None

    def high(self) -> float | None:
        found = [b for b in (self.maximum, self.exclusive_maximum) if b is not None]
        return min(found) if found else None

    def exclusive_low(self) -> int | None:
        """k when the lower bound that binds is `exclusiveMinimum: k` for an integer k (k.5 meets it)."""
        low = self.low()
        if self.exclusive_minimum is None or low != self.exclusive_minimum or low != int(low):
            return None
        return int(low)

    def exclusive_high(self) -> int | None:
        high = self.high()
        if self.exclusive_maximum is None or high != self.exclusive_maximum or high != int(high):
            return None
        return int(high)

    def empty(self, kind: Any) -> bool:
        """No value of this type meets the bounds."""
        if kind == "integer":
            first, last = self.lowest_integer(), self.highest_integer()
            return first is not None and last is not None and first > last
        low, high = self.low(), self.high()
        if low is None or high is None:
            return False
        return low > high or (low == high and low in (self.exclusive_minimum, self.exclusive_maximum))


def unmet(node: dict[str, Any]) -> tuple[str, str] | None:
    """(why, keyword) when no value can meet this subschema on its own, else None."""
    bounds = Bounds.of(node)
    kind = node.get("type")
    if bounds is not None and kind in ("integer", "number") and bounds.empty(kind):
        what = "integer" if kind == "integer" else "number"
        key = "minimum" if "minimum" in node else "exclusiveMinimum"
        return f"no {what} meets both its lower bound ({bounds.low()}) and its upper bound ({bounds.high()})", key
    for low_key, high_key in (("minLength", "maxLength"), ("minItems", "maxItems"), ("minProperties", "maxProperties")):
        low, high = node.get(low_key), node.get(high_key)
        if _finite(low) and _finite(high) and low > high:
            return f"{low_key} {low} is above {high_key} {high}", low_key
    if "enum" in node or "const" in node:
        key = "const" if "const" in node else "enum"
        values = [node["const"]] if key == "const" else node["enum"]
        if isinstance(values, list) and not values:
            return "an empty enum allows no value", key
        if isinstance(values, list) and not any(meets_siblings(value, node) for value in values):
            return f"no value of its {key} meets the schema's other keywords", key
    if node.get("additionalProperties") is False and isinstance(node.get("properties", {}), dict):
        missing = [n for n in node.get("required", []) if n not in node.get("properties", {})]
        if missing:
            return (
                f"{missing[0]!r} is required, but it is not in properties and additionalProperties is false",
                "required",
            )
    return None


_NOT_CONSTRAINTS = {"enum", "const", "description", "title", "default", "examples", "$comment", "deprecated"}


def meets_siblings(value: Any, node: dict[str, Any]) -> bool:
    """Whether an enum or const value meets the subschema's other keywords (a `maximum` beside an enum)."""
    siblings = {key: sub for key, sub in node.items() if key not in _NOT_CONSTRAINTS}
    if not siblings:
        return True
    try:
        return next(iter(validator(siblings).iter_errors(value)), None) is None
    except Exception:  # a $ref this subschema alone cannot resolve: the check after has the whole schema
        return True


def problem(value: Any, schema: dict[str, Any]) -> str | None:
    """None when `value` validates against `schema` (formats too), else where and which keyword failed."""
    error = best_match(validator(schema).iter_errors(value))
    if error is None:
        return None
    pointer = "".join(f"/{part}" for part in error.absolute_path) or "/"
    return f"at {pointer}: {error.message} (keyword {error.validator!r})"


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=format_checker())


def format_checker() -> FormatChecker:
    """jsonschema's format checks, with date-time, time and uri checked without extra packages."""
    checker = FormatChecker()
    checker.checks("date-time", raises=ValueError)(_is_date_time)
    checker.checks("time", raises=ValueError)(_is_time)
    checker.checks("uri", raises=ValueError)(_is_uri)
    return checker


_TIME = r"\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)"


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d\d-\d\d[Tt ]" + _TIME, value, flags=re.ASCII):
        return False
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))  # ValueError for 2024-02-30
    return True


def _is_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(_TIME, value, flags=re.ASCII):
        return False
    time.fromisoformat(value.upper().replace("Z", "+00:00"))  # ValueError for 24:00:00
    return True


def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return (
        bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme))
        and bool(parts.netloc or parts.path)
        and not re.search(r"\s", value)
    )


def _finite(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
