"""Loaders: a file in, its pages out — or a `LoadError` that says what is wrong, for people.

PDFs are parsed in a child process under a time and memory limit (`pdf.py`); text formats are
decoded here and cut into pseudo-pages of about one printed page (`text.py`).
"""

from __future__ import annotations

from pathlib import Path

from app.knowledge.loaders.docx import docx_text
from app.knowledge.loaders.html import html_text
from app.knowledge.loaders.pdf import PageCallback, load_pdf
from app.knowledge.loaders.text import load_csv, load_text, paginate
from app.knowledge.loaders.types import ERROR_KINDS, ErrorKind, LoadedDocument, LoadError, Page

__all__ = ["ERROR_KINDS", "SUPPORTED", "ErrorKind", "LoadError", "LoadedDocument", "Page", "load", "supported"]

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
}
_MB = 2**20


def supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED


def load(
    path: Path,
    *,
    max_bytes: int,
    password: str | None = None,
    timeout_s: float = 120.0,
    memory_mb: int = 1024,
    page_chars: int = 3000,
    on_page: PageCallback | None = None,
) -> LoadedDocument:
    """The pages of `path`. Raises LoadError for files that cannot be indexed, OSError if unreadable."""
    name = path.name
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        kinds = ", ".join(sorted(set(SUPPORTED.values())))
        what = f"{suffix} files are" if suffix else "files without an extension are"
        raise LoadError("unsupported", f"{name}: {what} not supported. Supported: {kinds}.")
    size = path.stat().st_size
    if size > max_bytes:
        raise LoadError(
            "too_large", f"{name} is {size / _MB:.1f} MB; files up to {max_bytes / _MB:.0f} MB can be indexed."
        )
    if size == 0:
        raise LoadError("empty", f"{name} is empty (0 bytes).")
    if suffix == ".pdf":
        return load_pdf(path, password=password, timeout_s=timeout_s, memory_mb=memory_mb, on_page=on_page)
    data = path.read_bytes()
    if suffix == ".csv":
        pages = load_csv(data, name=name, page_chars=page_chars)
    elif suffix in (".html", ".htm"):
        pages = paginate(html_text(data, name=name), page_chars=page_chars)
    elif suffix == ".docx":
        pages = paginate(docx_text(data, name=name), page_chars=page_chars)
    else:
        pages = load_text(data, name=name, page_chars=page_chars)
    if not pages:
        raise LoadError("empty", f"{name} has no text to index.")
    if on_page:
        on_page(len(pages), len(pages))
    return LoadedDocument(pages)
