"""The reader process: one document read under memory, CPU and size limits, its pages streamed back.

Started by `loaders/reader.py` as `python -m app.knowledge.loaders.worker MEMORY_BYTES` (never
imported by the app), it serves documents one after the other: per JSON request line on stdin (path,
format, password, limits) it writes JSON lines on stdout: `{"pages": n}` when the count is known
(PDFs), then `{"page": i, "text": ...}` per page (with `"failed"` when a page could not be read),
`{"ocr_page": i}` before a page is read by OCR (and `"ocr": confidence` on that page's message),
`{"large": true}` when a scan is too long for the lane of small files,
`{"partial": why}` when it stopped at the page limit, `{"done": true}` — or `{"error": kind,
"detail": ..., "message": ...}` —, and last `{"end": true}`. A hostile file can exhaust this
process's memory or time, never the app's: the parent kills it when its time is up.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.knowledge.loaders.docx import docx_pieces
from app.knowledge.loaders.html import html_pieces
from app.knowledge.loaders.scans import Scans, read_image_file
from app.knowledge.loaders.text import Paginator, csv_text, text_pieces
from app.knowledge.loaders.types import LoadError, ScanTooLong


class _Enough(Exception):
    """The page limit is reached: the rest of the document is left out."""


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class _Sink:
    """Pages out to the parent, at most `max_pages` of them, each at most `max_page_chars` long."""

    def __init__(self, *, max_pages: int, max_page_chars: int) -> None:
        self.max_pages = max_pages
        self.max_page_chars = max_page_chars
        self.count = 0
        self.known_total = 0
        self.failed = False

    def total(self, pages: int) -> None:
        self.known_total = pages
        _emit({"pages": pages})

    def page(self, number: int, text: str, *, failed: str | None = None, ocr: float | None = None) -> None:
        if self.count >= self.max_pages:
            raise _Enough
        message: dict[str, Any] = {"page": number, "text": text[: self.max_page_chars]}
        if failed:
            message["failed"] = failed
        if ocr is not None:
            message["ocr"] = ocr
        _emit(message)
        self.count += 1

    def reading_by_ocr(self, number: int) -> None:
        if self.count >= self.max_pages:
            raise _Enough
        _emit({"ocr_page": number})

    def error(self, kind: str, detail: str) -> None:
        _emit({"error": kind, "detail": detail})
        self.failed = True


def _limit_cpu(cpu_s: int) -> None:
    """At most `cpu_s` more seconds of CPU for this document (SIGXCPU ends the process)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft, hard = int(usage.ru_utime + usage.ru_stime) + cpu_s, resource.getrlimit(resource.RLIMIT_CPU)[1]
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _scans(request: dict[str, Any]) -> Scans | None:
    if not request.get("ocr"):
        return None
    max_pages = request.get("ocr_max_pages")
    return Scans(
        max_pixels=int(request["ocr_max_pixels"]), page_timeout_s=float(request["ocr_page_timeout_s"]),
        max_pages=int(max_pages) if max_pages is not None else None, allow_cpu=lambda s: _limit_cpu(int(s)),
    )  # fmt: skip


def _read(request: dict[str, Any], sink: _Sink) -> None:
    path = Path(request["path"])
    name, kind = path.name, request["format"]
    if kind == "pdf":
        from app.knowledge.loaders.pdf_reader import read_pdf  # pypdf is imported under the limits

        read_pdf(str(path), request.get("password"), sink, scans=_scans(request))
        return
    if kind == "image":
        scans = _scans(request)
        if scans is None:
            raise LoadError("no_text", f"{name} is an image: it can only be read by OCR, which is turned off "
                            "(setting knowledge.ocr).")  # fmt: skip
        read_image_file(path, name=name, scans=scans, sink=sink)
        return
    pieces: Iterable[str]
    if kind == "docx":
        pieces = docx_pieces(path, name=name, max_unpacked_bytes=int(request["max_unpacked_bytes"]))
    elif kind == "html":
        pieces = html_pieces(path, name=name)
    elif kind == "csv":
        pieces = csv_text(text_pieces(path, name=name), name=name)
    else:
        pieces = text_pieces(path, name=name)
    paginator = Paginator(page_chars=int(request["page_chars"]), emit=lambda p: sink.page(p.number, p.text))
    for piece in pieces:
        paginator.feed(piece)
    paginator.close()
    if not sink.count:
        raise LoadError("empty", f"{name} has no text to index.")


def _partial(sink: _Sink) -> str:
    if sink.known_total:
        return f"only its first {sink.count} of {sink.known_total} pages"
    return f"only its first {sink.count} pages"


def _serve(request: dict[str, Any]) -> None:
    _limit_cpu(int(request["cpu_s"]))
    sink = _Sink(max_pages=int(request["max_pages"]), max_page_chars=int(request["max_page_chars"]))
    reserve = bytearray(1 << 20)  # freed on MemoryError, so the error can still be reported
    failure = None
    try:
        _read(request, sink)
    except _Enough:
        _emit({"partial": _partial(sink)})
    except ScanTooLong:
        _emit({"large": True})
    except LoadError as err:
        failure = {"error": err.kind, "message": err.message}
    except MemoryError:
        failure = {"error": "too_large", "detail": "memory limit reached"}
    except Exception as err:
        failure = {"error": "corrupt", "detail": f"{type(err).__name__}: {err}"[:300]}
    del reserve  # after the except blocks: the failed frames (and their memory) are gone
    if failure:
        _emit(failure)
    elif not sink.failed:
        _emit({"done": True})


def main() -> int:
    memory_bytes = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    os.nice(5)  # reading documents must not starve the UI or the engine
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # tesseract (OCR) on one core
    for line in sys.stdin:  # one request per document, until the app closes the pipe
        _serve(json.loads(line))
        _emit({"end": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
