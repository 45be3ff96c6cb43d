"""Watching the kb folder: new, changed, deleted and renamed files reach the ingestion queue.

Events (watchfiles) only say *where* to look. A path is handed on once its size and mtime have held
still for `settle_s` — a large file still being copied, or an editor's save (write a temp file,
rename it over the original), settles into one final state before it is indexed. A periodic full
rescan compares the folder (and every indexed file elsewhere) with the index, so nothing is missed
— not even changes made while the app was off.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import watchfiles

log = logging.getLogger(__name__)

Signature = tuple[int, float]  # (size, mtime)
Known = Callable[[], dict[str, tuple[int | None, float | None]]]  # indexed path → (size, mtime)
_TEMP_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".crdownload", ".download", ".swp", ".swx", "~")
_DATABASE_SUFFIXES = (".db", ".db-wal", ".db-shm", ".db-journal", ".sqlite", ".sqlite-wal", ".sqlite-shm")
_TICK_MS = 250


def ignored(path: Path, root: Path) -> bool:
    """Hidden files, editors' and browsers' temporary files, lock files, databases — and symlinks, or
    anything whose real place is outside `root`: only regular files inside the folder are documents."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return True
    if path.is_symlink() or not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root)):
        return True
    if not parts or any(part.startswith(".") for part in parts):
        return True
    name = parts[-1].lower()
    if name.startswith(("~$", "#")) or name.endswith(_TEMP_SUFFIXES + _DATABASE_SUFFIXES):
        return True
    return name in ("thumbs.db", "desktop.ini")


def signature(path: Path) -> Signature | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime) if path.is_file() else None


class KbWatcher:
    def __init__(
        self, kb_dir: Path, *, submit: Callable[[list[Path]], None], known: Known, settle_s: float, rescan_s: float
    ) -> None:
        self.kb_dir = kb_dir.resolve()
        self._submit = submit
        self._known = known
        self.settle_s = settle_s
        self.rescan_s = rescan_s
        self._pending: dict[Path, tuple[Signature | None, float]] = {}
        self._stop = threading.Event()
        self._rescan_requested = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="knowledge-watcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def rescan(self) -> None:
        """Compare the folder with the index at the next tick (e.g. the admin's "re-index")."""
        self._rescan_requested.set()

    def _run(self) -> None:
        next_rescan = 0.0
        while not self._stop.is_set():
            try:
                for changes in watchfiles.watch(
                    self.kb_dir, watch_filter=None, debounce=_TICK_MS, step=50, stop_event=self._stop,
                    rust_timeout=_TICK_MS, yield_on_timeout=True, raise_interrupt=False,
                ):  # fmt: skip
                    self._note_all({Path(raw) for _, raw in changes})
                    if time.monotonic() >= next_rescan or self._rescan_requested.is_set():
                        self._rescan_requested.clear()
                        self._full_rescan()
                        next_rescan = time.monotonic() + self.rescan_s
                    self._settle()
            except Exception:  # e.g. the folder was removed: say so, wait, try again
                log.exception("watching %s failed; retrying", self.kb_dir)
                self._stop.wait(5.0)
                self.kb_dir.mkdir(parents=True, exist_ok=True)

    def _note_all(self, paths: set[Path]) -> None:
        known: dict[str, tuple[int | None, float | None]] | None = None
        for path in paths:
            if path.is_dir():
                self._note_tree(path)
                continue
            if path.exists():
                self._note(path)
                continue
            known = self._known() if known is None else known
            if str(path) in known:
                self._note(path)
                continue
            prefix = str(path) + os.sep  # gone and unknown: maybe a folder that held indexed files
            for indexed in known:
                if indexed.startswith(prefix):
                    self._note(Path(indexed))

    def _note(self, path: Path) -> None:
        if not ignored(path, self.kb_dir) or not path.is_relative_to(self.kb_dir):
            self._pending[path] = (signature(path), time.monotonic())

    def _note_tree(self, folder: Path) -> None:
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                self._note(Path(root) / name)

    def _settle(self) -> None:
        """Hand on the paths whose state held still for `settle_s`."""
        now = time.monotonic()
        ready = []
        for path, (seen, since) in list(self._pending.items()):
            current = signature(path)
            if current != seen:
                self._pending[path] = (current, now)
            elif now - since >= self.settle_s:
                ready.append(path)
                del self._pending[path]
        if ready:
            self._submit(sorted(ready))

    def _full_rescan(self) -> None:
        known = self._known()
        on_disk: set[str] = set()
        for root, dirs, files in os.walk(self.kb_dir):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                path = Path(root) / name
                if ignored(path, self.kb_dir):
                    continue
                on_disk.add(str(path))
                if known.get(str(path)) != signature(path):
                    self._note(path)
        for indexed, state in known.items():
            if indexed not in on_disk and (
                Path(indexed).is_relative_to(self.kb_dir) or signature(Path(indexed)) != state
            ):
                self._note(Path(indexed))
