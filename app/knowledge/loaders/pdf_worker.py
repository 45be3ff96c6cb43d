"""The PDF reader's child process: pypdf, page by page, under a memory and CPU limit.

Run as a script by `loaders/pdf.py` (never imported by the app): it reads one JSON request line on
stdin (path, password, limits) and writes JSON lines on stdout:
`{"pages": n}`, then `{"page": i, "text": ...}` per page (with `"failed"` when a page could not be
read), then `{"done": true}` — or `{"error": kind, "detail": ...}`. A hostile file can exhaust this
process's memory or time, never the app's: the parent kills it when its time is up.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
from typing import Any


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _limit(memory_bytes: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    os.nice(5)  # reading PDFs must not starve the UI or the engine


def _read(path: str, password: str | None) -> None:
    import pypdf  # after the limits: the import is covered by them too
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    try:
        reader = pypdf.PdfReader(path, strict=False)
        if reader.is_encrypted and not reader.decrypt(password or ""):
            _emit({"error": "encrypted", "detail": "wrong password" if password else "no password"})
            return
        pages = reader.pages
        total = len(pages)
    except FileNotDecryptedError as err:
        _emit({"error": "encrypted", "detail": str(err)})
        return
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as err:
        _emit({"error": "corrupt", "detail": f"{type(err).__name__}: {err}"[:300]})
        return
    except NotImplementedError as err:  # e.g. an encryption algorithm pypdf cannot decrypt
        _emit({"error": "encrypted", "detail": str(err)[:300]})
        return
    _emit({"pages": total})
    for number in range(1, total + 1):
        try:
            text = pages[number - 1].extract_text() or ""
        except MemoryError:
            raise
        except Exception as err:  # one bad page must not lose the others
            _emit({"page": number, "text": "", "failed": f"{type(err).__name__}: {err}"[:300]})
            continue
        _emit({"page": number, "text": text})
    _emit({"done": True})


def main() -> int:
    request = json.loads(sys.stdin.readline())
    _limit(int(request["memory_bytes"]), int(request["cpu_s"]))
    reserve = bytearray(1 << 20)  # freed on MemoryError, so the error can still be reported
    failure = None
    try:
        _read(request["path"], request.get("password"))
    except MemoryError:
        failure = {"error": "too_large", "detail": "memory limit reached"}
    except Exception as err:
        failure = {"error": "corrupt", "detail": f"{type(err).__name__}: {err}"[:300]}
    del reserve  # after the except blocks: the failed frames (and their memory) are gone
    if failure:
        _emit(failure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
