"""HTML with the standard library's parser, fed a piece at a time: visible text only, headings kept
as Markdown headings, whitespace collapsed as a browser shows it. What a browser does not show is
left out — scripts, styles, and comments, also one left open to the end of the file."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path

from app.knowledge.loaders.decoding import read_text

_SKIP = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCK = {
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer", "nav",
    "pre", "blockquote", "hr", "dd", "dt", "dl", "figure", "figcaption", "main", "aside", "form", "title",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_\-]+)""", re.IGNORECASE)
_LAST_SPACE = re.compile(r"\s(?=\S*$)")
_LONGEST_WORD = 1 << 16  # a "word" longer than this is passed on in parts


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []
        self._title = False
        self._run_live = False  # the current run of text (it may come in pieces) has shown more than whitespace
        self._held = ""  # the run's whitespace so far

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._end_run()
        if tag in _SKIP and tag != "head":
            self._skipping.append(tag)
        elif tag == "title":
            self._title = True
        elif tag in _HEADINGS:
            self.parts.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        self._end_run()
        if self._skipping and tag == self._skipping[-1]:
            self._skipping.pop()
        elif tag == "title":
            self._title = False
            self.parts.append("\n\n")
        elif tag in _HEADINGS:
            self.parts.append("\n\n")
        elif tag in ("p", "div", "tr", "table", "pre", "blockquote", "li"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._run_live:
            self.parts.append(data)
            return
        self._held += data
        if not self._held.isspace():
            self.parts.append(self._held)
            self._held, self._run_live = "", True

    def handle_comment(self, data: str) -> None:
        self._end_run()

    def _end_run(self) -> None:
        """A run of text that was only whitespace counts as one space (outside the title)."""
        if self._held:
            self.parts.append(self._held if self._title else " ")
        self._held, self._run_live = "", False

    def finish(self) -> None:
        """End of file: a comment, declaration or tag left open shows nothing (as in a browser)."""
        if self.rawdata.startswith("<"):  # the parser waits there for the end of a construct: none came
            self.rawdata = ""
        self.close()
        self._end_run()

    def take(self) -> str:
        text, self.parts = "".join(self.parts), []
        return text


def html_pieces(path: Path, *, name: str) -> Iterator[str]:
    """The visible text of an HTML file, a piece at a time."""
    with path.open("rb") as stream:
        declared = _CHARSET.search(stream.read(4096))
        stream.seek(0)
        encoding = declared.group(1).decode("ascii") if declared else None
        yield from visible_text(read_text(stream, name=name, size=path.stat().st_size, declared=encoding))


def visible_text(pieces: Iterable[str]) -> Iterator[str]:
    collector = _TextCollector()
    lines = _Lines()
    for piece in pieces:
        collector.feed(piece)
        yield lines.take(collector.take())
    collector.finish()
    yield lines.take(collector.take(), final=True)


class _Lines:
    """Whitespace collapsed within each line, at most one blank line in a row, none at either end —
    done on the stream: complete lines at once, a long line up to its last space."""

    def __init__(self) -> None:
        self.pending = ""  # the start of a line not yet complete
        self.line_open = False  # words of the current line were given out
        self.blank = False  # a blank line came since the last words
        self.started = False

    def take(self, raw: str, *, final: bool = False) -> str:
        out: list[str] = []
        *lines, self.pending = (self.pending + raw).split("\n")
        for line in lines:
            self._words(line.split(), out)
            if not self.line_open and self.started:
                self.blank = True
            self.line_open = False
        if final:
            self._words(self.pending.split(), out)
            self.pending = ""
        elif (space := _LAST_SPACE.search(self.pending)) or len(self.pending) > _LONGEST_WORD:
            at = space.start() if space else len(self.pending)
            self._words(self.pending[:at].split(), out)
            self.pending = self.pending[at:]
        return "".join(out)

    def _words(self, words: list[str], out: list[str]) -> None:
        if not words:
            return
        if self.line_open:
            out.append(" ")
        elif self.started:
            out.append("\n\n" if self.blank else "\n")
        out.append(" ".join(words))
        self.line_open, self.started, self.blank = True, True, False
