"""Is an extracted value really in the document? Text, numbers and dates matched in their usual forms.

Text is compared after folding case, Unicode compatibility forms (full-width digits and spaces),
whitespace, dashes and quotes; when that fails, also with all spaces removed, since PDF text often
spaces out Chinese characters or breaks a line inside a name. A number matches any common way of
writing it (`1,234.50`, `1.234,50`, `1 234,50`, `€1234.5`), a date any common date form
(`01.03.2024`, `1 March 2024`, `2024年3月1日`…). Yes/no values cannot be checked against text.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

SNIPPET_CHARS = 120
_MAX_GROUPS = 6  # digit groups in one number: 1 234 567 890,12
_TRANSLATE = str.maketrans(
    {
        **dict.fromkeys("‐‑‒–—―−﹣－", "-"),
        **dict.fromkeys("‘’‚‛′`´", "'"),
        **dict.fromkeys("“”„‟″«»", '"'),
        **dict.fromkeys("\u00ad\u200b\u200c\u200d\u2060\ufeff", ""),
    }
)
_RUN = re.compile(r"\d+(?:[.,' ]\d+)*")
_DIGITS = re.compile(r"\d+")
_CURRENCY = r"(?:eur|usd|gbp|cny|rmb|jpy|chf|cad|aud|hkd|sek|nok|dkk|pln|czk|inr|krw|sgd|twd|[$€£¥₹])"
_VALUE_NUMBER = re.compile(rf"[-+]? ?{_CURRENCY}? ?(\d+(?:[.,' ]\d+)*) ?(?:{_CURRENCY}|[%元])?")
_JOINED = re.compile(r"\d[-/]$|^[-/]\d")  # a run that is part of a date or a code (2025-06-30, 12/05)
_ISO_VALUE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_MONTH_NAMES = [
    ("january", "jan", "januar"),
    ("february", "feb", "februar"),
    ("march", "mar", "märz"),
    ("april", "apr"),
    ("may", "mai"),
    ("june", "jun", "juni"),
    ("july", "jul", "juli"),
    ("august", "aug"),
    ("september", "sep", "sept"),
    ("october", "oct", "oktober"),
    ("november", "nov"),
    ("december", "dec", "dezember"),
]
_MONTHS = {name: number for number, names in enumerate(_MONTH_NAMES, 1) for name in names}
_MONTH = r"(?<![a-z])(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")(?![a-z])\.?"
_ORDINAL = r"(?:st|nd|rd|th)?\.?"
# each pattern with the order of its (year, month, day) groups; day/month/year forms are read both ways
_DATE_FORMS = [
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), (1, 2, 3)),
    (re.compile(r"(?<!\d)(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})(?!\d)"), (3, 2, 1)),
    (re.compile(r"(?<!\d)(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})(?!\d)"), (3, 1, 2)),
    (re.compile(rf"(?<!\d)(\d{{1,2}}){_ORDINAL}[ -]?(?:of )?{_MONTH}[ ,-]*(\d{{4}})(?!\d)"), (3, 2, 1)),
    (re.compile(rf"{_MONTH} ?(\d{{1,2}}){_ORDINAL},? ?(\d{{4}})(?!\d)"), (3, 1, 2)),
    (re.compile(r"(?<!\d)(\d{4}) ?年 ?(\d{1,2}) ?月 ?(\d{1,2}) ?[日号]"), (1, 2, 3)),
]

Span = tuple[int, int]


@dataclass(frozen=True)
class _Folded:
    """Folded text plus, for each of its characters, the span of the source text it came from."""

    text: str
    sources: list[Span]

    def span(self, start: int, end: int) -> Span:
        return self.sources[start][0], self.sources[end - 1][1]

    def compact(self) -> _Folded:
        kept = [(c, s) for c, s in zip(self.text, self.sources, strict=True) if c != " "]
        return _Folded("".join(c for c, _ in kept), [s for _, s in kept])


def normalise(text: str) -> str:
    """Text folded for comparison: NFKC, casefolded, one kind of space, dash and quote."""
    return _fold(text).text


def is_grounded(value: Any, page_text: str) -> bool | None:
    """Whether `value` occurs in the page; None when it cannot be checked (yes/no, empty, nothing)."""
    if isinstance(value, list):
        verdicts = [is_grounded(item, page_text) for item in value]
        checked = [v for v in verdicts if v is not None]
        return all(checked) if checked else None
    if not checkable(value):
        return None
    return find(value, page_text) is not None


def find(value: Any, text: str) -> Span | None:
    """Where a scalar value occurs in `text` (start, end), or None."""
    if not checkable(value):
        return None
    return _find(value, _fold(text))


def locate(value: Any, pages: Mapping[int, str]) -> tuple[int, str] | None:
    """The first page (by number) that grounds the value, and a snippet of that page around it.

    A list is located on the first page that holds all of its checkable items.
    """
    return PageTexts(pages).locate(value)


class PageTexts:
    """A document's page texts, each folded once, for locating many values in them."""

    def __init__(self, pages: Mapping[int, str]) -> None:
        self._texts = dict(pages)
        self._folded: dict[int, _Folded] = {}

    def locate(self, value: Any, *, within: Iterable[int] | None = None) -> tuple[int, str] | None:
        """Like `locate`, looking only at the pages numbered in `within` when given."""
        items = [v for v in (value if isinstance(value, list) else [value]) if checkable(v)]
        if not items:
            return None
        for number in self.numbers(within):
            spans = [_find(item, self.folded(number)) for item in items]
            if all(spans) and spans[0] is not None:
                return number, snippet(self._texts[number], spans[0])
        return None

    def numbers(self, within: Iterable[int] | None = None) -> list[int]:
        """The page numbers there are, or those of them named in `within`, in order."""
        return sorted(self._texts.keys() if within is None else set(within) & self._texts.keys())

    def text(self, number: int) -> str:
        return self._texts[number]

    def folded(self, number: int) -> _Folded:
        if number not in self._folded:
            self._folded[number] = _fold(self._texts[number])
        return self._folded[number]


