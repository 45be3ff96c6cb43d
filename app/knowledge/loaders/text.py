"""Plain text, Markdown and CSV: decoded as a stream (`decoding.py`), cut into pseudo-pages.

A pseudo-page is about one printed page: at most `page_chars` characters, cut at a form feed, a
blank line, a line end, a sentence end (also Chinese 。！？；) or a space, in that order of preference.
`Paginator` cuts text as it arrives, in time linear in its length: it looks at one page's window at
a time and never copies the rest of the text at a cut.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from app.knowledge.loaders.decoding import decode_text, open_text
from app.knowledge.loaders.types import LoadError, Page
from app.knowledge.script import SENTENCE_END

__all__ = ["Paginator", "csv_text", "decode_text", "paginate"]

_SNIFF_CHARS = 8192


class Paginator:
    """Text in (any pieces), pages out through `emit`, numbered from 1; `close()` at the end."""

    def __init__(self, *, page_chars: int, emit: Callable[[Page], None]) -> None:
        self.page_chars = page_chars
        self.emit = emit
        self.pages = 0
        self._buffer = ""

    def feed(self, text: str) -> None:
        self._buffer += text
        self._cut(final=False)

    def close(self) -> None:
        self._cut(final=True)
        self._buffer = ""

    def _cut(self, *, final: bool) -> None:
        buffer, limit, at = self._buffer, self.page_chars, 0
        while True:
            feed = buffer.find("\f", at, at + limit + 1)
            if feed >= 0:
                self._page(buffer[at:feed])
                at = feed + 1
            elif len(buffer) - at > limit:
                window = buffer[at : at + limit]
                cut = _cut_point(window, limit)
                self._page(window[:cut])
                at += cut
            else:
                break
        if final:
            self._page(buffer[at:])
            at = len(buffer)
        self._buffer = buffer[at:] if at else buffer

    def _page(self, text: str) -> None:
        if text.strip():
            self.pages += 1
            self.emit(Page(self.pages, text.strip("\n")))


def paginate(text: str, *, page_chars: int) -> list[Page]:
    """Cut `text` into pseudo-pages of at most `page_chars` characters (see the module doc)."""
    pages: list[Page] = []
    paginator = Paginator(page_chars=page_chars, emit=pages.append)
    paginator.feed(text)
    paginator.close()
    return pages


def _cut_point(window: str, limit: int) -> int:
    floor = limit // 2
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator, floor)
        if at >= 0:
            return at + len(separator)
    ends = [m.end() for m in SENTENCE_END.finditer(window, floor)]
    if ends:
        return ends[-1]
    at = window.rfind(" ", floor)
    return at + 1 if at >= 0 else limit


def text_pieces(path: Path, *, name: str) -> Iterator[str]:
    """A text or Markdown file's text, a piece at a time."""
    return open_text(path, name=name)


def csv_text(pieces: Iterable[str], *, name: str) -> Iterator[str]:
    """Each row becomes a line `header: value; header: value` so a row reads on its own."""
    lines = _lines(pieces)
    head = [line for _, line in zip(range(200), lines, strict=False)]
    sample = "".join(head)[:_SNIFF_CHARS]
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    header: list[str] | None = None
    try:
        for row in csv.reader(_chain(head, lines), dialect):
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = row
                yield " | ".join(header)
            else:
                yield "\n" + _row_line(header, row)
    except csv.Error as err:
        raise LoadError("corrupt", f"{name} is not a readable CSV file ({err}).") from err
    if header is None:
        raise LoadError("empty", f"{name} has no rows.")


def _lines(pieces: Iterable[str]) -> Iterator[str]:
    held = ""
    for piece in pieces:
        held += piece
        *complete, held = held.split("\n")
        yield from (line + "\n" for line in complete)
    if held:
        yield held


def _chain(head: list[str], rest: Iterator[str]) -> Iterator[str]:
    yield from head
    yield from rest


def _row_line(header: list[str], row: list[str]) -> str:
    cells = []
    for i, value in enumerate(row):
        label = header[i].strip() if i < len(header) else ""
        cells.append(f"{label}: {value.strip()}" if label else value.strip())
    return "; ".join(cells)
