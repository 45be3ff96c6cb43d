"""The reader process's messages for one document, turned into its pages or a LoadError for people."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from app.knowledge.loaders.types import LoadedDocument, LoadError, Page, ScanTooLong

_HYPHENATED = re.compile(r"(?<=[a-zäöüß])-\n(?=[a-zäöüß])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

PageCallback = Callable[[int, int], None]  # (pages read, pages in the document; 0 while unknown)
OcrCallback = Callable[[int, int], None]  # (page being read by OCR, pages in the document)


class Reading:
    """Turns the child's messages into pages or a LoadError written for people."""

    def __init__(
        self,
        name: str,
        *,
        format: str,
        password: str | None,
        max_pages: int,
        memory_mb: int,
        on_page: PageCallback | None,
        on_ocr: OcrCallback | None = None,
        ocr: bool = False,
    ) -> None:
        self.name = name
        self.format = format
        self.password = password
        self.max_pages = max_pages
        self.memory_mb = memory_mb
        self.on_page = on_page
        self.on_ocr = on_ocr
        self.ocr = ocr
        self.large = False
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
        elif "ocr_page" in message:
            if self.on_ocr:
                self.on_ocr(int(message["ocr_page"]), self.total)
        elif "page" in message:
            text, ocr = message["text"], message.get("ocr")
            clean = self.format in ("pdf", "image")
            self.pages.append(Page(int(message["page"]), _clean(text) if clean else text, ocr))
            if message.get("failed"):
                self.failed.append(int(message["page"]))
                self.failed_detail = self.failed_detail or message["failed"]
            if self.on_page:
                self.on_page(len(self.pages), self.total)
        elif "partial" in message:
            self.partial = (
                f"Indexed in part: {message['partial']} were read (the limit is {self.max_pages} pages "
                "per document); the rest is left out. Split the document to index all of it."
            )
            self.done = True
        elif message.get("large"):
            self.large = True
        elif message.get("done"):
            self.done = True

    def result(self, *, exit_code: int | None, stderr: str) -> LoadedDocument:
        if self.error:
            raise LoadError(*self._explain(self.error))
        if self.large:
            raise ScanTooLong(self.name)
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
        if len(blank) + len(self.failed) == len(self.pages) and self.ocr:
            raise LoadError(
                "no_text",
                f"No text was found on any of the {len(self.pages)} pages of {self.name}, not even by OCR: it "
                "holds no readable text (or the scan is too faint or too small to read).",
            )
        if len(blank) + len(self.failed) == len(self.pages):
            raise LoadError(
                "no_text",
                f"{self.name} has no text layer on any of its {len(self.pages)} pages: it looks like a scanned "
                "document, and OCR is not available on this appliance (setting knowledge.ocr).",
            )
        return LoadedDocument(
            self.pages, blank_pages=blank, failed_pages=self.failed, partial=self.partial, ocr=self.ocr
        )

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
                f"Reading {name} needed more than {self.memory_mb} MB of memory and was stopped to protect "
                "the appliance. Split the document or re-export it."
            )
        what = "a PDF" if self.format == "pdf" else f"a readable {self.format.upper()} file"
        return "corrupt", f"{name} is damaged or not {what} ({detail}). Re-export or re-save it and add it again."


def _clean(text: str) -> str:
    """Valid UTF-8, ligatures (ﬁ) as letters, no control characters, words hyphenated at line ends joined."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # pypdf can return lone surrogates
    text = unicodedata.normalize("NFKC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _HYPHENATED.sub("", _CONTROL.sub("", text))
