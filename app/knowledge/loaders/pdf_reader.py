"""PDF pages in the reader process (`worker.py`): pypdf, page by page; a page without usable text is
rendered and read by OCR (`scans.py`) when `scans` is given.

Imported only in the reader process, after its limits are set: pypdf and what it allocates for a
hostile file never enter the app.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from app.knowledge.loaders.scans import PdfPages, Scans

_USABLE = 20  # characters (not counting spaces): fewer on a page is a scan with a page number at most


class Sink(Protocol):
    def total(self, pages: int) -> None: ...

    def page(self, number: int, text: str, *, failed: str | None = None, ocr: float | None = None) -> None: ...

    def reading_by_ocr(self, number: int) -> None: ...

    def error(self, kind: str, detail: str) -> None: ...


def read_pdf(path: str, password: str | None, sink: Sink, *, scans: Scans | None = None) -> None:
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    try:
        reader = pypdf.PdfReader(path, strict=False)
        if reader.is_encrypted and not reader.decrypt(password or ""):
            sink.error("encrypted", "wrong password" if password else "no password")
            return
        pages = reader.pages
        total = len(pages)
    except FileNotDecryptedError as err:
        sink.error("encrypted", str(err))
        return
    except (NotImplementedError, DependencyError) as err:  # an encryption pypdf cannot decrypt here
        sink.error("encrypted", f"{type(err).__name__}: {err}"[:300])
        return
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as err:
        sink.error("corrupt", f"{type(err).__name__}: {err}"[:300])
        return
    sink.total(total)
    images = PdfPages(path, password, max_pixels=scans.max_pixels) if scans else None
    try:
        for number in range(1, total + 1):
            try:
                text = pages[number - 1].extract_text() or ""
            except MemoryError:
                raise
            except Exception as err:  # one bad page must not lose the others
                sink.page(number, "", failed=f"{type(err).__name__}: {err}"[:300])
                continue
            if scans and images and _scanned_page(text, pages[number - 1]):
                _scanned(number, text, images, scans, sink)
            else:
                sink.page(number, text)
    finally:
        if images:
            images.close()


def _scanned_page(text: str, page: Any) -> bool:
    """No text, or a few characters (a page number, a stamp) on a page that holds an image."""
    found = len("".join(text.split()))
    if not found:
        return True
    if found >= _USABLE:
        return False
    try:
        xobjects = page.get("/Resources", {}).get("/XObject", {})
        return any(xobjects[name].get("/Subtype") == "/Image" for name in xobjects)
    except Exception:  # an odd resource dictionary: keep the text layer
        return False


def _scanned(number: int, text: str, images: PdfPages, scans: Scans, sink: Sink) -> None:
    """A page without usable text, rendered and read by OCR (its bit of text layer if that fails)."""
    scans.start(number, sink)
    try:
        image = images.image(number)
    except MemoryError:
        raise
    except Exception as err:
        sink.page(number, text, failed=f"the page could not be rendered for OCR ({type(err).__name__}: {err})"[:300])
        return
    scans.read(number, image, sink, layer=text)
