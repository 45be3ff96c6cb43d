"""Helpers shared by the knowledge tests (no tests here): hand-made hostile files, waiting."""

from __future__ import annotations

import time
import zipfile
import zlib
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Literal, TypeVar

T = TypeVar("T")


def minimal_pdf(content: bytes) -> bytes:
    """A valid one-page PDF whose page draws `content` (a content stream, Flate-compressed)."""
    stream = zlib.compress(content, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def text_pdf(text: str) -> bytes:
    return minimal_pdf(b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % text.encode("latin-1"))


def slow_pdf() -> bytes:
    """Small on disk, but pypdf needs tens of seconds to extract its text."""
    return minimal_pdf(b"BT /F1 12 Tf 72 720 Td (Hello world) Tj ET\n" * 200_000)


def memory_hungry_pdf() -> bytes:
    """100 kB on disk, 72 MB of drawing operators once decompressed: parsing needs far more memory."""
    return minimal_pdf(b"BT /F1 12 Tf 72 720 Td " + b"(ab) Tj\n" * 9_000_000 + b" ET")


def docx(paragraphs: list[tuple[str, str]], table: list[list[str]] | None = None) -> bytes:
    """A minimal .docx: (style, text) paragraphs, style "" for body text, then an optional table."""
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

    def para(style: str, text: str) -> str:
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        return f"<w:p>{props}<w:r><w:t>{text}</w:t></w:r></w:p>"

    body = "".join(para(style, text) for style, text in paragraphs)
    if table:
        rows = "".join("<w:tr>" + "".join(f"<w:tc>{para('', c)}</w:tc>" for c in row) + "</w:tr>" for row in table)
        body += f"<w:tbl>{rows}</w:tbl>"
    xml = f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{w}"><w:body>{body}</w:body></w:document>'
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", xml)
    return buffer.getvalue()


def eventually(check: Callable[[], T | Literal[False] | None], *, timeout: float, message: str = "") -> T:
    """The first truthy value of `check()` (so neither None nor False), polled until `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {message}")
        time.sleep(0.05)


def worker_children(parent_pid: int) -> list[int]:
    """Live PDF-reader processes started by `parent_pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent_pid and b"app.knowledge.loaders.worker" in cmdline and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found
