"""Numeric bounds as grammar: the GBNF of the integers in a range, digit by digit, and of the decimals a
bounded number may be written as. Pure text building; app/engine/llama/schema_grammar.py uses it.

An integer range splits into runs of one digit count each ([7, 1234] is 7–9, 10–99, 100–999, 1000–1234);
a run of one length is its common prefix, then the first differing digit: the lower bound's digit with
the rest up to 9…9, the digits between with any rest, the upper bound's digit with the rest from 0…0.
Unbounded sides stop at 16 digits, as llama.cpp's own integer rule does (and so does a bound of 10^16 or
more, which every 16-digit integer meets). Negatives are "-" and a magnitude range (never "-0")."""

from __future__ import annotations

import math

from app.schema_exact import Bounds

MAX_DIGITS = 16  # digits of an integer the grammar writes (llama.cpp's integral-part has the same)
_FRACTION = '"." [0-9]{1,15}'  # the digits after the point of a bounded number
_NONZERO_FRACTION = '"." [0-9]{0,14} [1-9]'  # … and ones that make it differ from the integer before it


def integer_rule(low: int | None, high: int | None) -> str | None:
    """GBNF for the integers in [low, high] (None: open), or None when there are none."""
    low = None if low is not None and low <= -(10**MAX_DIGITS) else low
    high = None if high is not None and high >= 10**MAX_DIGITS else high
    if low is not None and high is not None and low > high:
        return None
    parts = []
    if low is None or low < 0:
        magnitudes = _magnitudes(1 if high is None or high >= 0 else -high, None if low is None else -low)
        if magnitudes:
            parts.append(f'"-" ({magnitudes})')
    if high is None or high >= 0:
        parts.append(_magnitudes(max(low or 0, 0), high))
    return " | ".join(f"({p})" for p in parts if p) or None


def number_rule(bounds: Bounds) -> str | None:
    """GBNF for decimals that surely meet `bounds`: the integers in range, and "n.ddd" wherever every
    such decimal is in range (n ≥ 0: [n, n+1) inside; "-n.ddd": (-(n+1), -n] inside). None when that
    leaves nothing (a range narrower than a whole unit, 0.1–0.9): then the answer is checked after."""
    low_int, high_int, low, high = bounds.lowest_integer(), bounds.highest_integer(), bounds.low(), bounds.high()
    parts = [integer_rule(low_int, high_int)]
    up = None if high is None else math.floor(high) - 1  # the last n whose [n, n+1) is under the top
    parts.append(_with_fraction(integer_rule(max(low_int or 0, 0), up), _FRACTION))
    down = None if low is None else math.floor(-low) - 1  # the last n whose (-(n+1), -n] is above the bottom
    negative = integer_rule(max(-high_int if high_int is not None else 0, 0), down)
    parts.append(_with_fraction(negative, _FRACTION, sign=True))
    if (k := bounds.exclusive_low()) is not None and k >= 0 and (high is None or k + 1 <= high):
        parts.append(f'"{k}" {_NONZERO_FRACTION}')  # (k, k+1) for exclusiveMinimum k
    if (k := bounds.exclusive_high()) is not None and k <= 0 and (low is None or k - 1 >= low):
        parts.append(f'"-{-k}" {_NONZERO_FRACTION}')  # (k-1, k) for exclusiveMaximum k
    found = [p for p in parts if p]
    return " | ".join(f"({p})" for p in found) or None


def _with_fraction(whole: str | None, fraction: str, *, sign: bool = False) -> str | None:
    if whole is None:
        return None
    sign_text = '"-" ' if sign else ""
    return f"{sign_text}({whole}) {fraction}"


def _magnitudes(low: int, high: int | None) -> str:
    """The non-negative integers in [low, high] (high None: up to 16 digits), written without leading zeros."""
    if high is not None and low > high:
        return ""
    runs = []
    shortest = len(str(low))
    longest = len(str(high)) if high is not None else max(MAX_DIGITS, shortest)
    for length in range(shortest, longest + 1):
        first = max(low, 10 ** (length - 1) if length > 1 else 0)
        last = 10**length - 1 if high is None else min(high, 10**length - 1)
        if high is None and length > shortest:  # every longer length is whole: one rule for them all
            runs.append(f"[1-9] [0-9]{{{length - 1},{longest - 1}}}")
            break
        if first <= last:
            runs.append(_same_length(str(first), str(last)))
    return " | ".join(runs)


def _same_length(low: str, high: str) -> str:
    """The digit strings of one length from `low` to `high` (low ≤ high)."""
    common = 0
    while common < len(low) and low[common] == high[common]:
        common += 1
    prefix = f'"{low[:common]}"' if common else ""
    low, high = low[common:], high[common:]
    if not low:
        return prefix
    rest = len(low) - 1
    if rest == 0:
        return _join(prefix, _digits(low, high))
    zeros, nines = "0" * rest, "9" * rest
    first = low[0] if low[1:] == zeros else chr(ord(low[0]) + 1)  # the lower digit whole, or from the next
    last = high[0] if high[1:] == nines else chr(ord(high[0]) - 1)
    alternatives = []
    if low[1:] != zeros:
        alternatives.append(f'"{low[0]}" ({_same_length(low[1:], nines)})')
    if first <= last:
        alternatives.append(f"{_digits(first, last)} [0-9]{{{rest}}}")
    if high[1:] != nines:
        alternatives.append(f'"{high[0]}" ({_same_length(zeros, high[1:])})')
    return _join(prefix, "(" + " | ".join(alternatives) + ")")


def _digits(first: str, last: str) -> str:
    return f"[{first}]" if first == last else f"[{first}-{last}]"


def _join(prefix: str, rest: str) -> str:
    return f"{prefix} {rest}" if prefix else rest
