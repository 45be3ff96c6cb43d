"""A person's life on the admin page, on a real SQLite file: disabled (refused at once, nothing deleted)
and enabled, renamed (what is theirs stays theirs), a reset password used once to set a new one, their
sessions ended by the admin, and the configured admin password upgraded in place to a person `admin`."""

from __future__ import annotations

from pathlib import Path

import fastapi
import pytest

from app.admin_sessions import AdminDenied
from app.chat.store import ChatStore
from app.database import Database
from app.errors import Refused
from app.page_logins import PageLogins
from app.people import MIGRATIONS
from tests.own_loop import run_coroutine
from tests.test_people import ADMIN_PW, Box


class Page:
    """What PageLogins ends sessions in: a mounted Gradio app's `tokens` (session cookie → login name)."""

    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}


def page_login(logins: PageLogins, name: str, password: str) -> bool | str:
    """The page login's answer: True/False, or the refusal's detail when it raises."""
    try:
        return run_coroutine(logins.check(name, password))
    except fastapi.HTTPException as err:
        return str(err.detail)


def wired(box: Box) -> tuple[PageLogins, Page]:
    """The page logins as app/server.py builds them, following one page."""
    logins = PageLogins(box.settings.web.users, made=box.people.login_hash, must_change=box.people.must_change)
    page = Page()
    logins.follow(page)
    box.people.on_end.append(logins.end)
    return logins, page


