"""Hostile restores, in process (issue 47, item 7): a foreign SQLite file, a newer Quartet's database, a member
larger than its manifest says, a document over `knowledge.max_file_mb`, more than the free space, a deep or
misshapen manifest — each refused in words, leaving no partial unpacking; a partial left by a kill removed at
start. Real archives (`backup.take` of a real database migrated by the stores' own migrations), real SQLite."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app import backup
from app.admin import MIGRATIONS as ADMIN
from app.chat.store import MIGRATIONS as CHAT
from app.database import Database
from app.extraction.store import MIGRATIONS as EXTRACTION
from app.knowledge.migrations import MIGRATIONS as KNOWLEDGE
from app.people import MIGRATIONS as PEOPLE

ROOMY = backup.Room(max_document_bytes=50 * 2**20, free_bytes=lambda _folder: 2**40)


def places(root: Path) -> backup.Places:
    return backup.Places(root / "var", root / "var" / "quartet.db", root / "kb", root / "var" / "admin-settings.toml")


def quartet_database(path: Path) -> Database:
    """A database as this Quartet makes it: every store's migrations applied."""
    database = Database(path)
    for migrations in (CHAT, ADMIN, PEOPLE, KNOWLEDGE, EXTRACTION):
        database.migrate(migrations)
    return database


def appliance_state(root: Path, *, quartet: bool = True) -> backup.Places:
    """A data folder whose database is Quartet's or, if not `quartet`, some other program's SQLite file; one
    document."""
    where = places(root)
    database = quartet_database(where.db_path) if quartet else Database(where.db_path)
    with database.atomic() as db:
        db.table("notes").insert({"text": "someone else's" if not quartet else "ours"})
    database.close()
    where.kb_dir.mkdir(parents=True, exist_ok=True)
    (where.kb_dir / "policy.txt").write_text("Holidays: 25 days.")
    return where


@pytest.fixture
def live(tmp_path: Path) -> backup.Places:
    """This appliance: its own database, migrated by this code."""
    return appliance_state(tmp_path / "box")


def archive_of(
    tmp_path: Path, *, quartet: bool = True, change: Callable[[sqlite3.Connection], object] | None = None
) -> Path:
    source = appliance_state(tmp_path / "old-box", quartet=quartet)
    if change is not None:
        conn = sqlite3.connect(source.db_path)
        with conn:
            change(conn)
        conn.close()
    return backup.take(source, tmp_path / "usb")


