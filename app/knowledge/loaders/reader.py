"""Every document is read in a child process with a time and memory limit, page by page.

A malicious or broken file can make a parser loop or allocate without end — a PDF, a zip bomb
posing as a .docx, a one-line HTML file of 20 MB; here it only costs the child (`worker.py`), which
is killed when its time is up. Pages stream back as they are read (so the caller can show progress),
at most `max_pages` of them: a longer document is read in part, and says so.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from app.knowledge.loaders.types import LoadedDocument, LoadError, Page

_ROOT = Path(__file__).resolve().parents[3]  # the folder that holds the `app` package
_HYPHENATED = re.compile(r"(?<=[a-zäöüß])-\n(?=[a-zäöüß])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MB = 2**20

PageCallback = Callable[[int, int], None]  # (pages read, pages in the document; 0 while unknown)


@dataclass(frozen=True)
class ReadLimits:
    timeout_s: float = 120.0  # the reader process is killed after this long
    memory_mb: int = 1024  # its address space
    max_pages: int = 2000  # pages read; the rest is left out (the document says so)
    max_unpacked_mb: float = 100.0  # a .docx's XML may unpack to this much
    page_chars: int = 3000  # size of a pseudo-page of a text format

    @property
    def max_page_chars(self) -> int:
        """A PDF page's text beyond this is cut (a real page has a few thousand characters)."""
        return max(100 * self.page_chars, 100_000)


def read_document(
    path: Path, *, format: str, password: str | None, limits: ReadLimits, on_page: PageCallback | None = None
) -> LoadedDocument:
    request = {
        "path": str(path), "format": format, "password": password,
        "memory_bytes": limits.memory_mb * _MB, "cpu_s": max(1, int(limits.timeout_s) + 5),
        "max_pages": limits.max_pages, "max_page_chars": limits.max_page_chars, "page_chars": limits.page_chars,
        "max_unpacked_bytes": int(limits.max_unpacked_mb * _MB),
    }  # fmt: skip
    python_path = os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", "app.knowledge.loaders.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env={**os.environ, "PYTHONPATH": python_path},
        )  # fmt: skip
        try:
            reading = _Reading(path.name, format=format, password=password, limits=limits, on_page=on_page)
            for message in _talk(child, request, deadline=time.monotonic() + limits.timeout_s):
                reading.take(message)
        except TimeoutError:
            raise LoadError(
                "timeout",
                f"Reading {path.name} took longer than {limits.timeout_s:g} s and was stopped. The file may be "
                "malformed: re-export it, or raise the reading time limit for very long documents.",
            ) from None
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
        return reading.result(exit_code=child.returncode, stderr=_tail(errors))


def _talk(child: subprocess.Popen[bytes], request: dict[str, Any], *, deadline: float) -> Iterator[dict[str, Any]]:
    """The child's messages as they come; TimeoutError when the deadline passes first."""
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(json.dumps(request).encode() + b"\n")
    child.stdin.close()
    buffer = b""
    fd = child.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            yield from (json.loads(line) for line in lines if line.strip())


class _Reading:
    """Turns the child's messages into pages or a LoadError written for people."""

    def __init__(
        self, name: str, *, format: str, password: str | None, limits: ReadLimits, on_page: PageCallback | None
    ) -> None:
        self.name = name
        self.format = format
        self.password = password
        self.limits = limits
        self.on_page = on_page
        self.total = 0
        self.pages: list[Page] = []
        self.failed: list[int] = []
        self.failed_detail = ""
        self.error: dict[str, str] | None = None
        self.partial: str | None = None
        self.done = False

    def take(self, message: dict[str, Any]) -> None:
        if "error" in message:
            self.error = message
        elif "pages" in message:
            self.total = int(message["pages"])
        elif "page" in message:
            text = message["text"]
            self.pages.append(Page(int(message["page"]), _clean(text) if self.format == "pdf" else text))
            if message.get("failed"):
                self.failed.append(int(message["page"]))
                self.failed_detail = self.failed_detail or message["failed"]
            if self.on_page:
                self.on_page(len(self.pages), self.total)
        elif "partial" in message:
            self.partial = (
                f"Indexed in part: {message['partial']} were read (the limit is {self.limits.max_pages} pages "
                "per document); the rest is left out. Split the document to index all of it."
            )
            self.done = True
        elif message.get("done"):
            self.done = True

    def result(self, *, exit_code: int | None, stderr: str) -> LoadedDocument:
        if self.error:
            raise LoadError(*self._explain(self.error))
        if not self.done and "MemoryError" in stderr:
            raise LoadError(*self._explain({"error": "too_large", "detail": stderr}))
        if not self.done:
            raise LoadError(
                "corrupt",
                f"The document reader stopped unexpectedly on {self.name} (exit code {exit_code}); the file may be "
                f"damaged. {stderr}".strip(),
            )
        if not self.pages:
            raise LoadError("empty", f"{self.name} has no pages.")
        if len(self.failed) == len(self.pages):
            raise LoadError("corrupt", f"No page of {self.name} could be read ({self.failed_detail}).")
        blank = [p.number for p in self.pages if not p.text.strip() and p.number not in self.failed]
        if len(blank) + len(self.failed) == len(self.pages):
            raise LoadError(
                "no_text",
                f"{self.name} has no text layer on any of its {len(self.pages)} pages: it looks like a scanned "
                "document, and OCR is not available on this appliance.",
            )
        return LoadedDocument(self.pages, blank_pages=blank, failed_pages=self.failed, partial=self.partial)

    def _explain(self, error: dict[str, str]) -> tuple[Any, str]:
        name, kind, detail = self.name, error["error"], error.get("detail", "")
        if "message" in error:
            return kind, error["message"]
        if kind == "encrypted":
            if self.password:
                return kind, f"The password given for {name} is wrong."
            return kind, f"{name} is password-protected. Give its password to index it, or add an unprotected copy."
        if kind == "too_large":
            return kind, (
                f"Reading {name} needed more than {self.limits.memory_mb} MB of memory and was stopped to protect "
                "the appliance. Split the document or re-export it."
            )
        what = "a PDF" if self.format == "pdf" else f"a readable {self.format.upper()} file"
        return "corrupt", f"{name} is damaged or not {what} ({detail}). Re-export or re-save it and add it again."


def _clean(text: str) -> str:
    """Valid UTF-8, ligatures (ﬁ) as letters, no control characters, words hyphenated at line ends joined."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # pypdf can return lone surrogates
    text = unicodedata.normalize("NFKC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _HYPHENATED.sub("", _CONTROL.sub("", text))


def _tail(stream: IO[bytes], limit: int = 300) -> str:
    """The last line the child wrote on stderr (its error, if it died of one)."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - limit))
    lines = stream.read().decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""
