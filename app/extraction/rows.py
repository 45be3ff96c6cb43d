"""Is a table row really in the document? Each cell found on the page, and the row's cells near each other.

A row is "verified" when every cell that text can show (not yes/no, not empty) is found as a whole token
on one page, all within two neighbouring lines (a row of a table, even one whose description wraps),
and the row is not made only of one short value: a number or a code of up to three characters ("1",
"USD") occurs on almost any page, so it counts only beside the rest of its row (a row made only of
such values: all of them on the same line). Each cell gets a page
and a snippet; a long text cell found elsewhere on the page is verified on its own, a short one never.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.extraction.grounding import PageTexts, Span, checkable, normalise, snippet, spans

NEAR_LINES = 1  # how many lines a row's cells may spread over, beyond the first
SHORT_CHARS = 3


@dataclass(frozen=True)
class Cell:
    page: int | None
    snippet: str
    verified: bool | None  # None: yes/no or empty, which text cannot confirm


@dataclass(frozen=True)
class RowPlace:
    page: int | None
    snippet: str  # the row's lines
    verified: bool | None
    cells: dict[str, Cell] = field(default_factory=dict)


def is_short(value: Any) -> bool:
    """A value too common to prove anything alone: a number, or text of up to three characters."""
    if isinstance(value, int | float):
        return True
    text = normalise(str(value))
    return len(text.replace(" ", "")) <= SHORT_CHARS or _is_number(text)


def place_row(row: Mapping[str, Any], texts: PageTexts, *, within: Iterable[int] | None = None) -> RowPlace:
    """Where a row is: the first page whose lines hold all its cells close together, else its best page."""
    wanted = {name: value for name, value in row.items() if checkable(value)}
    numbers = texts.numbers(within)
    if not wanted or not numbers:
        return RowPlace(numbers[0] if numbers else None, "", None, {n: Cell(None, "", None) for n in row})
    page, window = numbers[0], dict[str, tuple[int, Span]]()
    for number in numbers:
        found = _window(_occurrences(wanted, texts, number))
        if len(found) > len(window):
            page, window = number, found
        if len(found) == len(wanted):
            break
    complete = len(window) == len(wanted) and _convincing(wanted, window)
    cells = {name: _cell(name, value, texts, page, window, complete) for name, value in row.items()}
    return RowPlace(page, _lines(texts.text(page), window) if window else "", complete, cells)


def _convincing(wanted: Mapping[str, Any], window: Mapping[str, tuple[int, Span]]) -> bool:
    """A row with a long text cell is convincing; a row of short values only when two or more of them
    stand on one line."""
    if any(not is_short(value) for value in wanted.values()):
        return True
    return len(wanted) > 1 and len({line for line, _ in window.values()}) == 1


def _occurrences(wanted: Mapping[str, Any], texts: PageTexts, number: int) -> dict[str, list[tuple[int, Span]]]:
    """Each cell's whole-token places on the page, with their line numbers."""
    text, folded = texts.text(number), texts.folded(number)
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    found: dict[str, list[tuple[int, Span]]] = {}
    for name, value in wanted.items():
        places = [(bisect.bisect_right(starts, s[0]) - 1, s) for s in spans(value, folded) if _whole(text, s)]
        if places:
            found[name] = places
    return found


def _window(found: Mapping[str, list[tuple[int, Span]]]) -> dict[str, tuple[int, Span]]:
    """The most cells that fit in NEAR_LINES + 1 consecutive lines, each at its first place there."""
    best: dict[str, tuple[int, Span]] = {}
    for first in sorted({line for places in found.values() for line, _ in places}):
        chosen = {}
        for name, places in found.items():
            inside = [p for p in places if first <= p[0] <= first + NEAR_LINES]
            if inside:
                chosen[name] = inside[0]
        if len(chosen) > len(best):
            best = chosen
    return best


def _cell(name: str, value: Any, texts: PageTexts, page: int, window: dict[str, tuple[int, Span]], row: bool) -> Cell:
    if not checkable(value):
        return Cell(page, "", None)
    if name in window:
        return Cell(page, snippet(texts.text(page), window[name][1]), row or not is_short(value))
    if not is_short(value):  # a long text elsewhere on the page is still its own proof
        found = next((s for s in spans(value, texts.folded(page)) if _whole(texts.text(page), s)), None)
        if found is not None:
            return Cell(page, snippet(texts.text(page), found), True)
    return Cell(page, "", False)


def _whole(text: str, span: Span) -> bool:
    """Not part of a longer word or number: "1" in "A1" or "10", "USD" in "USDT" do not count."""
    start, end = span
    before, first = text[start - 1 : start], text[start : start + 1]
    last, after = text[end - 1 : end], text[end : end + 1]
    return not (_word(before) and _word(first)) and not (_word(last) and _word(after) and not last.isdigit())


def _word(char: str) -> bool:
    return bool(char) and char.isascii() and char.isalnum()


def _lines(text: str, window: Mapping[str, tuple[int, Span]]) -> str:
    lines = text.split("\n")
    first = min(line for line, _ in window.values())
    last = max(line for line, _ in window.values())
    return " ".join(" ".join(lines[first : last + 1]).split())[:240]


def _is_number(text: str) -> bool:
    digits = text.strip("+-$€£¥% ").replace(",", "").replace(".", "").replace(" ", "")
    return digits.isdigit()
