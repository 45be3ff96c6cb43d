"""Conversations in a real SQLite file: saved, listed, resumed after reopening."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlite_utils import Migrations

from app.chat.store import ChatStore
from app.database import Database
from app.downloads import Downloads


def store(path: Path) -> ChatStore:
    return ChatStore(Database(path))


def test_conversation_round_trip_survives_reopening(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    first = store(db)
    cid = first.create("Be brief.", owner="browser:a")
    first.add(cid, "user", "  Where is   the kb folder? It is where documents go, and the app watches it closely ")
    first.add(cid, "assistant", "In kb/.", stats={"generated_tokens": 4, "decode_tps": 50.0})
    again = store(db)
    found = again.get(cid)
    assert found is not None and found.system_prompt == "Be brief."
    assert found.title.startswith("Where is the kb folder?") and len(found.title) <= 60
    messages = again.messages(cid)
    assert [(m.role, m.content) for m in messages][1] == ("assistant", "In kb/.")
    assert messages[1].stats == {"generated_tokens": 4, "decode_tps": 50.0}
    assert [c.id for c in again.recent("browser:a")] == [cid]


def test_database_is_wal_with_a_busy_timeout(tmp_path: Path) -> None:
    database = Database(tmp_path / "q.db")
    with database.atomic() as writer, database.read() as reader:
        for db in (writer, reader):
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000


def test_migrations_run_once(tmp_path: Path) -> None:
    db = Database(tmp_path / "q.db")
    calls = []
    steps = Migrations("x")
    steps(name="001")(lambda d: calls.append(1))
    steps(name="002")(lambda d: calls.append(2))
    assert db.migrate(steps) == ["001", "002"]
    assert db.migrate(steps) == []
    steps(name="003")(lambda d: calls.append(3))
    assert db.migrate(steps) == ["003"]
    assert calls == [1, 2, 3]


def test_regenerate_sets_aside_only_the_trailing_answer_and_keeps_it_as_a_version(tmp_path: Path) -> None:
    s = store(tmp_path / "q.db")
    cid = s.create("", owner="browser:a")
    for role, text in [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]:
        s.add(cid, role, text)
    s.retire_last_answer(cid)
    assert [m.content for m in s.messages(cid)] == ["a", "b", "c"]
    again = s.add(cid, "assistant", "d2")
    ids, shown = s.versions(cid)
    assert len(ids) == 2 and shown == again
    s.choose(cid, ids[0])  # back to the first answer: it is what the conversation shows and sends
    assert [m.content for m in s.messages(cid)] == ["a", "b", "c", "d"]
    assert s.versions(cid) == (ids, ids[0])
    with pytest.raises(KeyError):
        s.choose(cid, 12345)


def test_editing_a_question_sets_it_and_what_followed_aside(tmp_path: Path) -> None:
    s = store(tmp_path / "q.db")
    cid = s.create("", owner="browser:a")
    ids = [
        s.add(cid, role, text) for role, text in [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]
    ]
    s.retire_from(cid, ids[2])
    s.add(cid, "user", "c, said better")
    assert [m.content for m in s.messages(cid)] == ["a", "b", "c, said better"]
    assert len(s.messages(cid, everything=True)) == 5  # nothing is lost
    assert s.versions(cid) == ([], None)


def test_writers_in_many_threads_lose_nothing(tmp_path: Path) -> None:
    s = store(tmp_path / "q.db")
    cid = s.create("", owner="browser:a")

    def write(n: int) -> None:
        for i in range(50):
            s.add(cid, "user", f"{n}-{i}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(s.messages(cid)) == 200
    raw = sqlite3.connect(tmp_path / "q.db")
    assert raw.execute("select count(*) from messages").fetchone()[0] == 200


def test_conversations_belong_to_their_owner(tmp_path: Path) -> None:
    """A real store behind the chat service (no engine is needed to list, open, rename, delete or export)."""
    import json

    from app.chat.service import ChatService, ConversationNotFound

    chat = ChatService(
        store(tmp_path / "q.db"),
        None,  # type: ignore[arg-type]
        max_tokens=8,
        temperature=0,
        system_prompt="Be kind.",
        downloads=Downloads(tmp_path / "downloads"),
    )
    mine = chat.open(None, owner="browser:a")
    chat.store.add(mine, "user", "Our **budget** for 2027")
    chat.store.add(mine, "assistant", "It is 42 k€.", stats={"generated_tokens": 5})
    theirs = chat.open(None, owner="browser:b", system_prompt="")
    assert [c.id for c in chat.recent("browser:a")] == [mine]
    assert [c.id for c in chat.recent("browser:b")] == [theirs]
    for action in (
        lambda: chat.history(mine, owner="browser:b"),
        lambda: chat.delete(mine, owner="browser:b"),
        lambda: chat.rename(mine, "x", owner="browser:b"),
        lambda: chat.open(mine, owner="api"),
        lambda: chat.export(mine, owner="user:eve", as_json=True),
        lambda: chat.offer_export(mine, owner="user:eve", as_json=True, name="x.json"),
    ):
        with pytest.raises(ConversationNotFound, match="There is no conversation"):
            action()
    assert chat.conversation(mine, owner="browser:a").title == "Our budget for 2027"  # no Markdown in titles
    assert [c.id for c in chat.recent("browser:a", query="42 k€")] == [mine]  # found by what was said
    assert chat.recent("browser:a", query="100%") == []  # LIKE wildcards are text here
    chat.rename(mine, "  Budget   2027 ", owner="browser:a")
    exported = json.loads(chat.export(mine, owner="browser:a", as_json=True))
    assert exported["title"] == "Budget 2027" and exported["system_prompt"] == "Be kind."
    assert [m["content"] for m in exported["messages"]] == ["Our **budget** for 2027", "It is 42 k€."]
    assert "**Quartet:**" in chat.export(mine, owner="browser:a", as_json=False)
    offer = chat.offer_export(mine, owner="browser:a", as_json=False, name="Budget-2027.md")
    assert offer.url.startswith("/downloads/") and offer.name == "Budget-2027.md"  # the owner's, offered once
    chat.delete(mine, owner="browser:a")
    assert chat.recent("browser:a") == [] and chat.store.messages(mine) == []


def test_conversations_from_before_owners_are_listed_to_no_one(tmp_path: Path) -> None:
    db = Database(tmp_path / "q.db")
    from app.chat.store import MIGRATIONS

    assert db.migrate(MIGRATIONS, stop_before="002_owner") == ["001_conversations"]
    with db.atomic() as writer:
        writer.table("conversations").insert(
            {"id": "old", "title": "t", "system_prompt": "", "created_at": "x", "updated_at": "x"}
        )
    upgraded = ChatStore(db)
    assert upgraded.get("old") is not None and upgraded.get("old").owner == ""  # type: ignore[union-attr]
    assert upgraded.recent("browser:a") == [] and upgraded.recent("api") == []


def test_each_regenerated_answer_says_which_version_it_is_after_a_follow_up(tmp_path: Path) -> None:
    """Issue 22, item 11: only the last question's answers had versions, so "answer 2 of 2" vanished when
    the conversation went on."""
    store = ChatStore(Database(tmp_path / "q.db"))
    cid = store.create("", owner="browser:a")
    store.add(cid, "user", "colour?")
    store.add(cid, "assistant", "red")
    store.retire_last_answer(cid)
    second = store.add(cid, "assistant", "blue")
    assert store.answer_versions(cid) == {second: (2, 2)}
    store.add(cid, "user", "fruit?")
    store.add(cid, "assistant", "apple")
    assert store.answer_versions(cid) == {second: (2, 2)}  # kept after the follow-up
    first = next(m.id for m in store.messages(cid, everything=True) if m.content == "red")
    store.retire_from(cid, first)  # an edit of the first question sets all that aside
    assert store.answer_versions(cid) == {}
