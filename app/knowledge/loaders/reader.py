"""Every document is read in a child process with a time and memory limit, page by page.

A malicious or broken file can make a parser loop or allocate without end — a PDF, a zip bomb
posing as a .docx, a one-line HTML file of 20 MB; here it only costs the child (`worker.py`), which
is killed when its time is up. Pages stream back as they are read (so the caller can show progress),
at most `max_pages` of them: a longer document is read in part, and says so.

A `Reader` keeps its process between documents (starting one costs 0.1–0.3 s of CPU, too much for
a folder of 300 small files) and starts a fresh one after any document that failed, timed out or ran
out of memory, after `reuse` documents, or when the memory limit changes.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from app.knowledge.loaders.reading import OcrCallback, PageCallback, Reading
from app.knowledge.loaders.types import LoadedDocument, LoadError

_ROOT = Path(__file__).resolve().parents[3]  # the folder that holds the `app` package
_MB = 2**20


@dataclass(frozen=True)
class ReadLimits:
    timeout_s: float = 120.0  # the reading of one document is stopped after this long
    memory_mb: int = 1024  # the reader process's address space
    max_pages: int = 2000  # pages read; the rest is left out (the document says so)
    max_unpacked_mb: float = 100.0  # a .docx's XML may unpack to this much
    page_chars: int = 3000  # size of a pseudo-page of a text format
    ocr: bool = True  # pages without a text layer, and image files, are read by OCR
    ocr_page_timeout_s: float = 60.0  # the OCR of one page is stopped after this long
    ocr_max_pixels: int = 50_000_000  # a larger image (or a decompression bomb) is refused
    ocr_max_pages: int | None = None  # pages read by OCR in this lane; more: ScanTooLong (None: no limit)

    @property
    def max_page_chars(self) -> int:
        """A PDF page's text beyond this is cut (a real page has a few thousand characters)."""
        return max(100 * self.page_chars, 100_000)


class Reader:
    """One reader process at a time, kept between documents; not for use by two threads at once."""

    def __init__(self, *, reuse: int = 200) -> None:
        self.reuse = reuse
        self._child: subprocess.Popen[bytes] | None = None
        self._errors: IO[bytes] | None = None
        self._memory_mb = 0
        self._uses = 0

    def read(
        self, path: Path, *, format: str, password: str | None, limits: ReadLimits, on_page: PageCallback | None = None,
        on_ocr: OcrCallback | None = None,
    ) -> LoadedDocument:  # fmt: skip
        if self._child is not None and self._child.poll() is not None:
            self._end()  # the kept process died while idle (killed from outside): start afresh
        child = self._start(limits.memory_mb)
        request = {
            "path": str(path), "format": format, "password": password, "cpu_s": max(1, int(limits.timeout_s) + 5),
            "max_pages": limits.max_pages, "max_page_chars": limits.max_page_chars, "page_chars": limits.page_chars,
            "max_unpacked_bytes": int(limits.max_unpacked_mb * _MB), "ocr": limits.ocr,
            "ocr_page_timeout_s": limits.ocr_page_timeout_s, "ocr_max_pixels": limits.ocr_max_pixels,
            "ocr_max_pages": limits.ocr_max_pages,
        }  # fmt: skip
        reading = Reading(
            path.name, format=format, password=password, max_pages=limits.max_pages, memory_mb=limits.memory_mb,
            on_page=on_page, on_ocr=on_ocr, ocr=limits.ocr,
        )  # fmt: skip
        ended = False
        deadline = _Deadline(time.monotonic() + limits.timeout_s)
        try:
            for message in _talk(child, request, deadline=deadline):
                if message.get("end"):
                    ended = True
                    break
                if "ocr_page" in message:  # each page read by OCR has its own time
                    deadline.at = max(deadline.at, time.monotonic() + 4 * limits.ocr_page_timeout_s + 5)
                reading.take(message)
        except TimeoutError:
            self.close()
            raise LoadError(
                "timeout",
                f"Reading {path.name} took longer than {limits.timeout_s:g} s (or one page read by OCR longer than "
                f"{limits.ocr_page_timeout_s:g} s) and was stopped. The file may be "
                "malformed: re-export it, or raise the reading time limit for very long documents.",
            ) from None
        except BaseException:
            self.close()
            raise
        self._uses += 1
        if not ended or not reading.done or self._uses >= self.reuse:
            exit_code, stderr = self._end()
            return reading.result(exit_code=exit_code, stderr=stderr)
        return reading.result(exit_code=None, stderr="")

    def close(self) -> None:
        self._end()

    def _start(self, memory_mb: int) -> subprocess.Popen[bytes]:
        if self._child is not None and self._memory_mb == memory_mb and self._child.poll() is None:
            return self._child
        self._end()
        python_path = os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (open as long as the process; closed by _end)
        self._child = subprocess.Popen(
            [sys.executable, "-m", "app.knowledge.loaders.worker", str(memory_mb * _MB)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors,
            env={**os.environ, "PYTHONPATH": python_path},
        )  # fmt: skip
        self._memory_mb, self._uses = memory_mb, 0
        return self._child

    def _end(self) -> tuple[int | None, str]:
        """Stop the process (if any): its exit code and the last line it wrote on stderr."""
        child, errors, self._child, self._errors = self._child, self._errors, None, None
        if child is None:
            return None, ""
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=1)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        stderr = _tail(errors) if errors is not None else ""
        if errors is not None:
            errors.close()
        return child.returncode, stderr


def read_document(
    path: Path, *, format: str, password: str | None, limits: ReadLimits, on_page: PageCallback | None = None,
    on_ocr: OcrCallback | None = None,
) -> LoadedDocument:  # fmt: skip
    """Read one document in a process of its own."""
    reader = Reader(reuse=1)
    try:
        return reader.read(path, format=format, password=password, limits=limits, on_page=on_page, on_ocr=on_ocr)
    finally:
        reader.close()


@dataclass
class _Deadline:
    at: float  # time.monotonic(); moved later while pages are read by OCR


def _talk(child: subprocess.Popen[bytes], request: dict[str, Any], *, deadline: _Deadline) -> Iterator[dict[str, Any]]:
    """The child's messages as they come; TimeoutError when the deadline passes first."""
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(json.dumps(request).encode() + b"\n")
        child.stdin.flush()
    except BrokenPipeError:
        return
    buffer = b""
    fd = child.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline.at - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            yield from (json.loads(line) for line in lines if line.strip())


def _tail(stream: IO[bytes], limit: int = 300) -> str:
    """The last line the child wrote on stderr (its error, if it died of one)."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - limit))
    lines = stream.read().decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""