@pytest.mark.slow
def test_a_disabled_person_is_refused_at_once_everywhere_and_nothing_of_theirs_is_deleted(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    chats = ChatStore(box.database)
    logins, page = wired(box)
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    box.people.add_person(token, "dora", "dora-pw-1234", "admin", where="test")
    cid = chats.create("", owner="user:alice")
    key = box.people.create_key(token, "agent", "alice", where="test")
    page.tokens.update({"alice-cookie": "alice", "dora-cookie": "dora"})
    dora = box.login("dora-pw-1234", "dora")
    assert box.keys.allows(f"Bearer {key.secret}") and page_login(logins, "alice", "alice-pw-123") is True

    box.people.set_disabled(token, "alice", True, where="test")
    box.people.set_disabled(token, "dora", True, where="test")
    assert page.tokens == {}  # their open page sessions: refused at the next request
    assert page_login(logins, "alice", "alice-pw-123") is False
    assert not box.keys.allows(f"Bearer {key.secret}") and box.people.key_owner(key.secret) is None
    with pytest.raises(AdminDenied):
        box.people.people(dora)  # a disabled admin's admin session is ended
    with pytest.raises(AdminDenied, match="may not use the admin page"):
        box.login("dora-pw-1234", "dora")
    rows = {r["name"]: r["role"] for r in box.people.people(token)}
    assert rows["alice"] == "user (disabled)"
    assert [c.id for c in chats.recent("user:alice")] == [cid]  # nothing deleted
    assert [k.revoked_at for k in box.people.keys(token)] == [None]

    box.people.set_disabled(token, "alice", False, where="test")
    assert page_login(logins, "alice", "alice-pw-123") is True
    assert box.keys.allows(f"Bearer {key.secret}")  # the same key works again, at once
    actions = [a for _, a, _, _ in box.log]
    assert "disable person" in actions and "enable person" in actions


@pytest.mark.slow
def test_a_renamed_person_keeps_their_conversations_and_keys(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    chats = ChatStore(box.database)
    logins, page = wired(box)
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    box.people.add_person(token, "bob", "bob-pw-12345", "user", where="test")
    alice, bob = box.people.owner_of_login("alice"), box.people.owner_of_login("bob")
    mine, theirs = chats.create("", owner=alice), chats.create("", owner=bob)
    key = box.people.create_key(token, "agent", "alice", where="test")
    page.tokens["alice-cookie"] = "alice"
    with pytest.raises(Refused, match="taken"):
        box.people.rename(token, "alice", "bob", where="test")
    box.people.rename(token, "alice", "alicia", where="test")
    assert page.tokens == {}  # logged in under the old name: logs in again
    assert box.people.owner_of_login("alicia") == alice  # her id, not her name, owns what is hers
    assert [c.id for c in chats.recent(alice)] == [mine] and [c.id for c in chats.recent(bob)] == [theirs]
    assert box.people.key_owner(key.secret) == "alicia"  # what the key does now is alicia's
    assert page_login(logins, "alicia", "alice-pw-123") is True
    assert page_login(logins, "alice", "alice-pw-123") is False


@pytest.mark.slow
def test_a_reset_password_is_used_once_to_set_a_new_one(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    logins, _ = wired(box)
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "dora", "dora-pw-1234", "admin", where="test")
    box.people.reset_password(token, "dora", "temporary-pw", where="test")
    said = page_login(logins, "dora", "temporary-pw")
    assert isinstance(said, str) and "/password" in said  # the right temporary password leads there, not in
    assert page_login(logins, "dora", "wrong-password") is False
    with pytest.raises(AdminDenied, match="set a new one first"):
        box.login("temporary-pw", "dora")  # and no admin session either
    with pytest.raises(AdminDenied, match="wrong name or password"):
        box.people.change_own_password("dora", "guess-guess", "dora-own-pw-1", client="elsewhere")
    with pytest.raises(Refused, match="other than"):
        box.people.change_own_password("dora", "temporary-pw", "temporary-pw", client="127.0.0.1")
    box.people.change_own_password("dora", "temporary-pw", "dora-own-pw-1", client="127.0.0.1")
    assert page_login(logins, "dora", "dora-own-pw-1") is True
    assert page_login(logins, "dora", "temporary-pw") is False
    assert box.people.people(box.login("dora-own-pw-1", "dora"))


def test_the_admin_ends_a_persons_sessions(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    _, page = wired(box)
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "dora", "dora-pw-1234", "admin", where="test")
    dora = box.login("dora-pw-1234", "dora")
    page.tokens.update({"dora-1": "dora", "dora-2": "dora", "carol-1": "carol"})
    assert "sessions are ended" in box.people.end_sessions(token, "dora", where="test")
    assert page.tokens == {"carol-1": "carol"}  # only hers
    with pytest.raises(AdminDenied):
        box.people.people(dora)
    assert box.people.people(box.login("dora-pw-1234", "dora"))  # she may log in again
    box.people.end_sessions(token, "carol", where="test")  # a login of the settings file too
    assert page.tokens == {}
    assert ("admin (test)", "end sessions") in [(w, a) for w, a, _, _ in box.log]


def test_a_box_set_up_with_an_admin_password_opens_with_it_as_the_person_admin(tmp_path: Path) -> None:
    """The database as today's main leaves it (people migrated to 001 only, no person) and the settings
    with web.admin_password_hash: at the next start that password is the person `admin`'s, an admin."""
    old = Database(tmp_path / "q.db")
    old.migrate(MIGRATIONS, stop_before="002_disabled_must_change_upgraded")
    old.close()
    box = Box(tmp_path / "q.db")
    logins, _ = wired(box)
    assert box.people.people(box.login(ADMIN_PW, "admin"))  # by name, with the old password
    assert box.people.people(box.login(ADMIN_PW))  # and as before, without a name
    assert page_login(logins, "admin", ADMIN_PW) is True
    assert not box.people.any_people()  # the upgrade alone does not switch page logins on
    rows = {r["name"]: r["role"] for r in box.people.people(box.login(ADMIN_PW))}
    assert rows["admin"] == "admin"
    box.database.close()
    again = Box(tmp_path / "q.db")  # a second start finds the person as it is: not made twice
    assert [p.name for p in again.store.people()] == ["admin"]


def test_a_person_makes_lists_and_revokes_keys_of_their_own(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    box.people.add_person(token, "bob", "bob-pw-12345", "user", where="test")
    mine = box.people.create_own_key("alice", "my agent", where="test")
    assert box.people.key_owner(mine.secret) == "alice"  # what the agent does is alice's
    assert box.keys.allows(f"Bearer {mine.secret}")
    assert [k.name for k in box.people.own_keys("alice")] == ["my agent"] and box.people.own_keys("bob") == []
    with pytest.raises(Exception, match="no live API key"):
        box.people.revoke_own_key("bob", mine.key.id, where="test")  # not bob's to revoke
    with pytest.raises(Refused, match="page login"):
        box.people.create_own_key(None, "anyone's", where="test")  # a box without logins: the admin makes keys
    box.people.create_own_key("carol", "from the settings file", where="test")  # web.users may have their own
    box.people.set_disabled(token, "alice", True, where="test")
    with pytest.raises(Refused, match="may not make API keys"):
        box.people.create_own_key("alice", "while disabled", where="test")
    box.people.set_disabled(token, "alice", False, where="test")
    box.people.revoke_own_key("alice", mine.key.id, where="test")
    assert not box.keys.allows(f"Bearer {mine.secret}")
    assert ("alice (test)", "revoke API key") in [(w, a) for w, a, _, _ in box.log]


def test_a_person_added_on_a_box_started_without_logins_is_told_they_log_in_after_a_restart(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    token = box.login(ADMIN_PW)
    box.people.logins_on = False  # as app/server.py sets it on a box started without people
    said = box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    assert "after a restart" in said and "can log in now" not in said
    box.people.logins_on = True
    assert "can log in now" in box.people.add_person(token, "bob", "bob-pw-12345", "user", where="test")


def test_a_password_reset_revokes_the_persons_api_keys(tmp_path: Path) -> None:
    """A reset usually follows a compromise: the keys made while the password was known to someone else go
    with it, at once (issue 47, item 10); another person's keys stay."""
    box = Box(tmp_path / "q.db")
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "dora", "dora-pw-1234", "user", where="test")
    box.people.add_person(token, "bob", "bob-pw-12345", "user", where="test")
    given, own = (
        box.people.create_key(token, "agent", "dora", where="test"),
        box.people.create_own_key("dora", "cli", where="test"),
    )
    bobs = box.people.create_key(token, "bob's agent", "bob", where="test")
    said = box.people.reset_password(token, "dora", "temporary-pw", where="test")
    assert "Every API key of theirs is revoked (2)" in said
    for key in (given, own):
        assert not box.keys.allows(f"Bearer {key.secret}") and box.people.key_owner(key.secret) is None
    assert box.keys.allows(f"Bearer {bobs.secret}")
    assert {k.id for k in box.people.keys(token) if k.revoked_at} == {given.key.id, own.key.id}
    assert ("admin (test)", "reset password") in [(w, a) for w, a, _, _ in box.log]
    box.people.change_own_password("dora", "temporary-pw", "dora-own-pw-1", client="127.0.0.1")
    assert not box.keys.allows(f"Bearer {own.secret}")  # her own new password brings no old key back
    assert box.keys.allows(f"Bearer {box.people.create_own_key('dora', 'new cli', where='test').secret}")
