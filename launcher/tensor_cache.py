"""The card's tensor cache, kept whole across a card that dies.

ggml-rpc writes a model's large tensors to the cache folder as it first receives them, one file per tensor
named by the hash of its bytes, and on later loads reads a file back instead of taking the tensor over the
network. It writes each file in place and never checks one it reads back (ggml-rpc.cpp: `set_tensor`,
`get_cached_file`): a card that dies while it writes one — killed, crashed, its power cut during a model's
first load — leaves a truncated file, and every later load sets only that file's bytes of the tensor and
runs with the rest of it missing, silently.

So while the agent runs it touches a mark in the folder every second, and on start it drops every file
changed since shortly before the last mark: a file that might be partial is sent again on the next load
(a few tensors), the rest stay. The margin covers filesystems that commit times seconds late (ext4: 5 s)."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

MARK = ".alive"
EVERY_S = 1.0
MARGIN_S = 30.0


def drop_suspects(folder: Path, *, margin_s: float = MARGIN_S) -> list[str]:
    """Remove the cache files changed within `margin_s` before the last mark; their names. No mark yet
    (a new folder): nothing is dropped."""
    try:
        last = (folder / MARK).stat().st_mtime
    except FileNotFoundError:
        return []
    dropped = []
    for path in sorted(folder.iterdir()):
        if path.name == MARK or not path.is_file():
            continue
        if path.stat().st_mtime >= last - margin_s:
            path.unlink(missing_ok=True)
            dropped.append(path.name)
    return dropped


def keep_marking(folder: Path, *, every_s: float = EVERY_S) -> threading.Thread:
    """Touch the mark now and every `every_s` for the life of the process (a daemon thread)."""
    mark = folder / MARK
    mark.touch()

    def loop() -> None:
        while True:
            time.sleep(every_s)
            with contextlib.suppress(OSError):  # the folder went away: a next start finds no mark, drops nothing
                mark.touch()

    thread = threading.Thread(target=loop, name="tensor-cache-mark", daemon=True)
    thread.start()
    return thread
