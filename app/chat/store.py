"""Conversations and their messages in SQLite: a restart of the app loses none."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from app.database import Database, now
from app.valid_text import valid_text

_TITLE_CHARS = 60


MIGRATIONS = sqlite_utils.Migrations("chat")


@MIGRATIONS(name="001_conversations")
def _m001_conversations(db: sqlite_utils.Database) -> None:
    db.table("conversations").create(
        {"id": str, "title": str, "system_prompt": str, "created_at": str, "updated_at": str}, pk="id"
    )
    db.table("messages").create(
        {
            "id": int,
            "conversation_id": str,
            "role": str,
            "content": str,
            "status": str,  # ok | stopped | error | streaming (being written) | interrupted (the app stopped)
            "stats": str,  # JSON of the engine's stats, for answers
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("conversation_id", "conversations", "id")],
    )
    db.table("messages").create_index(["conversation_id", "id"])
    db.table("conversations").create_index(["updated_at"])


@MIGRATIONS(name="002_owner")
def _m002_owner(db: sqlite_utils.Database) -> None:
    # who a conversation belongs to: "user:<login>" or "browser:<random id>" (a person made on the admin page:
    # "person:<id>" since people's 003_stable_ids). Conversations from before
    # owners existed get "" and are listed to no one.
    db.table("conversations").add_column("owner", str, not_null_default="")
    db.table("conversations").create_index(["owner", "updated_at"])


@MIGRATIONS(name="003_active")
def _m003_active(db: sqlite_utils.Database) -> None:
    # a regenerated answer, or the turns after an edited question, stay in the table inactive: the
    # conversation shows (and sends the model) only active messages, and older answers stay choosable
    db.table("messages").add_column("active", int, not_null_default=1)


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: str
    content: str
    status: str
    stats: dict[str, Any] | None


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    system_prompt: str
    updated_at: str
    owner: str


class ChatStore:
    def __init__(self, database: Database) -> None:
        self._database = database
        database.migrate(MIGRATIONS)

    def mark_interrupted(self) -> int:
        """At start: answers that were still being written when the app stopped keep their text, marked
        interrupted. The number of such answers."""
        with self._database.atomic() as db:
            cursor = db.execute("UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'")
            return int(cursor.rowcount)

    def create(self, system_prompt: str, *, owner: str) -> str:
        cid = uuid.uuid4().hex
        stamp = now()
        with self._database.atomic() as db:
            row = {"id": cid, "title": "New chat", "system_prompt": valid_text(system_prompt), "owner": owner}
            db.table("conversations").insert({**row, "created_at": stamp, "updated_at": stamp})
        return cid

    def get(self, cid: str) -> Conversation | None:
        with self._database.read() as db:
            rows = list(db.table("conversations").rows_where("id = ?", [cid]))
        return _conversation(rows[0]) if rows else None

    def recent(self, owner: str, *, query: str = "", limit: int = 200) -> list[Conversation]:
        """`owner`'s conversations, newest first; with `query`, those whose title or messages contain it."""
        where, args, query = "owner = ?", [owner], valid_text(query)
        if query.strip():
            pattern = "%" + query.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where += (
                " AND (title LIKE ? ESCAPE '\\' OR id IN (SELECT conversation_id FROM messages"
                " WHERE content LIKE ? ESCAPE '\\'))"
            )
            args += [pattern, pattern]
        with self._database.read() as db:
            rows = db.table("conversations").rows_where(where, args, order_by="updated_at desc", limit=limit)
            return [_conversation(row) for row in rows]

    def rename(self, cid: str, title: str) -> None:
        with self._database.atomic() as db:
            db.table("conversations").update(cid, {"title": _title(valid_text(title))})

    def delete(self, cid: str) -> None:
        with self._database.atomic() as db:
            db.execute("DELETE FROM messages WHERE conversation_id = ?", [cid])
            db.table("conversations").delete(cid)

    def messages(self, cid: str, *, everything: bool = False) -> list[StoredMessage]:
        """The conversation's active messages, oldest first (with `everything`, the inactive ones too)."""
        where = "conversation_id = ?" + ("" if everything else " AND active = 1")
        with self._database.read() as db:
            rows = list(db.table("messages").rows_where(where, [cid], order_by="id"))
        return [
            StoredMessage(r["id"], r["role"], r["content"], r["status"], json.loads(r["stats"]) if r["stats"] else None)
            for r in rows
        ]

    def versions(self, cid: str) -> tuple[list[int], int | None]:
        """The answers given to the last active question, oldest first, and the one shown (None: none)."""
        everything = self._rows_after_last_question(cid)
        answers = [r for r in everything if r["role"] == "assistant"]
        active = next((r["id"] for r in answers if r["active"]), None)
        return [r["id"] for r in answers], active

    def answer_versions(self, cid: str) -> dict[int, tuple[int, int]]:
        """Each shown answer that has other versions (answers to the same question): which it is of how many."""
        with self._database.read() as db:
            rows = list(
                db.execute("SELECT id, role, active FROM messages WHERE conversation_id = ? ORDER BY id", [cid])
            )
        found: dict[int, tuple[int, int]] = {}
        answers: list[tuple[int, int]] = []
        for message_id, role, active in [*rows, (None, "user", 0)]:
            if role == "user":
                shown = [i for i, (answer, on) in enumerate(answers) if on]
                if len(answers) > 1 and shown:
                    found[answers[shown[0]][0]] = (shown[0] + 1, len(answers))
                answers = []
            elif role == "assistant":
                answers.append((message_id, active))
        return found

    def choose(self, cid: str, message_id: int) -> None:
        """Show (and send the model) this version of the last answer instead of the others."""
        with self._database.atomic() as db:
            ids, _ = self.versions(cid)
            if message_id not in ids:
                raise KeyError(message_id)
            db.execute(
                f"UPDATE messages SET active = (id = ?) WHERE id IN ({','.join('?' * len(ids))})", [message_id, *ids]
            )

    def retire_from(self, cid: str, message_id: int) -> None:
        """Hide this message and everything after it (a question being edited and what followed)."""
        with self._database.atomic() as db:
            db.execute("UPDATE messages SET active = 0 WHERE conversation_id = ? AND id >= ?", [cid, message_id])

    def _rows_after_last_question(self, cid: str) -> list[dict[str, Any]]:
        with self._database.read() as db:
            last = db.execute(
                "SELECT max(id) FROM messages WHERE conversation_id = ? AND role = 'user' AND active = 1", [cid]
            ).fetchone()[0]
            if last is None:
                return []
            return list(db.table("messages").rows_where("conversation_id = ? AND id > ?", [cid, last], order_by="id"))

    def add(self, cid: str, role: str, content: str, *, status: str = "ok", stats: dict[str, Any] | None = None) -> int:
        stamp, content = now(), valid_text(content)  # the front doors made it valid; SQLite must never meet a surrogate
        with self._database.atomic() as db:
            conv = db.table("conversations")
            row = {
                "conversation_id": cid,
                "role": role,
                "content": content,
                "status": status,
                "stats": json.dumps(stats) if stats else None,
                "created_at": stamp,
            }
            message_id = db.table("messages").insert(row).last_pk
            changes: dict[str, Any] = {"updated_at": stamp}
            if role == "user" and conv.get(cid)["title"] == "New chat":
                changes["title"] = _title(content)
            conv.update(cid, changes)
        return int(message_id or 0)

    def update(self, message_id: int, content: str, *, status: str, stats: dict[str, Any] | None = None) -> None:
        """Rewrite a message's text and status (an answer saved while it streams, then at its end)."""
        with self._database.atomic() as db:
            changes: dict[str, Any] = {"content": valid_text(content), "status": status}
            if stats is not None:
                changes["stats"] = json.dumps(stats)
            db.table("messages").update(message_id, changes)

    def retire_last_answer(self, cid: str) -> None:
        """Hide the trailing answers (kept as earlier versions), so the last question can be answered again."""
        with self._database.atomic() as db:
            ids, _ = self.versions(cid)
            if ids:
                db.execute(f"UPDATE messages SET active = 0 WHERE id IN ({','.join('?' * len(ids))})", ids)

    def set_system_prompt(self, cid: str, text: str) -> None:
        with self._database.atomic() as db:
            db.table("conversations").update(cid, {"system_prompt": valid_text(text)})


def _conversation(row: dict[str, Any]) -> Conversation:
    return Conversation(row["id"], row["title"], row["system_prompt"], row["updated_at"], row["owner"])


_MARKUP = re.compile(r"[*_`#>~]+|!?\[([^\]]*)\]\([^)]*\)|<[^>]*>")


def _title(text: str) -> str:
    """A one-line title from a message: Markdown and tags dropped, at most 60 characters."""
    plain = _MARKUP.sub(lambda m: m.group(1) or " ", text)
    line = re.sub(r"\s+([,.;:!?)])", r"\1", " ".join(plain.split())) or "New chat"  # "bold ," was left
    return line if len(line) <= _TITLE_CHARS else line[: _TITLE_CHARS - 1] + "…"
