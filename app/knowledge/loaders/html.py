"""HTML with the standard library's parser: visible text only, headings kept as Markdown headings."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from app.knowledge.loaders.text import decode_text

_SKIP = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCK = {
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer", "nav",
    "pre", "blockquote", "hr", "dd", "dt", "dl", "figure", "figcaption", "main", "aside", "form", "title",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_\-]+)""", re.IGNORECASE)


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []
        self._title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
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
        self.parts.append(data if self._title or not data.isspace() else " ")

    def text(self) -> str:
        raw = "".join(self.parts)
        lines = [" ".join(line.split()) for line in raw.split("\n")]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_text(data: bytes, *, name: str) -> str:
    declared = _CHARSET.search(data[:4096])
    text: str | None = None
    if declared:
        try:
            text = data.decode(declared.group(1).decode("ascii"))
        except (LookupError, UnicodeDecodeError):
            text = None
    if text is None:
        text = decode_text(data, name=name)
    collector = _TextCollector()
    collector.feed(text)
    collector.close()
    return collector.text()
