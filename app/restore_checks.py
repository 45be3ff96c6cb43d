"""What a restore checks before it unpacks a byte and before it stages anything (issue 47, item 7).

- The manifest is a JSON object of the shape `take` writes (`Manifest`), read from at most `MANIFEST_BYTES`:
  anything else, a deep nesting included, is refused in words, never as a RecursionError.
- Each member is exactly as large as the manifest says, a document no larger than `knowledge.max_file_mb`, and
  the whole fits the data folder's free space with `Room.margin_bytes` to spare: a 3 MB archive can no longer
  unpack a 3 GiB document of zeros.
- The database is Quartet's and not newer than this code: it records sqlite-utils migrations (app/database.py)
  of Quartet's sets only, none this Quartet lacks (the app's own database, which this code migrated at start, is
  the reference), and at the same migrations it has every table the app's own database has.
"""

from __future__ import annotations

import shutil
import sqlite3
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from app.errors import QuartetError

FORMAT, VERSION = "quartet-backup", 1
MANIFEST_BYTES = 1 << 20  # a manifest of 10,000 documents is ~1.3 MB less than this
SETTINGS_BYTES = 1 << 20  # the page's settings file and the browser secret are a few hundred bytes
_MIB = 2**20
_MIGRATIONS = "_sqlite_migrations"  # sqlite_utils.Migrations.migrations_table


class BackupRefused(QuartetError, ValueError):
    """An archive that is not a sound Quartet backup (kind `request`): nothing was replaced."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="request")


class Entry(BaseModel):
    """One file of the archive as the manifest lists it."""

    model_config = ConfigDict(frozen=True)
    path: str
    size: StrictInt = Field(ge=0)
    sha256: str = Field(pattern="^[0-9a-f]{64}$")


class Manifest(BaseModel):
    """`manifest.json`: what the archive holds (unknown keys are ignored)."""

    model_config = ConfigDict(frozen=True)
    format: Literal["quartet-backup"]
    version: StrictInt
    created: str
    files: tuple[Entry, ...]


def _free(folder: Path) -> int:
    return shutil.disk_usage(folder).free


@dataclass(frozen=True)
class Room:
    """What unpacking an archive may take: `max_document_bytes` a document (`knowledge.max_file_mb`), and the
    whole at most the free space of the folder it goes to, less `margin_bytes` (the app keeps writing)."""

    max_document_bytes: int
    free_bytes: Callable[[Path], int] = _free
    margin_bytes: int = 256 * _MIB


def manifest(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Manifest:
    """The archive's manifest, typed; BackupRefused, in words, for anything else."""
    if member.size > MANIFEST_BYTES:
        raise BackupRefused(
            f"this is not a Quartet backup: its manifest.json is {member.size / _MIB:.1f} MiB, and a Quartet "
            f"backup's is under {MANIFEST_BYTES // _MIB} MiB"
        )
    source = tar.extractfile(member)
    data = source.read(MANIFEST_BYTES) if source else b""
    try:
        found = Manifest.model_validate_json(data)
    except ValidationError as err:
        raise BackupRefused(_said(err)) from None
    if found.version > VERSION:
        raise BackupRefused(
            f"this backup was made by a newer Quartet (backup format {found.version}; this Quartet reads "
            f"{VERSION}): update Quartet, then restore it"
        )
    if found.version != VERSION:
        raise BackupRefused(f"this backup has version {found.version}; this Quartet reads {VERSION}")
    return found


def _said(err: ValidationError) -> str:
    """The first thing wrong with a manifest, for people."""
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "json_invalid":
        why = first["msg"].removeprefix("Invalid JSON: ")
        return f"this is not a Quartet backup: its manifest.json is not JSON a Quartet backup writes ({why})"
    if not where:
        return "this is not a Quartet backup: its manifest.json is not a JSON object"
    if any(e["loc"] == ("format",) for e in err.errors()):
        return "this is not a Quartet backup: its manifest is foreign (its format is not quartet-backup)"
    return f"the backup's manifest is not what a Quartet backup writes: {where}: {first['msg']}"


