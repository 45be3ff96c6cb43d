"""Who uploaded each file of the library (table `uploaders`, app/knowledge/migrations.py): only they, or
the admin, may delete its document. A file put into kb/ by other means has no uploader. The row goes with
its document (`KnowledgeStore.delete`)."""

from __future__ import annotations

from app.database import Database


class Uploaders:
    def __init__(self, database: Database) -> None:
        self._database = database  # the knowledge store has migrated it

    def note(self, path: str, owner: str) -> None:
        """`owner` uploaded the file at `path` (an upload that replaces a file takes it over)."""
        with self._database.atomic() as db:
            db.table("uploaders").upsert({"path": path, "owner": owner}, pk="path")

    def owner(self, path: str) -> str | None:
        """Who uploaded the file at `path`; None when it came into kb/ otherwise."""
        with self._database.read() as db:
            rows = list(db.execute("SELECT owner FROM uploaders WHERE path = ?", [path]))
        return str(rows[0][0]) if rows else None
