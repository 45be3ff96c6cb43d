"""The key the pages' browser storage is sealed with, kept in the data folder so that it outlives the process.

Each browser keeps a random id in its localStorage (whose conversations it has: app/ui/chat_tab.py), sealed
by Gradio with a key. Without a fixed one, Gradio draws a new key at every start and no browser can read its
id back after a restart or a crash: every chat list comes up empty. The key is made once, at first start, and
read back at every start after; backing it up with the database keeps people's chat lists. (The page hands
the key to the browser to seal and unseal its storage, so it is no password: what keeps a chat private is
the random id itself.)"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

log = logging.getLogger(__name__)
FILE_NAME = "browser-secret"
_MODE = 0o600


def browser_secret(data_dir: Path) -> str:
    """The key in `data_dir`/browser-secret; made there (owner-only, all at once) if it is not yet."""
    path = data_dir / FILE_NAME
    found = _read(path)
    if found:
        return found
    data_dir.mkdir(parents=True, exist_ok=True)
    made = secrets.token_urlsafe(32)
    if path.exists():  # there but empty: no browser can have used it
        log.warning("%s was empty: a new key is written (browsers' stored chat lists restart)", path)
        _write(path, made, replace=True)
        return made
    if not _write(path, made, replace=False):  # another process made it first: theirs is the one
        return _read(path) or made
    return made


def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return ""
    if text and stat.S_IMODE(path.stat().st_mode) != _MODE:
        os.chmod(path, _MODE)  # copied back from a backup with wider rights
    return text


def _write(path: Path, text: str, *, replace: bool) -> bool:
    """Write `text` to a file of its own and move it into place in one step; False if `path` appeared meanwhile
    (and `replace` is off). A crash midway leaves no half-written key, only a stray temporary file at worst."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODE)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as out:
            out.write(text + "\n")
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(temporary, path)
            return True
        try:
            os.link(temporary, path)  # fails if the file is there: never over a key already handed out
        except FileExistsError:
            return False
        return True
    finally:
        temporary.unlink(missing_ok=True)