def sizes(members: Sequence[tarfile.TarInfo], listed: dict[str, Entry], room: Room, into: Path) -> None:
    """Each member as large as its manifest entry says, within its kind's bound, and all of them within the
    room `into` has; checked from the archive's headers, before anything is unpacked."""
    for member in members:
        said = listed[member.name].size
        if member.size != said:
            raise BackupRefused(
                f"{member.name} is {member.size:,} bytes in the archive but {said:,} in its manifest: the archive "
                "was altered after it was made"
            )
        bound = room.max_document_bytes if member.name.startswith("documents/") else None
        if member.name.startswith("settings/"):
            bound = SETTINGS_BYTES
        if bound is not None and member.size > bound:
            raise BackupRefused(
                f"{member.name} is {member.size / _MIB:,.1f} MiB, more than a file may be here "
                f"({bound / _MIB:,.1f} MiB; for documents the setting knowledge.max_file_mb)"
            )
    need, free = sum(m.size for m in members), room.free_bytes(into)
    if need + room.margin_bytes > free:
        raise BackupRefused(
            f"the data folder's disk has {free / _MIB:,.0f} MiB free; this backup needs {need / _MIB:,.0f} MiB "
            f"plus {room.margin_bytes / _MIB:,.0f} MiB to spare: free space on that disk, then restore it again"
        )


@dataclass(frozen=True)
class _Schema:
    tables: frozenset[str]
    migrations: frozenset[tuple[str, str]] | None  # (set, name) of each applied; None: no migrations table


def _schema(path: Path, *, whose: str) -> _Schema:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = conn.execute("select name from sqlite_master where type = 'table'").fetchall()
            tables = frozenset(name for (name,) in names)
            if _MIGRATIONS not in tables:
                return _Schema(tables, None)
            done = conn.execute(f"select migration_set, name from {_MIGRATIONS}").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as err:
        raise BackupRefused(f"{whose} database cannot be read: {err}") from None
    return _Schema(tables - {_MIGRATIONS}, frozenset((str(s), str(n)) for s, n in done))


def database(candidate: Path, reference: Path) -> None:
    """Refuse `candidate` unless it is a sound Quartet database no newer than `reference` (the app's own)."""
    _integrity(candidate)
    theirs, ours = _schema(candidate, whose="the backup's"), _schema(reference, whose="this appliance's")
    if not theirs.migrations:
        shown = ", ".join(sorted(theirs.tables)[:8]) or "none"
        raise BackupRefused(
            "the backup's database is not Quartet's: it has no record of Quartet's migrations "
            f"({_MIGRATIONS}); its tables: {shown}"
        )
    assert ours.migrations is not None  # this appliance's own database, migrated by this code at start
    foreign = {s for s, _ in theirs.migrations} - {s for s, _ in ours.migrations}
    if foreign:
        raise BackupRefused(
            f"the backup's database is not Quartet's: it records migrations of another program ({sorted(foreign)})"
        )
    newer = sorted(f"{s}/{n}" for s, n in theirs.migrations - ours.migrations)
    if newer:
        raise BackupRefused(
            f"this backup was made by a newer Quartet: its database has migrations this Quartet does not know "
            f"({', '.join(newer[:5])}): update Quartet, then restore it"
        )
    missing = sorted(ours.tables - theirs.tables)
    if theirs.migrations == ours.migrations and missing:
        raise BackupRefused(f"the backup's database lacks Quartet's tables: {', '.join(missing[:8])}")


def _integrity(db_path: Path) -> None:
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            result = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as err:
        raise BackupRefused(f"the backup's database cannot be opened: {err}") from None
    if result != [("ok",)]:
        raise BackupRefused(f"the backup's database fails its integrity check: {result[:3]}")
