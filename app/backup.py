"""Backups of the appliance as one archive, checked restores, and backups on a schedule.

An archive (`quartet-backup-<UTC time>.tar.gz`) holds `database/quartet.db` (a consistent copy made by
SQLite's online backup API while the app writes), `documents/…` (the knowledge folder's files),
`settings/admin-settings.toml` (what the admin page changed), `settings/browser-secret` (so browsers
find their chat lists again) and `manifest.json` (format, version, created, each file's size and sha256).
No password or key is in it as it was typed or shown: the people and API keys made on the admin page are
in the database as PBKDF2 hashes and SHA-256 digests (a restore brings them back; no page shows them),
and the settings file and environment, which hold the installer's hashes and keys, are not backed up.

A restore is checked whole before anything changes (the manifest, every hash, no absolute path, no
`..`, no link or device; app/restore_checks.py: the manifest's shape, each member's size against it, the
room to unpack, the database Quartet's and not newer) and staged as `data_dir/restore-pending`; the next
start (`apply_pending`, before the database opens) moves the live state aside into
`data_dir/before-restore-<time>/` and the staged one in. Each move is repeated only if not yet done, so a
start killed half way finishes the restore at the following start. A check killed half way leaves
`restore-pending.<random>.partial`, which the next start removes.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import sqlite3
import tarfile
import tempfile
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from app.restore_checks import FORMAT, VERSION, BackupRefused, Entry, Manifest, Room
from app.restore_checks import database as check_database
from app.restore_checks import manifest as read_manifest
from app.restore_checks import sizes as check_sizes

log = logging.getLogger(__name__)

__all__ = ["FORMAT", "VERSION", "BackupRefused", "Manifest", "Places", "Room", "apply_pending", "check", "stage"]
PENDING = "restore-pending"
_DB, _DOCS, _SETTINGS = "database/quartet.db", "documents", "settings/admin-settings.toml"
_SECRET = "settings/browser-secret"  # seals each browser's chat-list id: restored, browsers find their chats
_NAME = "quartet-backup-{stamp}.tar.gz"
RESTART = (
    "It replaces the data at the next start: restart Quartet (`sudo systemctl restart quartet-app`; the launcher "
    "or systemd starts it again). The data it replaces is kept in the data folder's `before-restore-…`."
)


@dataclass(frozen=True)
class Places:
    """Where the state a backup holds lives on this appliance."""

    data_dir: Path
    db_path: Path
    kb_dir: Path
    settings_path: Path  # the page's settings file (app/page_settings.py)

    @property
    def secret(self) -> Path:
        return self.data_dir / "browser-secret"  # app/browser_secret.py


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def take(places: Places, folder: Path) -> Path:
    """Write one archive into `folder` (made 0700 if it is not there); its path. The archive is 0600 from its
    first byte: it holds every password hash, key digest and conversation."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="quartet-backup-") as tmp:
        copy = Path(tmp) / "quartet.db"
        source = sqlite3.connect(f"file:{places.db_path}?mode=ro", uri=True, timeout=10)
        target = sqlite3.connect(copy)
        try:
            source.backup(target)  # the online backup API: one consistent snapshot, writers carry on
        finally:
            target.close()
            source.close()
        files: list[tuple[str, Path]] = [(_DB, copy)]
        files += [(f"{_DOCS}/{rel}", path) for rel, path in _documents(places.kb_dir)]
        files += [
            (name, path)
            for name, path in ((_SETTINGS, places.settings_path), (_SECRET, places.secret))
            if path.is_file()
        ]
        manifest = Manifest(
            format=FORMAT,
            version=VERSION,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            files=tuple(Entry(path=name, size=path.stat().st_size, sha256=_sha256(path)) for name, path in files),
        )
        out = folder / _NAME.format(stamp=stamp())
        partial = out.with_suffix(".partial")
        private = os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
        with private, tarfile.open(fileobj=private, mode="w:gz") as tar:
            data = manifest.model_dump_json(indent=1).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size, info.mtime = len(data), int(datetime.now(UTC).timestamp())
            tar.addfile(info, io.BytesIO(data))
            for name, path in files:
                tar.add(path, arcname=name, recursive=False)
        partial.rename(out)  # a half-written archive never carries the final name
    return out


