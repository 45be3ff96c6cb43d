"""PDF pages in the reader process (`worker.py`): pypdf, page by page.

Imported only in the reader process, after its limits are set: pypdf and what it allocates for a
hostile file never enter the app.
"""

from __future__ import annotations

import logging
from typing import Protocol


class Sink(Protocol):
    def total(self, pages: int) -> None: ...

    def page(self, number: int, text: str, *, failed: str | None = None) -> None: ...

    def error(self, kind: str, detail: str) -> None: ...


def read_pdf(path: str, password: str | None, sink: Sink) -> None:
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
    for number in range(1, total + 1):
        try:
            text = pages[number - 1].extract_text() or ""
        except MemoryError:
            raise
        except Exception as err:  # one bad page must not lose the others
            sink.page(number, "", failed=f"{type(err).__name__}: {err}"[:300])
            continue
        sink.page(number, text)
