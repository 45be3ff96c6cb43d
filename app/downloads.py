"""Files handed out once, to whoever asked: a backup to the admin session that took it, a chat's export to
the page that exported it.

Before (issue 47, item 5), a backup was written 0644 under a predictable name in `/tmp`, and Gradio copied
it into its own file cache (0644, never pruned), whence any logged-in person fetched it by its URL and read
every password hash and conversation; chat exports went the same way. Here a file is written 0600 into a
private folder (0700) of the data folder, offered under a random key (`secrets.token_urlsafe(32)`) that
only the asker is given, and never handed to Gradio. A backup's key is also bound to its admin session: the
route (app/api/download_routes.py) serves it only to a request that carries that session's token or upload
ticket. The first fetch that may have it claims it: the file is opened and unlinked at once (its bytes
stream from the open file), so it is fetched once and never lies on the disk after. What nobody claims is
removed after `ttl_s`, at the next offer, and so are the folder's leftovers (from an app killed meanwhile).
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

TTL_S = 600.0  # an offer not fetched within 10 minutes is removed


@dataclass(frozen=True)
class Download:
    path: Path
    name: str  # what the browser saves it as
    media_type: str
    expires: float
    admin_session: str | None = None  # a backup: only this admin session (its token) may fetch it


@dataclass(frozen=True)
class Offer:
    """What the asker is given: the path that fetches the file once, and what it is."""

    url: str  # /downloads/<key>, or /admin/downloads/<key> for an admin session's (its cookie goes there)
    name: str
    size: int


@dataclass(frozen=True)
class Claimed:
    """A download taken: its file open (and already unlinked), to stream and close."""

    file: BinaryIO
    size: int
    name: str
    media_type: str


class Downloads:
    def __init__(self, folder: Path, *, ttl_s: float = TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        """`folder`: private to this app (made 0700 at the first offer; anything in it not offered is removed)."""
        self._folder, self._ttl_s, self._clock = folder, ttl_s, clock
        self._offers: dict[str, Download] = {}
        self._lock = threading.Lock()

    def folder(self) -> Path:
        """The private folder, made (0700) if it is not there, for a writer that makes a file to offer."""
        self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._folder.chmod(0o700)  # one made before, by an older version or by hand
        return self._folder

    def offer(self, path: Path, *, name: str, media_type: str, admin_session: str | None = None) -> Offer:
        """Offer `path` (a file in `folder()`, made 0600 here) once."""
        path.chmod(0o600)
        key = secrets.token_urlsafe(32)
        with self._lock:
            self._prune()
            self._offers[key] = Download(path, name, media_type, self._clock() + self._ttl_s, admin_session)
        under = "/downloads/" if admin_session is None else "/admin/downloads/"
        return Offer(under + key, name, path.stat().st_size)

    def offer_text(self, text: str, *, name: str, media_type: str) -> Offer:
        """Write `text` to a private file and offer it once (a chat's export)."""
        path = self.folder() / f"{secrets.token_hex(16)}.part"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(text)
        return self.offer(path, name=name, media_type=media_type)

    def claim(self, key: str, *, may_fetch: Callable[[Download], bool]) -> Claimed | None:
        """The download of `key`, taken once, if `may_fetch` it (else it stays for its owner); None: no such
        key, expired, or not this requester's."""
        with self._lock:
            self._prune()
            found = self._offers.get(key)
            if found is None or not may_fetch(found):
                return None
            del self._offers[key]
        try:
            file = found.path.open("rb")
        except OSError:
            return None
        found.path.unlink(missing_ok=True)  # open: it streams from here, and lies nowhere on the disk
        return Claimed(file, os.fstat(file.fileno()).st_size, found.name, found.media_type)

    def close(self) -> None:
        """Every offer withdrawn and its file removed (the app stops)."""
        with self._lock:
            self._offers.clear()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _prune(self) -> None:
        """With the lock held: expired offers removed, and every file of the folder that is not offered."""
        now = self._clock()
        for key in [k for k, d in self._offers.items() if d.expires < now]:
            self._offers.pop(key).path.unlink(missing_ok=True)
        offered = {d.path.name for d in self._offers.values()}
        if self._folder.is_dir():
            for leftover in self._folder.iterdir():
                if leftover.name not in offered and leftover.is_file() and self._stale(leftover):
                    leftover.unlink(missing_ok=True)

    def _stale(self, path: Path) -> bool:
        """Unchanged for longer than an offer lasts: not a file being written (a backup being packed) nor one
        about to be offered, but a leftover (of an app killed meanwhile)."""
        try:
            return time.time() - path.stat().st_mtime > self._ttl_s
        except OSError:
            return False