def _documents(kb_dir: Path) -> Iterator[tuple[str, Path]]:
    if not kb_dir.is_dir():
        return
    for path in sorted(kb_dir.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path.relative_to(kb_dir).as_posix(), path


def check(archive: Path, into: Path, *, reference: Path, room: Room) -> Manifest:
    """Unpack `archive` into the empty folder `into`, checking everything (app/restore_checks.py) against this
    appliance's own database at `reference` and within `room`; the manifest, or BackupRefused."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            manifest = _unpack(tar, into, room)
    except (tarfile.TarError, EOFError, zlib.error):
        raise BackupRefused("this is not a Quartet backup: it is not a readable .tar.gz archive") from None
    check_database(into / _DB, reference)
    return manifest


def _unpack(tar: tarfile.TarFile, into: Path, room: Room) -> Manifest:
    members = tar.getmembers()
    for member in members:
        _safe(member)
    files = [m for m in members if m.isfile()]
    by_name = {m.name: m for m in files}
    if len(by_name) != len(files):
        raise BackupRefused("the archive holds a file twice: it is not one Quartet wrote")
    if "manifest.json" not in by_name:
        raise BackupRefused("this is not a Quartet backup: it has no manifest.json")
    manifest = read_manifest(tar, by_name.pop("manifest.json"))
    listed = {f.path: f for f in manifest.files}
    if set(listed) != set(by_name) or len(listed) != len(manifest.files):
        extra, missing = sorted(set(by_name) - set(listed)), sorted(set(listed) - set(by_name))
        raise BackupRefused(f"the archive does not match its manifest (unlisted: {extra}, missing: {missing})")
    if _DB not in listed:
        raise BackupRefused("the archive holds no database")
    check_sizes(list(by_name.values()), listed, room, into)  # from the headers: nothing unpacked yet
    for name, member in by_name.items():
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        assert source is not None  # a regular file
        with source, target.open("wb") as out:
            shutil.copyfileobj(source, out)
        if _sha256(target) != listed[name].sha256:
            raise BackupRefused(f"{name} is damaged: its sha256 differs from the manifest's")
    return manifest


def _safe(member: tarfile.TarInfo) -> None:
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or "\\" in member.name:
        raise BackupRefused(f"the archive names a path outside its folders: {member.name!r}")
    if not (member.isfile() or member.isdir()):
        raise BackupRefused(f"the archive holds a link or special file: {member.name!r}")
    if member.name != "manifest.json" and path.parts[0] not in {"database", _DOCS, "settings"}:
        raise BackupRefused(f"the archive holds something a Quartet backup does not: {member.name!r}")


def stage(archive: Path, places: Places, room: Room) -> Manifest:
    """Check `archive` and stage it for the next start; the manifest. A refused one stages nothing."""
    work = Path(tempfile.mkdtemp(prefix=f"{PENDING}.", suffix=".partial", dir=places.data_dir))
    try:
        manifest = check(archive, work, reference=places.db_path, room=room)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    pending = places.data_dir / PENDING
    shutil.rmtree(pending, ignore_errors=True)  # a restore staged before and not yet applied
    work.rename(pending)  # staged whole, or not at all
    return manifest


def clean_partials(data_dir: Path) -> list[Path]:
    """At start: remove what a check killed half way left (`restore-pending.<random>.partial`); those removed."""
    left = sorted(data_dir.glob(f"{PENDING}*.partial"))
    for path in left:
        log.warning("removing %s, a restore's check cut short by a stop", path)
        shutil.rmtree(path, ignore_errors=True)
    return left


def apply_pending(places: Places) -> str | None:
    """At start, before the database opens: put a staged restore in place, the live state moved aside;
    what was done, or None when nothing was staged. A half-unpacked check's folder is removed first."""
    clean_partials(places.data_dir)
    pending = places.data_dir / PENDING
    if not pending.is_dir():
        return None
    marker = pending / "ASIDE"
    if not marker.is_file():
        marker.write_text(f"before-restore-{stamp()}")
    aside = places.data_dir / marker.read_text().strip()
    aside.mkdir(exist_ok=True)
    db = places.db_path
    moves = [
        (db, aside / db.name, pending / _DB),
        (db.with_name(db.name + "-wal"), aside / (db.name + "-wal"), None),
        (db.with_name(db.name + "-shm"), aside / (db.name + "-shm"), None),
        (places.kb_dir, aside / _DOCS, pending / _DOCS),
        (places.settings_path, aside / places.settings_path.name, pending / _SETTINGS),
        (places.secret, aside / places.secret.name, pending / _SECRET),
    ]
    for live, kept, staged in moves:
        if live.exists() and not kept.exists():
            shutil.move(live, kept)
        if staged is not None and staged.exists():
            live.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(staged, live)
    places.kb_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(pending)
    return f"a backup was restored; the state before it is kept in {aside}"


def prune(folder: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` archives in `folder`; those deleted."""
    archives = sorted(folder.glob(_NAME.format(stamp="*")))
    old = archives[: max(0, len(archives) - keep)]
    for path in old:
        path.unlink()
    return old


class Schedule:
    """A backup into `folder` every `every_h` hours (the first one after `every_h`), the last `keep` kept."""

    def __init__(self, places: Places, folder: Path, *, every_h: float, keep: int) -> None:
        self.places, self.folder, self.every_s, self.keep = places, folder, every_h * 3600, keep
        self.last: str = "none yet"
        self.taken = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="backups", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                made = take(self.places, self.folder)
                prune(self.folder, self.keep)
                self.taken += 1
                self.last = f"{made.name} at {datetime.now(UTC).isoformat(timespec='seconds')}"
            except (OSError, sqlite3.Error) as err:  # a missing USB disk: said on the page, tried again later
                self.last = f"failed at {datetime.now(UTC).isoformat(timespec='seconds')}: {err}"
                log.warning("the scheduled backup into %s failed: %s", self.folder, err)
