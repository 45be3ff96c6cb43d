"""Word .docx with zipfile + ElementTree: paragraphs, tables and headings (as Markdown headings)."""

from __future__ import annotations

import re
import zipfile
from io import BytesIO
from xml.etree import ElementTree

from app.knowledge.loaders.types import LoadError

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# style ids of headings; German Word writes "berschrift1" for "Überschrift 1"
_HEADING_STYLE = re.compile(r"^(?:heading|überschrift|berschrift|titre|titolo)\s*(\d)$", re.IGNORECASE)
_MAX_XML_BYTES = 200 * 1024 * 1024  # refuse zip bombs: document.xml unpacked may not exceed this


def docx_text(data: bytes, *, name: str) -> str:
    if data.startswith(_OLE_MAGIC):
        if "EncryptedPackage".encode("utf-16-le") in data:
            raise LoadError("encrypted", f"{name} is password-protected. Save it without a password and add it again.")
        raise LoadError("unsupported", f"{name} is an old Word 97–2003 document. Save it as .docx or .pdf.")
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            info = archive.getinfo("word/document.xml")
            if info.file_size > _MAX_XML_BYTES:
                raise LoadError("too_large", f"{name} unpacks to more than {_MAX_XML_BYTES // 2**20} MB of text.")
            root = ElementTree.fromstring(archive.read(info))
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, EOFError, OSError) as err:
        raise LoadError("corrupt", f"{name} is not a readable .docx file ({err}).") from err
    body = root.find(f"{_W}body")
    if body is None:
        raise LoadError("corrupt", f"{name} is not a readable .docx file (it has no document body).")
    blocks = [_block_text(element) for element in body]
    return "\n\n".join(b for b in blocks if b.strip())


def _block_text(element: ElementTree.Element) -> str:
    if element.tag == f"{_W}p":
        return _paragraph(element)
    if element.tag == f"{_W}tbl":
        rows = []
        for row in element.iter(f"{_W}tr"):
            cells = [" ".join(_paragraph(p) for p in cell.iter(f"{_W}p")) for cell in row.iter(f"{_W}tc")]
            rows.append(" | ".join(cells))
        return "\n".join(rows)
    return ""


def _paragraph(p: ElementTree.Element) -> str:
    parts: list[str] = []
    for node in p.iter():
        if node.tag == f"{_W}t" and node.text:
            parts.append(node.text)
        elif node.tag == f"{_W}tab":
            parts.append("\t")
        elif node.tag in (f"{_W}br", f"{_W}cr"):
            parts.append("\f" if node.get(f"{_W}type") == "page" else "\n")
    text = "".join(parts)
    level = _heading_level(p)
    return f"{'#' * level} {text}" if level and text.strip() else text


def _heading_level(p: ElementTree.Element) -> int:
    style = p.find(f"{_W}pPr/{_W}pStyle")
    value = (style.get(f"{_W}val") or "") if style is not None else ""
    if value.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(value)
    return min(int(match.group(1)), 6) if match else 0
