"""Quartet's SQLite file as one object: a read connection per thread, one writer, one transaction idiom.

    with database.read() as db:    # this thread's own connection, query-only, one consistent snapshot
        rows = db.execute(...)
    with database.atomic() as db:  # the one writer: BEGIN IMMEDIATE ... COMMIT, or all rolled back
        db.table(...).insert(...)

Readers never wait for a writer (WAL: a reader sees the last commit while a write runs) and never
block one; writers take turns on the single write connection (an in-process lock, then SQLite's own
lock with a busy timeout for other processes on the same file). A nested `atomic()` is a savepoint,
and a `read()` inside `atomic()` reads through the writer, so it sees the transaction's own rows.

Each store declares its tables as a `sqlite_utils.Migrations` set and applies it with `migrate`; a
migration that has run is recorded (in `_sqlite_migrations`) and never runs again. Never edit a
released migration: append a new one. Files made before Migrations (a `_migrations` table) are
carried over once, by `_bridge_old_migrations`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import sqlite_utils

from app.errors import QuartetError

_BUSY_TIMEOUT_MS = 10_000
_OLD_MIGRATIONS = "_migrations"  # (scope, name, applied_at): what recorded migrations until sqlite-utils did


class DiskFull(QuartetError, OSError):
    """A write refused because the data folder's disk has no room left (SQLite's SQLITE_FULL); nothing of
    it was written (its transaction is rolled back), and what was stored before is intact."""

    def __init__(self, folder: Path) -> None:
        super().__init__(
            f"the data disk is full: {folder} has no room for what had to be saved, so it was not saved. Free "
            "space on that disk (remove old backups or large documents, or move the data folder) and try again",
            kind="disk_full",
        )


class Database:
    """One SQLite file: per-thread read connections and a single write connection."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # each thread's reader, held here (not in a threading.local) so that close() reaches them all;
        # a thread that has ended has its reader closed when the next thread opens one
        self._readers: dict[int, tuple[threading.Thread, sqlite_utils.Database]] = {}
        self._readers_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._writer_thread: int | None = None
        self._after_commit: list[Callable[[], None]] = []
        self._writer = self._connect(write=True)

    def _connect(self, *, write: bool) -> sqlite_utils.Database:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=_BUSY_TIMEOUT_MS / 1000)
        db = sqlite_utils.Database(conn)
        db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        if write:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA synchronous=NORMAL")
        else:
            db.execute("PRAGMA query_only=ON")  # a write through a reader is a bug: make it fail loudly
        return db

    @contextmanager
    def read(self) -> Iterator[sqlite_utils.Database]:
        """This thread's read connection, inside one read transaction (every query sees the same
        snapshot). Inside `atomic()` on the same thread: the writer, so the transaction's own rows show."""
        if self._writer_thread == threading.get_ident():
            yield self._writer
            return
        db = self._reader()
        if db.conn.in_transaction:  # a read() inside a read()
            yield db
            return
        db.conn.execute("BEGIN")
        try:
            yield db
        finally:
            db.conn.execute("COMMIT")

    def _reader(self) -> sqlite_utils.Database:
        """This thread's read connection, opened on first use; readers of ended threads are closed."""
        me = threading.current_thread()
        with self._readers_lock:
            held = self._readers.get(me.ident or 0)
            if held is not None and held[0] is me:
                return held[1]
            for ident, (thread, db) in list(self._readers.items()):
                if not thread.is_alive():
                    db.close()
                    del self._readers[ident]
            db = self._connect(write=False)
            self._readers[me.ident or 0] = (me, db)
            return db

    @contextmanager
    def atomic(self) -> Iterator[sqlite_utils.Database]:
        """The writer, in a transaction: everything inside commits together, or (on any exception,
        or a crash) none of it does. Nested calls on the same thread are savepoints."""
        with self._write_lock:
            if self._writer.conn.in_transaction:
                with self._writer.atomic():
                    yield self._writer
                return
            self._writer_thread = threading.get_ident()
            try:
                with self._named_full():
                    self._writer.conn.execute("BEGIN IMMEDIATE")
                    try:
                        yield self._writer
                        self._writer.conn.commit()  # a commit that fails (a full disk) is rolled back too
                    except BaseException:
                        self._writer.conn.rollback()
                        raise
                for then in self._after_commit:
                    then()
            finally:
                self._after_commit.clear()
                self._writer_thread = None

    @contextmanager
    def _named_full(self) -> Iterator[None]:
        """SQLite's "database or disk is full" (SQLITE_FULL) as `DiskFull`, which names the folder."""
        try:
            yield
        except sqlite3.OperationalError as err:
            if getattr(err, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise DiskFull(self.path.parent) from err
            raise

    def after_commit(self, then: Callable[[], None]) -> None:
        """Inside `atomic()`: run `then` once the outermost transaction has committed (not at all if it
        rolls back), still the writer's turn, so in-memory copies change in the order the rows did."""
        if self._writer_thread != threading.get_ident():
            raise RuntimeError("after_commit() belongs inside `with database.atomic():`")
        self._after_commit.append(then)

    def migrate(self, migrations: sqlite_utils.Migrations, *, stop_before: str | None = None) -> list[str]:
        """Apply the migrations of the set that have not run yet, each in its own transaction; the
        names of those it applied."""
        with self._write_lock:
            self._writer_thread = threading.get_ident()
            try:
                _bridge_old_migrations(self._writer)
                pending = [m.name for m in migrations.pending(self._writer)]
                migrations.apply(self._writer, stop_before=stop_before)
                done = {m.name for m in migrations.applied(self._writer)}
            finally:
                self._writer_thread = None
        return [name for name in pending if name in done]

    def close(self) -> None:
        """Close the writer and every thread's reader (a closed database is not used again)."""
        with self._write_lock, self._readers_lock:
            for _thread, db in self._readers.values():
                db.close()
            self._readers.clear()
            self._writer.close()


def _bridge_old_migrations(db: sqlite_utils.Database) -> None:
    """Once per file: record what the old `_migrations` table says has run as applied in sqlite-utils'
    `_sqlite_migrations` (same set and migration names), then drop the old table."""
    if not db.table(_OLD_MIGRATIONS).exists():
        return
    rows: Iterable[dict[str, str]] = db.table(_OLD_MIGRATIONS).rows_where(order_by="applied_at, rowid")
    with db.atomic():
        sqlite_utils.Migrations("bridge").ensure_migrations_table(db)
        db.table(sqlite_utils.Migrations.migrations_table).insert_all(
            ({"migration_set": r["scope"], "name": r["name"], "applied_at": r["applied_at"]} for r in list(rows)),
            ignore=True,
        )
        db.table(_OLD_MIGRATIONS).drop()


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
