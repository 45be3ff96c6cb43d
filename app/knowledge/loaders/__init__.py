"""Loaders: a file in, its pages out — or a `LoadError` that says what is wrong, for people.

Every format is read in a child process under a time and memory limit (`reader.py` starts it,
`worker.py` is it): PDFs by pypdf (a page without text rendered and read by OCR, as image files
are: `scans.py`, `ocr.py`), text formats decoded as a stream and cut into pseudo-pages of
about one printed page (`text.py`), HTML and Word parsed as streams (`html.py`, `docx.py`). A
document longer than `ReadLimits.max_pages` is read in part, and says so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.knowledge.loaders.reader import OcrCallback, PageCallback, Reader, ReadLimits, read_document
from app.knowledge.loaders.types import (
    ERROR_KINDS,
    ErrorKind,
    LoadedDocument,
    LoadError,
    Page,
    ScanTooLong,
    size_problem,
)

__all__ = [
    "ERROR_KINDS", "SUPPORTED", "ErrorKind", "LoadError", "LoadedDocument", "Page", "ReadLimits", "Reader",
    "ScanTooLong", "load", "size_problem", "supported",
]  # fmt: skip

SUPPORTED = {
    ".pdf": "PDF",
    ".docx": "Word",
    ".txt": "text",
    ".text": "text",
    ".md": "Markdown",
    ".markdown": "Markdown",
    ".html": "HTML",
    ".htm": "HTML",
    ".csv": "CSV",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
    ".webp": "image",
}
_FORMATS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html", ".csv": "csv"} | {
    suffix: "image" for suffix, kind in SUPPORTED.items() if kind == "image"
}


def supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED


def load(
    path: Path,
    *,
    max_bytes: int,
    password: str | None = None,
    limits: ReadLimits | None = None,
    on_page: PageCallback | None = None,
    on_ocr: OcrCallback | None = None,
    timeout_s: float | None = None,
    memory_mb: int | None = None,
    reader: Reader | None = None,
) -> LoadedDocument:
    """The pages of `path`. Raises LoadError for files that cannot be indexed, OSError if unreadable.

    `limits` bound the reader process; `timeout_s` and `memory_mb`, when given, replace theirs. The
    reading runs in `reader`'s process (kept between documents), or in a process of its own."""
    limits = limits or ReadLimits()
    limits = replace(limits, timeout_s=timeout_s or limits.timeout_s, memory_mb=memory_mb or limits.memory_mb)
    name = path.name
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        kinds = ", ".join(sorted(set(SUPPORTED.values())))
        what = f"{suffix} files are" if suffix else "files without an extension are"
        raise LoadError("unsupported", f"{name}: {what} not supported. Supported: {kinds}.")
    size = path.stat().st_size
    if too_large := size_problem(name, size, max_bytes):
        raise LoadError("too_large", too_large)
    if size == 0:
        raise LoadError("empty", f"{name} is empty (0 bytes).")
    format = _FORMATS.get(suffix, "text")
    if reader is not None:
        return reader.read(path, format=format, password=password, limits=limits, on_page=on_page, on_ocr=on_ocr)
    return read_document(path, format=format, password=password, limits=limits, on_page=on_page, on_ocr=on_ocr)
