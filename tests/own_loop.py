"""Running a coroutine to its end from a test, on an event loop of its own.

Playwright's sync API keeps an event loop running in the main thread once a browser test has run in the same
worker, and `asyncio.run` (or `anyio.run`) refuses to start inside it: "Cannot run the event loop while another
loop is running". Whether a browser test came first depends on how xdist shares the files out, so a test that
runs a loop itself runs it here, in a thread of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="own-loop") as pool:
        return pool.submit(asyncio.run, coroutine).result()
