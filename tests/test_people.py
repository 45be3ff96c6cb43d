"""People and API keys made on the admin page, on a real SQLite file: hashed, kept across a restart, the
last admin kept, a user refused the admin session, a revoked key refused at once, every change logged."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.admin_sessions import AdminDenied, AdminSessions
from app.api.gate import Keys
from app.auth import LoginThrottle, hash_password, verify_password
from app.database import Database
from app.errors import Refused
from app.page_logins import PageLogins
from app.people import PeopleStore, made_here
from app.people_admin import PeopleAdmin
from app.settings import Settings
from tests.own_loop import run_coroutine

ADMIN_PW = "configured-admin-pw"


class Box:
    """The people service over a database file, as the composition root builds it (no engine needed)."""

    def __init__(self, path: Path, *, admin_password: bool = True) -> None:
        self.database = Database(path)
        self.log: list[tuple[str, str, str, bool]] = []
        web = {"admin_password_hash": hash_password(ADMIN_PW, iterations=1000)} if admin_password else {}
        self.settings = Settings(web=web | {"users": {"carol": hash_password("carol-pw-123", iterations=1000)}})
        self.store = PeopleStore(self.database)
        self.sessions = AdminSessions(self.store, lambda: self.settings.web.admin_password_hash, self.record)
        self.people = PeopleAdmin(people=self.store, sessions=self.sessions, settings=self.settings, record=self.record)
        self.keys = Keys(lambda: self.settings.web.api_keys, made=self.store.key_owner, any_made=self.store.any_keys)

    def record(self, who: str, action: str, detail: str, *, ok: bool = True) -> None:
        self.log.append((who, action, detail, ok))

    def login(self, password: str, name: str = "") -> str:
        return self.sessions.login(password, who="test", client=f"{name}@127.0.0.1", name=name)


def logged_in(logins: PageLogins, name: str, password: str) -> bool:
    """The page login's check, in a thread of its own (a browser test's event loop may hold this one)."""
    return run_coroutine(logins.check(name, password))


@pytest.mark.slow
def test_people_are_hashed_kept_across_a_restart_and_log_in_to_the_pages(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    stored = box.store.password_hash("alice")
    assert stored and "alice-pw-123" not in stored and verify_password("alice-pw-123", stored)
    with pytest.raises(Refused, match="already"):
        box.people.add_person(token, "alice", "another-pw-1", "admin", where="test")
    with pytest.raises(Refused, match="settings file"):
        box.people.add_person(token, "carol", "another-pw-1", "user", where="test")
    with pytest.raises(Refused, match="at least 8"):
        box.people.add_person(token, "bob", "short", "user", where="test")
    box.database.close()

    again = Box(tmp_path / "q.db")  # a restart: a new process opens the same file
    rows = {r["name"]: (r["role"], r["from"]) for r in again.people.people(again.login(ADMIN_PW))}
    assert rows["alice"] == ("user", "this page")
    assert rows["carol"] == ("user", "the settings file (web.users)")
    logins = PageLogins(again.settings.web.users, made=again.people.login_hash)
    assert logged_in(logins, "alice", "alice-pw-123")
    assert logged_in(logins, "carol", "carol-pw-123")  # the settings file's still log in
    assert not logged_in(logins, "alice", "wrong-password")
    again.people.remove_person(again.login(ADMIN_PW), "alice", where="test")
    assert not logged_in(logins, "alice", "alice-pw-123")  # removed: refused at the next login


@pytest.mark.slow
def test_a_user_gets_no_admin_session_and_a_removed_admin_loses_theirs(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    box.people.add_person(token, "dora", "dora-pw-1234", "admin", where="test")
    with pytest.raises(AdminDenied, match="may not use the admin page"):
        box.login("alice-pw-123", "alice")
    with pytest.raises(AdminDenied, match="wrong name or password"):
        box.login("guess-guess", "nobody")
    dora = box.login("dora-pw-1234", "dora")
    assert box.people.people(dora)  # an admin person's session works
    box.people.set_role(token, "dora", "user", where="test")
    with pytest.raises(AdminDenied, match="no longer an admin"):
        box.people.people(dora)
    box.people.set_role(token, "dora", "admin", where="test")
    dora = box.login("dora-pw-1234", "dora")
    box.people.reset_password(token, "dora", "dora-new-pw-1", where="test")
    with pytest.raises(AdminDenied):
        box.people.people(dora)  # a reset ends their sessions
    with pytest.raises(AdminDenied, match="wrong name or password"):  # the old password is wrong now
        box.sessions.login("dora-pw-1234", who="test", client="elsewhere", name="dora")
    box.people.change_own_password("dora", "dora-new-pw-1", "dora-own-pw-12", client="test")  # a reset is used once
    dora = box.login("dora-own-pw-12", "dora")
    box.people.remove_person(token, "dora", where="test")
    with pytest.raises(AdminDenied):
        box.people.people(dora)
    for forged in (None, "", "guess", ["list"]):
        with pytest.raises(AdminDenied):
            box.people.add_person(forged, "eve", "eve-pw-1234", "admin", where="test")  # type: ignore[arg-type]
    actions = [(action, ok) for _, action, _, ok in box.log]
    assert ("add person", True) in actions and ("remove person", True) in actions
    assert ("set role", True) in actions and ("reset password", True) in actions
    assert any(who.startswith("admin (test)") for who, action, _, _ in box.log if action == "remove person")


def test_the_last_admin_cannot_be_removed_or_made_a_user(tmp_path: Path) -> None:
    first = Box(tmp_path / "q.db")  # made while the admin password was configured ...
    token = first.login(ADMIN_PW)
    first.people.add_person(token, "dora", "dora-pw-1234", "admin", where="test")
    first.people.remove_person(token, "admin", where="test")  # the `admin` the admin password became
    first.database.close()
    box = Box(tmp_path / "q.db", admin_password=False)  # ... which the installer then took out
    dora = box.login("dora-pw-1234", "dora")
    with pytest.raises(Refused, match="last admin"):
        box.people.remove_person(dora, "dora", where="test")
    with pytest.raises(Refused, match="last admin"):
        box.people.set_role(dora, "dora", "user", where="test")
    box.people.add_person(dora, "erik", "erik-pw-1234", "admin", where="test")
    assert box.log[-1][:2] == ("dora (test)", "add person")  # the admin log names who did it
    box.people.remove_person(dora, "dora", where="test")  # another admin is left: allowed
    assert [p.name for p in box.store.people()] == ["erik"]


def test_a_key_is_shown_once_kept_hashed_and_refused_as_soon_as_it_is_revoked(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    token = box.login(ADMIN_PW)
    assert box.keys.allows("")  # no keys at all: /v1 is open (loopback only)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    made = box.people.create_key(token, "coding agent", "alice", where="test")
    assert made.secret.startswith("qk-") and len(made.secret) > 40
    raw = (tmp_path / "q.db").read_bytes() + (tmp_path / "q.db-wal").read_bytes()
    assert made.secret.encode() not in raw  # only its hash is stored
    assert not box.keys.allows("")  # a key exists now: /v1 needs one
    assert box.keys.allows(f"Bearer {made.secret}")
    assert not box.keys.allows(f"Bearer {made.secret}x")
    assert box.people.key_owner(made.secret) == "alice"
    listed = box.people.keys(token)
    assert [(k.name, k.owner, k.revoked_at) for k in listed] == [("coding agent", "alice", None)]
    assert listed[0].last_used_at and listed[0].created_at and made.secret not in repr(listed)
    box.people.revoke_key(token, made.key.id, where="test")
    assert not box.keys.allows(f"Bearer {made.secret}")  # at once, no restart
    assert not box.keys.allows("")  # and revoking the last key does not open /v1
    with pytest.raises(Exception, match="no live API key"):
        box.people.revoke_key(token, made.key.id, where="test")
    kept = box.people.create_key(token, "script", "", where="test")  # owner empty: the configured admin's
    box.database.close()

    again = Box(tmp_path / "q.db")
    assert again.keys.allows(f"Bearer {kept.secret}") and not again.keys.allows(f"Bearer {made.secret}")
    again.settings.web.api_keys.append("configured-key")
    assert again.keys.allows("Bearer configured-key")  # the settings' keys still work beside them
    alice_key = again.people.create_key(again.login(ADMIN_PW), "agent 2", "alice", where="test")
    again.people.remove_person(again.login(ADMIN_PW), "alice", where="test")
    assert not again.keys.allows(f"Bearer {alice_key.secret}")  # a removed person's keys go with them
    assert [a for _, a, _, _ in box.log].count("create API key") == 2


def test_people_and_keys_made_on_the_page_count_for_the_lan_check(tmp_path: Path) -> None:
    """A box given people and keys on the admin page (on loopback) may face the LAN without web.users."""
    assert made_here(tmp_path / "none.db") == (False, False)
    box = Box(tmp_path / "q.db")
    assert made_here(tmp_path / "q.db") == (False, False)
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    assert made_here(tmp_path / "q.db") == (True, False)
    box.people.create_key(token, "agent", "alice", where="test")
    people, keys = made_here(tmp_path / "q.db")
    lan = Settings(web={"host": "0.0.0.0"})
    assert "without users and api_keys" in (lan.open_lan_problem() or "")
    assert lan.open_lan_problem(people=people, keys=keys) is None


def test_a_throttled_login_never_says_try_again_in_0_s() -> None:
    """Issue 47, item 16: 0.4 s left was said as "try again in 0 s" (and then refused)."""
    now = [100.0]
    throttle = LoginThrottle(clock=lambda: now[0])
    assert throttle.failed("carol@10.0.0.2") == 1.0
    now[0] += 0.6
    assert throttle.wait_s("carol@10.0.0.2") == 1  # 0.4 s left: at least a whole second said
    now[0] += 0.4
    assert throttle.wait_s("carol@10.0.0.2") == 0  # and then it may try
    assert throttle.failed("carol@10.0.0.2") == 2.0
    now[0] += 0.01
    assert throttle.wait_s("carol@10.0.0.2") == 2