def snippet(text: str, span: Span, *, width: int = SNIPPET_CHARS) -> str:
    """About `width` characters of `text` centred on `span`, on one line, with … where cut."""
    start, end = span
    extra = max(0, width - (end - start)) // 2
    left, right = max(0, start - extra), min(len(text), end + extra)
    body = " ".join(text[left:right].split())
    return ("…" if left > 0 else "") + body + ("…" if right < len(text) else "")


def checkable(value: Any) -> bool:
    """Whether the value can be looked for in text: a non-empty string or a finite number."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return math.isfinite(value)
    return isinstance(value, str) and bool(normalise(value))


def iso_date(text: str) -> date | None:
    """The day a YYYY-MM-DD string names (leading zeros optional), or None."""
    match = _ISO_VALUE.fullmatch(normalise(text))
    return _date_of(*match.groups()) if match else None


def _find(value: Any, page: _Folded) -> Span | None:
    return next(spans(value, page), None)


def spans(value: Any, page: _Folded) -> Iterator[Span]:
    """Every place a scalar value occurs in a folded page: as text, else as a number, else as a date."""
    if isinstance(value, int | float):
        yield from _number_spans({abs(float(value))}, page)
        return
    text = str(value)
    found = False
    for span in _text_spans(normalise(text), page):
        found = True
        yield span
    if not found and (readings := _value_numbers(text)):
        for span in _number_spans(readings, page):
            found = True
            yield span
    if not found and (day := iso_date(text)):
        yield from _date_spans(day, page)


def _text_spans(needle: str, page: _Folded) -> Iterator[Span]:
    """`needle` in the page, or else in the page without spaces; digits must not run on (50 ≠ 1250)."""
    for folded, wanted in ((page, needle), (page.compact(), needle.replace(" ", ""))):
        found = False
        at = folded.text.find(wanted) if wanted else -1
        while at >= 0:
            end = at + len(wanted)
            before, after = folded.text[max(at - 1, 0) : at], folded.text[end : end + 1]
            if not (wanted[0].isdigit() and before.isdigit()) and not (wanted[-1].isdigit() and after.isdigit()):
                found = True
                yield folded.span(at, end)
            at = folded.text.find(wanted, at + 1)
        if found:
            return


def _number_spans(readings: set[float], page: _Folded) -> Iterator[Span]:
    for number, start, end in _numbers(page.text):
        if any(math.isclose(number, r, rel_tol=1e-9, abs_tol=1e-9) for r in readings):
            yield page.span(start, end)


def _date_spans(day: date, page: _Folded) -> Iterator[Span]:
    for pattern, (y, m, d) in _DATE_FORMS:
        for match in pattern.finditer(page.text):
            if _date_of(match.group(y), match.group(m), match.group(d)) == day:
                yield page.span(match.start(), match.end())


def _numbers(text: str) -> Iterator[tuple[float, int, int]]:
    """Every reading of every number in folded text: (value, start, end); ambiguous forms give several."""
    for run in _RUN.finditer(text):
        before, after = text[max(0, run.start() - 2) : run.start()], text[run.end() : run.end() + 2]
        if _JOINED.search(before) or _JOINED.search(after):
            continue
        groups = [(m.start() + run.start(), m.end() + run.start()) for m in _DIGITS.finditer(run.group())]
        digits = [text[a:b] for a, b in groups]
        seps = [text[b] for _, b in groups[:-1]]
        for i in range(len(groups)):
            if i > 0 and seps[i - 1] != " ":  # "1,250.00" holds no 1 and no 250; "12 345" may be two numbers
                continue
            for j in range(i, min(len(groups), i + _MAX_GROUPS)):
                if j < len(groups) - 1 and seps[j] != " ":
                    continue
                for number in _readings(digits[i : j + 1], seps[i:j]):
                    yield number, groups[i][0], groups[j][1]


def _readings(digits: list[str], seps: list[str]) -> list[float]:
    """The numbers `digits` joined by `seps` can mean: thousands groups, and/or a decimal point or comma."""
    if not seps:
        return [float(digits[0])]
    found = []
    if len(set(seps)) == 1 and _thousands(digits):
        found.append(float("".join(digits)))
    whole, point = seps[:-1], seps[-1]
    if point in ".," and (not whole or (len(set(whole)) == 1 and whole[0] != point and _thousands(digits[:-1]))):
        found.append(float("".join(digits[:-1]) + "." + digits[-1]))
    return found


def _thousands(digits: list[str]) -> bool:
    return 1 <= len(digits[0]) <= 3 and all(len(group) == 3 for group in digits[1:])


def _value_numbers(text: str) -> set[float]:
    match = _VALUE_NUMBER.fullmatch(normalise(text))
    if not match:
        return set()
    run = match.group(1)
    return set(_readings(_DIGITS.findall(run), [c for c in run if not c.isdigit()]))


def _date_of(year: str, month: str, day: str) -> date | None:
    try:
        return date(int(year), _MONTHS.get(month) or int(month), int(day))
    except ValueError:
        return None


def _fold(text: str) -> _Folded:
    """Fold `text` a character (with its combining marks) at a time, remembering where each came from."""
    out: list[str] = []
    sources: list[Span] = []
    space = True  # drops leading spaces and runs of spaces
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        piece = text[i:j]
        if not piece.isascii():
            piece = unicodedata.normalize("NFKC", piece)
        for c in piece.casefold().translate(_TRANSLATE):
            if c.isspace():
                if space:
                    continue
                c, space = " ", True
            else:
                space = False
            out.append(c)
            sources.append((i, j))
        i = j
    if out and out[-1] == " ":
        out.pop()
        sources.pop()
    return _Folded("".join(out), sources)
