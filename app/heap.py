"""Giving the C heap's free memory back to the system (glibc's `malloc_trim`).

glibc keeps what a thread freed in its arena for the next allocation; after a burst of ingestion (reading,
chunking, embedding files) that is ~10-20 MB the app holds while idle (bench/app_memory.py,
docs/benchmarks.md). `malloc_trim(0)` hands the free pages of every arena back. Elsewhere (musl, macOS)
there is nothing to call and this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim  # type: ignore[no-any-return]


def give_back() -> bool:
    """Return the C heap's free pages to the system; True if there was a trim to call (glibc)."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
