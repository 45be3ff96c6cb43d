"""Saving an upload into the kb folder under a safe, unique name — never anywhere else.

The name keeps letters of any script (Chinese included), digits, spaces and common punctuation;
directories, `..`, control characters and characters that are unsafe on common file systems go.
A name already taken gets " (2)", " (3)"… — unless the file there holds the same bytes: the same file
uploaded again is not stored a second time (it was, as "name (2).pdf", although known as a duplicate).
The file is written to a hidden temporary file first and
linked into place, so the watcher never sees half an upload and nothing is ever overwritten.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from app.errors import Kind, QuartetError
from app.knowledge.loaders.types import size_problem

_UNSAFE = re.compile(r'[<>:"/\\|?*]')
_MAX_NAME_BYTES = 200  # well under the 255-byte limit of common file systems, room for " (999)"
_COPY_BLOCK = 1 << 20


@dataclass(frozen=True)
class Uploaded:
    """One file of a batch of uploads: the name it was sent with, the name it was saved as (None: it was
    not saved) and why not, for people."""

    file: str
    saved_as: str | None
    reason: str | None = None


class UploadError(QuartetError):
    """An upload that was refused, with a message for the person uploading (kind `too_large`, or
    `request` for what is not a file or not a usable name)."""

    def __init__(self, message: str, *, kind: Kind = "request") -> None:
        super().__init__(message, kind=kind)


def shown_name(filename: str) -> str:
    """A file's name as the library shows it: without control or format characters (a newline, an RTL
    override that makes `exe.txt` read `txt.exe`, zero-width ones), as an upload's name is saved."""
    name = "".join(ch for ch in unicodedata.normalize("NFC", filename) if not unicodedata.category(ch).startswith("C"))
    return name.strip() or "unnamed"


def safe_name(filename: str) -> str:
    """A file name without directories or unsafe characters, at most ~200 bytes of UTF-8."""
    name = re.split(r"[/\\]", unicodedata.normalize("NFC", filename))[-1]
    name = "".join(ch for ch in name if not unicodedata.category(ch).startswith("C"))
    name = _UNSAFE.sub("_", name).strip().lstrip(".").strip()
    name = name.rstrip(". ")
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem:
        stem, suffix = name, ""
    suffix = suffix[:16]
    while len((stem + "." + suffix).encode()) > _MAX_NAME_BYTES and stem:
        stem = stem[:-1]
    stem = stem.strip() or "upload"
    return f"{stem}.{suffix}" if suffix else stem


def save_upload(kb_dir: Path, filename: str, data: bytes | Path, *, max_bytes: int) -> Path:
    """Write `data` (bytes, or a file such as the browser's upload) into `kb_dir`; the path written."""
    root = kb_dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    name = safe_name(filename)
    fd, temp_name = tempfile.mkstemp(dir=root, prefix=".upload-", suffix=".part")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            if isinstance(data, bytes):
                _check_size(len(data), filename, max_bytes, whole=True)
                out.write(data)
            else:
                with open_regular(data) as source:
                    _copy(source, out, filename=filename, max_bytes=max_bytes)
        return _link_unique(temp, root, name)
    finally:
        temp.unlink(missing_ok=True)


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for reading — never a symlink, a device, a FIFO or a socket.

    O_NOFOLLOW refuses a symlink in the last place, O_NONBLOCK keeps a FIFO from blocking the open,
    and the check is made on the opened descriptor, so the file cannot be swapped in between."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise UploadError(f"{path.name} cannot be read as a file ({err.strerror or err}); it was not saved.") from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UploadError(f"{path.name} is not a regular file; only files can be uploaded.")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def is_regular_file(path: Path) -> bool:
    """A regular file, not reached through a symlink in its last part."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _copy(source: BinaryIO, out: BinaryIO, *, filename: str, max_bytes: int) -> None:
    written = 0
    while block := source.read(_COPY_BLOCK):
        written += len(block)
        _check_size(written, filename, max_bytes, whole=False)
        out.write(block)


def _check_size(size: int, filename: str, max_bytes: int, *, whole: bool) -> None:
    if too_large := size_problem(filename, size, max_bytes, whole=whole):
        raise UploadError(f"{too_large} It was not saved.", kind="too_large")


def _link_unique(temp: Path, root: Path, name: str) -> Path:
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    for n in range(1, 10_000):
        candidate = root / (name if n == 1 else f"{stem} ({n}){dot}{suffix}")
        if candidate.resolve().parent != root:  # cannot happen with a safe name; checked anyway
            raise UploadError(f"{name!r} is not a valid file name.")
        try:
            os.link(temp, candidate)  # fails if the name is taken: never overwrites
        except FileExistsError:
            if _same_bytes(temp, candidate):
                return candidate
            continue
        except OSError:  # file systems without hard links
            if candidate.exists():
                continue
            shutil.copyfile(temp, candidate)
        return candidate
    raise UploadError(f"Too many files named like {name} in the knowledge folder.", kind="busy")


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two regular files hold the same bytes (a symlink or anything else never does)."""
    if not is_regular_file(b) or a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as one, open_regular(b) as other:
        while block := one.read(_COPY_BLOCK):
            if block != other.read(len(block)):
                return False
    return True