def repacked(
    source: Path, target: Path, *, add: dict[str, tuple[bytes, int]] | None = None, manifest: bytes | None = None
) -> Path:
    """A copy of the archive `source` with files added (name → (bytes, the size its manifest entry says)) or its
    manifest replaced whole."""
    with tarfile.open(source) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    listed: dict[str, Any] = json.loads(files.pop("manifest.json"))
    for name, (data, said) in (add or {}).items():
        files[name] = data
        listed["files"].append({"path": name, "size": said, "sha256": hashlib.sha256(data).hexdigest()})
    with tarfile.open(target, "w:gz") as out:
        for name, data in {"manifest.json": manifest or json.dumps(listed).encode(), **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    return target


def refused(archive: Path, live: backup.Places, match: str, room: backup.Room = ROOMY) -> None:
    """`archive` refused with words that match, nothing staged and no partial unpacking left."""
    with pytest.raises(backup.BackupRefused, match=match):
        backup.stage(archive, live, room)
    assert not list(live.data_dir.glob(f"{backup.PENDING}*")), list(live.data_dir.iterdir())


def test_a_sound_backup_is_staged(live: backup.Places, tmp_path: Path) -> None:
    manifest = backup.stage(archive_of(tmp_path), live, ROOMY)
    assert {f.path for f in manifest.files} == {"database/quartet.db", "documents/policy.txt"}
    assert (live.data_dir / backup.PENDING / "database" / "quartet.db").is_file()


def test_a_foreign_sqlite_file_is_refused(live: backup.Places, tmp_path: Path) -> None:
    """Before, any SQLite file passed the check, and the appliance came up empty at the next start."""
    refused(archive_of(tmp_path, quartet=False), live, r"database is not Quartet's: .*_sqlite_migrations.*notes")


def test_another_programs_migrations_are_refused(live: backup.Places, tmp_path: Path) -> None:
    def theirs(conn: sqlite3.Connection) -> None:
        conn.execute("delete from _sqlite_migrations")
        conn.execute("insert into _sqlite_migrations (migration_set, name) values ('wiki', '001_pages')")

    refused(archive_of(tmp_path, change=theirs), live, r"not Quartet's: it records migrations of another program")


def test_a_newer_quartets_database_is_refused(live: backup.Places, tmp_path: Path) -> None:
    def newer(conn: sqlite3.Connection) -> None:
        conn.execute("insert into _sqlite_migrations (migration_set, name) values ('chat', '999_from_the_future')")

    refused(archive_of(tmp_path, change=newer), live, r"made by a newer Quartet: .*chat/999_from_the_future")


def test_quartets_tables_are_required(live: backup.Places, tmp_path: Path) -> None:
    refused(
        archive_of(tmp_path, change=lambda conn: conn.execute("drop table messages")),
        live,
        r"lacks Quartet's tables: messages",
    )


def test_a_member_larger_than_its_manifest_entry_is_refused(live: backup.Places, tmp_path: Path) -> None:
    """The bomb: a 3 MB archive unpacked a 3 GiB document of zeros; here 1 MiB of zeros said to be 4 bytes."""
    bomb = repacked(archive_of(tmp_path), tmp_path / "bomb.tar.gz", add={"documents/zeros.txt": (bytes(2**20), 4)})
    refused(bomb, live, r"documents/zeros\.txt is 1,048,576 bytes in the archive but 4 in its manifest")


def test_a_document_over_max_file_mb_is_refused(live: backup.Places, tmp_path: Path) -> None:
    big = repacked(archive_of(tmp_path), tmp_path / "big.tar.gz", add={"documents/big.txt": (bytes(3000), 3000)})
    room = backup.Room(max_document_bytes=2000, free_bytes=lambda _folder: 2**40)
    refused(big, live, r"documents/big\.txt is 0\.0 MiB, more than a file may be here .*knowledge\.max_file_mb", room)


def test_more_than_the_free_space_is_refused_before_anything_is_unpacked(live: backup.Places, tmp_path: Path) -> None:
    asked: list[list[Path]] = []

    def free(folder: Path) -> int:
        asked.append(list(folder.iterdir()))  # what had been unpacked when the room was measured
        return 100 * 2**20

    refused(
        archive_of(tmp_path),
        live,
        r"has 100 MiB free; this backup needs 0 MiB plus 256 MiB to spare",
        backup.Room(2**20, free),
    )
    assert asked == [[]]


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        (b"[" * 100_000, r"manifest\.json is not JSON a Quartet backup writes \(recursion limit exceeded"),
        (b"[" * 2_000_000, r"its manifest\.json is 1\.9 MiB, and a Quartet backup's is under 1 MiB"),
        (b'{"format": "quartet-backup", "files": ' + b"[" * 5000 + b"]" * 5000 + b"}", r"recursion limit exceeded"),
        (b"[1, 2]", r"its manifest\.json is not a JSON object"),
        (b'{"format": "other", "version": 1}', r"its manifest is foreign"),
        (b'{"format": "quartet-backup", "version": 2, "created": "x", "files": []}', r"made by a newer Quartet"),
        (
            b'{"format": "quartet-backup", "version": 1, "created": "x", "files": [{"path": "database/quartet.db"}]}',
            r"manifest is not what a Quartet backup writes: files\.0\.size: Field required",
        ),
    ],
)
def test_a_misshapen_manifest_is_refused_in_words(
    live: backup.Places, tmp_path: Path, manifest: bytes, said: str
) -> None:
    """A manifest of 2,000,000 `[` said "Something went wrong (RecursionError …)"."""
    refused(repacked(archive_of(tmp_path), tmp_path / "odd.tar.gz", manifest=manifest), live, said)


def test_a_partial_unpacking_left_by_a_kill_is_removed_at_start(live: backup.Places) -> None:
    """kill -9 during an unpacking left 820 MB of restore-pending.partial until the next restore."""
    left = live.data_dir / f"{backup.PENDING}.k1ll3d.partial"
    (left / "documents").mkdir(parents=True)
    (left / "documents" / "zeros.txt").write_bytes(bytes(4096))
    assert backup.apply_pending(live) is None  # nothing staged: nothing restored
    assert not left.exists()
    assert live.db_path.is_file()  # the live state untouched
