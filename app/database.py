"""Opening Quartet's SQLite file: WAL, a busy timeout, and append-only migrations.

Each store (chat, knowledge…) declares its own list of migrations; a migration that has run is
recorded by name and never runs again. Never edit a released migration: append a new one.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import sqlite_utils

Migration = tuple[str, Callable[[sqlite_utils.Database], None]]
_BUSY_TIMEOUT_MS = 10_000


def open_database(path: Path) -> sqlite_utils.Database:
    """One connection to `path`, safe to share between threads that hold `lock_for(db)`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=_BUSY_TIMEOUT_MS / 1000)
    db = sqlite_utils.Database(conn)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def migrate(db: sqlite_utils.Database, scope: str, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations of `scope` that have not run yet, each in its own transaction."""
    table = db.table("_migrations")
    if not table.exists():
        db.create_table("_migrations", {"scope": str, "name": str, "applied_at": str}, pk=("scope", "name"))
    done = {row["name"] for row in db.table("_migrations").rows_where("scope = ?", [scope])}
    applied = []
    for name, apply in migrations:
        if name in done:
            continue
        with db.conn:
            apply(db)
            db.table("_migrations").insert({"scope": scope, "name": name, "applied_at": now()})
        applied.append(name)
    return applied


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Locked:
    """A database plus the lock every user of the shared connection takes."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db
        self.lock = threading.RLock()
