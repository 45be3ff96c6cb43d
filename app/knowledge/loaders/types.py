"""What a loader returns, and how it says no."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.errors import QuartetError

ErrorKind = Literal["encrypted", "no_text", "corrupt", "empty", "unsupported", "too_large", "timeout"]
ERROR_KINDS: tuple[ErrorKind, ...] = ("encrypted", "no_text", "corrupt", "empty", "unsupported", "too_large", "timeout")
_MB = 2**20


@dataclass(frozen=True)
class Page:
    number: int  # 1-based; a real page for PDFs and images, a pseudo-page for text formats
    text: str
    ocr: float | None = None  # read by OCR: its confidence (0–1); None for a text layer or text format


@dataclass(frozen=True)
class LoadedDocument:
    pages: list[Page]
    # page numbers without a text layer (images only), and pages the reader failed on: kept as empty
    # pages (so page numbers stay true) and reported to the user
    blank_pages: list[int] = field(default_factory=list)
    failed_pages: list[int] = field(default_factory=list)
    partial: str | None = None  # why only a part of the document was read, for people
    ocr: bool = False  # pages without a text layer were read by OCR (the blank ones held no readable text)

    def cut(self, last_page: int, why: str) -> LoadedDocument:
        """The document up to `last_page`, saying why the rest is left out."""
        return LoadedDocument(
            [p for p in self.pages if p.number <= last_page],
            blank_pages=[n for n in self.blank_pages if n <= last_page],
            failed_pages=[n for n in self.failed_pages if n <= last_page],
            partial=why,
            ocr=self.ocr,
        )

    @property
    def note(self) -> str | None:
        notes = [self.partial] if self.partial else []
        if self.blank_pages and self.ocr:
            notes.append(
                f"{_count(self.blank_pages, len(self.pages))} no text ({_listed(self.blank_pages)}), not even read "
                "by OCR: they are not searchable."
            )
        elif self.blank_pages:
            notes.append(
                f"{_count(self.blank_pages, len(self.pages))} no text layer ({_listed(self.blank_pages)}): they look "
                "like scanned images and OCR is not available (setting knowledge.ocr), so they are not searchable."
            )
        if self.failed_pages:
            notes.append(
                f"{_count(self.failed_pages, len(self.pages))} could not be read ({_listed(self.failed_pages)})."
            )
        return " ".join(notes) or None


def _count(pages: list[int], total: int) -> str:
    return f"{len(pages)} of {total} pages have" if len(pages) > 1 else f"1 of {total} pages has"


def _listed(pages: list[int]) -> str:
    shown = ", ".join(str(n) for n in pages[:10]) + ("…" if len(pages) > 10 else "")
    return f"page {shown}" if len(pages) == 1 else f"pages {shown}"


def size_problem(name: str, size: int, max_bytes: int, *, whole: bool = True) -> str | None:
    """Why a file of `size` bytes (`whole`: its full size; else as much as was read so far) is refused
    as too large, for people; None when it is within the limit. Uploads and indexing say it alike."""
    if size <= max_bytes:
        return None
    sized = f" ({_megabytes(size)})" if whole else ""
    return (f"{name}{sized} is larger than {_megabytes(max_bytes)}, the limit for one file: split it, or raise "
            "the limit (setting knowledge.max_file_mb).")  # fmt: skip


def _megabytes(n: int) -> str:
    mb = n / _MB
    return f"{mb:.0f} MB" if mb >= 10 else f"{mb:.1f} MB" if mb >= 0.1 else f"{n:,} bytes"


class ScanTooLong(Exception):
    """The document has more pages to read by OCR than the lane of small files reads: it moves to the
    lane of large files."""


class LoadError(QuartetError):
    """A file that cannot be read, with a message written for the person who dropped it; `kind` (one of
    ERROR_KINDS, kept as the document's `error_kind`) says why."""

    kind: ErrorKind

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message, kind=kind)
