"""What is a person's is owned by their stable id, never their name (issue 47, item 6), on a real SQLite file:
a new person given a removed person's name starts with nothing; a renamed one keeps what is theirs; a key
vouched for its owner is theirs the same way; a database from before the ids keeps every owner's rows theirs."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import gradio as gr

from app.chat.store import ChatStore
from app.database import Database, now
from app.extraction.store import ExtractionStore
from app.guards import OWNER_HEADER
from app.knowledge.store import KnowledgeStore
from app.knowledge.uploaders import Uploaders
from app.people import MIGRATIONS
from app.ui.callers import Owners
from tests.test_people import ADMIN_PW, Box


def logged_in(name: str) -> gr.Request:
    """A page request of this login (what Gradio hands a handler once its page login succeeded)."""
    return gr.Request(username=name, session_hash=f"{name}-page")


def test_a_new_person_given_a_removed_persons_name_sees_none_of_their_chats(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    chats, owners = ChatStore(box.database), Owners(box.people.owner_of_login)
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "erin", "erin-pw-1234", "user", where="test")
    old = owners.page_owner(logged_in("erin"), None)
    private = chats.create("", owner=old)
    assert [c.id for c in chats.recent(owners.page_owner(logged_in("erin"), None))] == [private]

    said = box.people.remove_person(token, "erin", where="test")
    assert "no one's" in said and "not by a new person named erin" in said
    box.people.add_person(token, "erin", "new-erin-pw-1", "user", where="test")
    new = owners.page_owner(logged_in("erin"), None)
    assert new != old and new.startswith("person:")
    assert chats.recent(new) == []  # the old erin's private chat is not hers
    kept = chats.get(private)
    assert kept is not None and kept.owner == old  # kept, owned by an id no one has again
    key = box.people.create_own_key("erin", "her agent", where="test")  # a named-endpoint caller with her key
    vouched = gr.Request(headers={OWNER_HEADER: quote(box.people.key_owner(key.secret) or "")})
    assert owners.owner_of(vouched) == new
    assert [k.name for k in box.people.own_keys("erin")] == ["her agent"]  # not the old erin's keys either


def test_a_renamed_person_keeps_their_rows_by_their_id(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    chats, owners = ChatStore(box.database), Owners(box.people.owner_of_login)
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "erin", "erin-pw-1234", "user", where="test")
    mine = chats.create("", owner=owners.page_owner(logged_in("erin"), None))
    box.people.rename(token, "erin", "erina", where="test")
    assert [c.id for c in chats.recent(owners.page_owner(logged_in("erina"), None))] == [mine]
    box.people.add_person(token, "erin", "another-pw-1", "user", where="test")  # the freed name, to another
    assert chats.recent(owners.page_owner(logged_in("erin"), None)) == []
    assert owners.page_owner(logged_in("carol"), None) == "user:carol"  # a login of the settings file: its name


def test_the_migration_keeps_every_owners_rows_theirs(tmp_path: Path) -> None:
    """A database as it was before the ids (people at 002): alice, made on the admin page, owns a chat, a run
    and an upload as `user:alice`; carol (the settings file's) and a browser own theirs. After the start
    that migrates it, each still sees exactly their own; alice's are her id's."""
    old = Database(tmp_path / "q.db")
    old.migrate(MIGRATIONS, stop_before="003_stable_ids")
    with old.atomic() as db:
        at = now()
        db.table("people").insert(
            {"name": "alice", "password_hash": "x", "role": "user", "created_at": at, "changed_at": at}
        )
    chats, runs = ChatStore(old), ExtractionStore(old)
    KnowledgeStore(old, model="test")
    hers, carols, browsers = (chats.create("", owner=o) for o in ("user:alice", "user:carol", "browser:b"))
    run = runs.create_run(template="t", schema={"type": "object"}, title="T", documents_total=1, owner="user:alice")
    Uploaders(old).note("kb/alice.txt", "user:alice")
    old.close()

    box = Box(tmp_path / "q.db")  # the next start: the people's migrations run first, as in app/__main__.py
    owners = Owners(box.people.owner_of_login)
    alice = owners.page_owner(logged_in("alice"), None)
    person = box.store.person("alice")
    assert person is not None and alice == f"person:{person.id}"
    chats = ChatStore(box.database)
    assert [c.id for c in chats.recent(alice)] == [hers]
    assert [c.id for c in chats.recent(owners.page_owner(logged_in("carol"), None))] == [carols]
    assert [c.id for c in chats.recent("browser:b")] == [browsers]
    assert chats.recent("user:alice") == []  # her old name owns nothing now
    assert [r.id for r in ExtractionStore(box.database).runs(owner=alice)] == [run]
    assert Uploaders(box.database).owner("kb/alice.txt") == alice
