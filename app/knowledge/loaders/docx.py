"""Word .docx: paragraphs, tables and headings (as Markdown headings), read as a stream.

`word/document.xml` is checked against the unpacked-size limit before it is read (a zip bomb is
refused at once), then unzipped and parsed a MiB at a time with expat: memory stays small even for
a document whose text is one run of hundreds of MB, and text comes out as it is parsed.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from xml.parsers import expat

from app.knowledge.loaders.types import LoadError

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# style ids of headings; German Word writes "berschrift1" for "Überschrift 1"
_HEADING_STYLE = re.compile(r"^(?:heading|überschrift|berschrift|titre|titolo)\s*(\d)$", re.IGNORECASE)
_BLOCK = 1 << 20
_MB = 2**20


def docx_pieces(path: Path, *, name: str, max_unpacked_bytes: int) -> Iterator[str]:
    """The text of a .docx file, a piece at a time; LoadError for what is not a readable .docx."""
    _refuse_old_word(path, name=name)
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("word/document.xml")
            if info.file_size > max_unpacked_bytes:
                raise LoadError(
                    "too_large",
                    f"{name} unpacks to {info.file_size / _MB:.0f} MB of document XML; documents that unpack "
                    f"to at most {max_unpacked_bytes / _MB:.0f} MB can be indexed. Split it or save it as PDF.",
                )
            yield from _parse(archive, info, name=name, max_unpacked_bytes=max_unpacked_bytes)
    except (zipfile.BadZipFile, KeyError, expat.ExpatError, EOFError, zlib.error, OSError) as err:
        raise LoadError("corrupt", f"{name} is not a readable .docx file ({err}).") from err


def _refuse_old_word(path: Path, *, name: str) -> None:
    with path.open("rb") as stream:
        if stream.read(8) != _OLE_MAGIC:
            return
        stream.seek(0)
        if "EncryptedPackage".encode("utf-16-le") in stream.read():
            raise LoadError("encrypted", f"{name} is password-protected. Save it without a password and add it again.")
    raise LoadError("unsupported", f"{name} is an old Word 97–2003 document. Save it as .docx or .pdf.")


def _parse(archive: zipfile.ZipFile, info: zipfile.ZipInfo, *, name: str, max_unpacked_bytes: int) -> Iterator[str]:
    text = _DocumentText()
    parser = expat.ParserCreate(namespace_separator="}")
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    parser.StartElementHandler = text.start
    parser.EndElementHandler = text.end
    parser.CharacterDataHandler = text.data
    parser.StartDoctypeDeclHandler = _no_dtd
    unpacked = 0
    with archive.open(info) as stream:
        while block := stream.read(_BLOCK):
            unpacked += len(block)
            if unpacked > max_unpacked_bytes:  # the zip's size field lied
                raise LoadError("too_large", f"{name} unpacks to more than {max_unpacked_bytes / _MB:.0f} MB.")
            parser.Parse(block, False)
            yield text.take()
    parser.Parse(b"", True)
    if not text.had_body:
        raise LoadError("corrupt", f"{name} is not a readable .docx file (it has no document body).")
    yield text.take()


def _no_dtd(*_: object) -> None:
    raise expat.ExpatError("a document type declaration is not allowed in a .docx")


class _DocumentText:
    """Expat handlers: top-level paragraphs and tables of the body, as blocks separated by a blank line."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.stack: list[str] = []
        self.had_body = False
        self.block: str | None = None  # "p" or "tbl" while inside a top-level block
        self.any_block = False
        self.block_live = False  # the block has shown something other than whitespace
        self.held = ""  # the block's leading whitespace, kept until it shows more
        self.level = 0  # heading level of the current paragraph
        self.para_live = False
        self.para_held = ""
        self.in_text = 0
        self.counts = [0, 0, 0]  # rows of the table, cells of the row, paragraphs of the cell

    def take(self) -> str:
        text, self.out = "".join(self.out), []
        return text

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        parent = self.stack[-1] if self.stack else ""
        self.stack.append(tag)
        local = tag[len(_W) :] if tag.startswith(_W) else ""
        if local == "body":
            self.had_body = True
        elif parent == f"{_W}body" and local in ("p", "tbl"):
            self.block, self.block_live, self.held, self.counts = local, False, "", [0, 0, 0]
        if self.block is None:
            return
        if local == "p":
            self._paragraph_starts()
        elif local == "pStyle":
            self.level = _heading_level(attrs.get(f"{_W}val", ""))
        elif local == "t":
            self.in_text += 1
        elif local == "tab":
            self._text("\t")
        elif local in ("br", "cr"):
            self._text("\f" if attrs.get(f"{_W}type") == "page" else "\n")
        elif local in ("tr", "tc"):
            depth = 0 if local == "tr" else 1
            if self.counts[depth]:
                self.write("\n" if local == "tr" else " | ")
            self.counts[depth] += 1
            self.counts[depth + 1 :] = [0] * (2 - depth)

    def end(self, tag: str) -> None:
        self.stack.pop()
        if self.block is None:
            return
        if tag == f"{_W}t":
            self.in_text -= 1
        elif tag == f"{_W}p" and not self.para_live:
            self.write(self.para_held)
        if tag == f"{_W}{self.block}" and self.stack and self.stack[-1] == f"{_W}body":
            self.block = None
            self.any_block = self.any_block or self.block_live

    def data(self, text: str) -> None:
        if self.in_text and self.block is not None:
            self._text(text)

    def _paragraph_starts(self) -> None:
        if self.block == "tbl" and self.counts[1]:
            if self.counts[2]:
                self.write(" ")
            self.counts[2] += 1
        self.level, self.para_live, self.para_held = 0, False, ""

    def _text(self, text: str) -> None:
        """Paragraph text; a heading's "# " goes before its first visible character."""
        if self.para_live:
            self.write(text)
            return
        self.para_held += text
        if text.strip():
            self.para_live = True
            prefix = "#" * self.level + " " if self.level else ""
            self.write(prefix + self.para_held)
            self.para_held = ""

    def write(self, text: str) -> None:
        if self.block_live:
            self.out.append(text)
            return
        self.held += text
        if text.strip():
            self.block_live = True
            self.out.append(("\n\n" if self.any_block else "") + self.held)
            self.held = ""


def _heading_level(style: str) -> int:
    if style.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(style)
    return min(int(match.group(1)), 6) if match else 0
