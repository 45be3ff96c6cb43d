"""Pages into chunks that fit the embedder: by headings, paragraphs and sentences, sized in tokens.

A chunk never crosses a page (so every hit cites exactly one page) and is an exact slice of its
page's text (`start`/`end`), so the UI can highlight it. Sizes are counted with the embedder's own
tokenizer, in one batch for the whole document; packing is a single pass (linear in the text).
Neighbouring chunks share about `overlap_tokens` tokens of whole sentences; a heading starts a
new chunk (and is never left dangling at the end of the previous one).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.knowledge.loaders import Page
from app.knowledge.script import SENTENCE_END, is_cjk

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_LINE = re.compile(r"[^\n]+")
_MARKDOWN_HEADING = re.compile(r"#{1,6}\s+\S")
_NUMBERED_HEADING = re.compile(r"(?:\d+(?:\.\d+)*\.?|[IVX]+\.)\s+\S.{0,70}$")
_CLAUSE_BREAK = re.compile(r"[，、：,:]\s*")


class Tokenizer(Protocol):
    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def token_spans(self, text: str) -> list[tuple[int, int]]: ...


@dataclass(frozen=True)
class Chunk:
    page: int
    ordinal: int  # position in the document, from 0
    start: int  # character offsets in the page's text
    end: int
    text: str
    tokens: int


@dataclass(frozen=True)
class _Unit:
    page: int
    start: int
    end: int
    heading: bool


def chunk_pages(
    pages: Sequence[Page], tokenizer: Tokenizer, *, target_tokens: int = 200, overlap_tokens: int = 30
) -> list[Chunk]:
    if not 0 <= overlap_tokens < target_tokens // 2:
        raise ValueError(f"overlap_tokens ({overlap_tokens}) must be below half of target_tokens ({target_tokens})")
    texts = {page.number: page.text for page in pages}
    units = [unit for page in pages for unit in _units(page)]
    counts = tokenizer.count_tokens([texts[u.page][u.start : u.end] for u in units])
    packer = _Packer(texts, tokenizer, target=target_tokens, overlap=overlap_tokens)
    for unit, count in zip(units, counts, strict=True):
        packer.add(unit, count)
    packer.close()
    return packer.chunks


def _units(page: Page) -> list[_Unit]:
    """Headings and sentences of a page, as spans without surrounding whitespace."""
    units: list[_Unit] = []
    text = page.text
    block_start = 0
    for separator in [*_PARAGRAPH_BREAK.finditer(text), None]:
        block_end = separator.start() if separator else len(text)
        _block_units(page.number, text, block_start, block_end, units)
        if separator:
            block_start = separator.end()
    return units


def _block_units(number: int, text: str, start: int, end: int, units: list[_Unit]) -> None:
    run_start = None
    for line in _LINE.finditer(text, start, end):
        if _is_heading(line.group()):
            if run_start is not None:
                _sentences(number, text, run_start, line.start(), units)
                run_start = None
            _add(units, number, text, line.start(), line.end(), heading=True)
        elif run_start is None:
            run_start = line.start()
    if run_start is not None:
        _sentences(number, text, run_start, end, units)


def _is_heading(line: str) -> bool:
    stripped = line.strip()
    if _MARKDOWN_HEADING.match(stripped):
        return True
    return bool(_NUMBERED_HEADING.match(stripped)) and not stripped.endswith((".", ",", ";", ":", "。", "，"))


def _sentences(number: int, text: str, start: int, end: int, units: list[_Unit]) -> None:
    at = start
    for match in SENTENCE_END.finditer(text, start, end):
        _add(units, number, text, at, match.end(), heading=False)
        at = match.end()
    _add(units, number, text, at, end, heading=False)


def _add(units: list[_Unit], number: int, text: str, start: int, end: int, *, heading: bool) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        units.append(_Unit(number, start, end, heading))


class _Packer:
    def __init__(self, texts: dict[int, str], tokenizer: Tokenizer, *, target: int, overlap: int) -> None:
        self.texts = texts
        self.tokenizer = tokenizer
        self.target = target
        self.overlap = overlap
        self.chunks: list[Chunk] = []
        self.current: list[tuple[_Unit, int]] = []

    def add(self, unit: _Unit, count: int) -> None:
        if self.current and self.current[0][0].page != unit.page:
            self.close()
        if count > self.target:
            self.close()
            self._split_long(unit)
            return
        size = sum(c for _, c in self.current)
        if self.current and (size + count > self.target or (unit.heading and size >= self.target // 3)):
            self.flush(carry=not unit.heading)
            if sum(c for _, c in self.current) + count > self.target:
                if self.current and self.current[-1][0].heading:  # a held-back heading is never dropped
                    self._emit(self.current)
                self.current = []
        self.current.append((unit, count))

    def close(self) -> None:
        """Emit everything pending, a held-back heading included."""
        self.flush(carry=False)
        if self.current:
            self._emit(self.current)
            self.current = []

    def flush(self, *, carry: bool) -> None:
        """Emit the current chunk; start the next with its last sentences (the overlap) or its heading."""
        if not self.current:
            return
        units = self.current
        dangling = units[-1] if len(units) > 1 and units[-1][0].heading else None
        if dangling:
            units = units[:-1]
        self._emit(units)
        kept: list[tuple[_Unit, int]] = []
        if carry and not dangling:
            for unit, count in reversed(units):
                if unit.heading or sum(c for _, c in kept) + count > self.overlap:
                    break
                kept.insert(0, (unit, count))
            if not kept and not units[-1][0].heading:
                kept = self._clause_tail(units[-1][0])
        self.current = [dangling] if dangling else kept

    def _clause_tail(self, unit: _Unit) -> list[tuple[_Unit, int]]:
        """The longest tail of a long sentence that fits the overlap: from a clause break (，, ；…) if
        there is one, else from a word boundary (any character boundary in Chinese)."""
        text = self.texts[unit.page]
        starts = [m.end() for m in _CLAUSE_BREAK.finditer(text, unit.start, unit.end) if m.end() < unit.end]
        counts = self.tokenizer.count_tokens([text[s : unit.end] for s in starts]) if starts else []
        for start, count in zip(starts, counts, strict=True):
            if 0 < count <= self.overlap:
                return [(_Unit(unit.page, start, unit.end, heading=False), count)]
        spans = self.tokenizer.token_spans(text[unit.start : unit.end])
        for i in range(max(1, len(spans) - self.overlap), len(spans)):
            start = unit.start + spans[i][0]
            if _word_start(text, start):
                return [(_Unit(unit.page, start, unit.end, heading=False), len(spans) - i)]
        return []

    def _emit(self, units: list[tuple[_Unit, int]]) -> None:
        first, last = units[0][0], units[-1][0]
        self._append(first.page, first.start, last.end, sum(c for _, c in units))

    def _append(self, page: int, start: int, end: int, tokens: int) -> None:
        text = self.texts[page][start:end]
        self.chunks.append(Chunk(page, len(self.chunks), start, end, text, tokens))

    def _split_long(self, unit: _Unit) -> None:
        """A sentence longer than a chunk: windows of `target` tokens that overlap by `overlap`."""
        spans = self.tokenizer.token_spans(self.texts[unit.page][unit.start : unit.end])
        step = self.target - self.overlap
        for first in range(0, len(spans), step):
            window = spans[first : first + self.target]
            self._append(unit.page, unit.start + window[0][0], unit.start + window[-1][1], len(window))
            if first + self.target >= len(spans):
                break


def _word_start(text: str, at: int) -> bool:
    before, here = text[at - 1], text[at]
    return before.isspace() or is_cjk(before) or is_cjk(here) or not before.isalnum()
