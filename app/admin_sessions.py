"""Admin sessions: who may open one (the configured admin password, or a person with the admin role and
their own password), how long it lasts, and the check every admin action makes.

A session opened by a person is checked against the database at every action: once that person is
removed, disabled, loses the admin role or has their password reset, their sessions are refused at once. Each
session also has an upload ticket, which the admin page's browser sends as a cookie so that the restore
upload (far larger than a document) is taken from an admin only (app/page_logins.py `AdminUploads`).

A session is bound to the page login that opened it (none on a box without page logins): a named endpoint
that takes the token checks its caller's login with `check_holder` (app/ui/callers.py `held`), so a token
another logged-in person got hold of is refused, and the session it belongs to ended.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.auth import LoginThrottle, hash_password, verify_password
from app.errors import QuartetError
from app.people import PeopleStore

SESSION_S = 8 * 3600
CONFIGURED = ""  # the name of the configured admin's sessions (web.admin_password_hash)


class AdminDenied(QuartetError, PermissionError):
    """An admin action refused for who asks (kind `denied`): no session, a wrong password, a throttled login."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="denied")


@dataclass(frozen=True)
class Session:
    name: str  # the person's, or CONFIGURED
    expires: float
    ticket: str
    login: str | None = None  # the page login of the request that opened it (None: the pages have no logins)


class AdminSessions:
    def __init__(self, people: PeopleStore, admin_hash: Callable[[], str], record: Callable[..., None]) -> None:
        self.people, self._admin_hash, self._record = people, admin_hash, record
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._throttle = LoginThrottle()
        self._dummy = hash_password("not a password")  # an unknown name costs what a known one does

    def login(self, password: str, *, who: str, client: str, name: str = "", login: str | None = None) -> str:
        """A session token for the right password: the configured admin's (no name), or the named
        person's when they have the admin role. `client` is whom the throttle counts (app/ui/callers.py
        `throttle_key`); `who` goes to the log; `login` is the page login of the request, which alone may
        use the token."""
        name = name.strip() if isinstance(name, str) else ""
        who = f"{name or 'admin'} ({who})"
        stored = self.people.password_hash(name) if name else self._admin_hash()
        if not name and not stored:
            self._record(who, "login", "refused: no admin password is configured", ok=False)
            raise AdminDenied("no admin password is configured (set admin_password_hash; python -m app.auth)")
        key = f"{name}/{client}"
        wait_s = self._throttle.wait_s(key)
        if wait_s > 0:  # not checked, so not logged: one row per password checked, not per try
            raise AdminDenied(f"too many wrong passwords from here: try again in {wait_s} s")
        right = isinstance(password, str) and verify_password(password, stored or self._dummy) and stored is not None
        if not right:
            delay = self._throttle.failed(key)
            said = f"{name!r}: wrong name or password" if name else "wrong password"
            later = f" (next try in {delay:.0f} s)" if delay >= 1 else ""
            self._record(who, "login", f"refused: {said}{later}", ok=False)
            raise AdminDenied(
                ("wrong name or password" if name else "wrong admin password")
                + (f"; try again in {delay:.0f} s" if delay >= 1 else "")
            )
        self._throttle.succeeded(key)
        person = self.people.person(name) if name else None
        if person is not None and person.must_change:
            self._record(who, "login", f"refused: {name!r} must set a new password first", ok=False)
            raise AdminDenied(f"{name}'s password was reset: set a new one first (at /password), then log in")
        if name and self.people.active_role(name) != "admin":
            self._record(who, "login", f"refused: {name!r} is not an admin here (a user, or disabled)", ok=False)
            raise AdminDenied(f"{name} may not use the admin page: ask an admin for the admin role")
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._sessions[token] = Session(
                name, time.monotonic() + SESSION_S, secrets.token_urlsafe(24), login or None
            )
        self._record(who, "login", f"admin session opened for {name or 'the configured admin'}")
        return token

    def verify(self, name: str, password: str, *, client: str) -> None:
        """A person's own password checked, throttled per name and client as the logins are (AdminDenied)."""
        key = f"{name}/{client}"
        wait_s = self._throttle.wait_s(key)
        if wait_s > 0:
            raise AdminDenied(f"too many wrong passwords from here: try again in {wait_s} s")
        stored = self.people.password_hash(name) if isinstance(name, str) else None
        found = self.people.person(name) if stored else None
        right = isinstance(password, str) and verify_password(password, stored or self._dummy) and stored is not None
        if not right or found is None or found.disabled:
            delay = self._throttle.failed(key)
            raise AdminDenied("wrong name or password" + (f"; try again in {delay:.0f} s" if delay >= 1 else ""))
        self._throttle.succeeded(key)

    def check(self, token: str | None) -> Session:
        """The session of `token`, or AdminDenied: none, expired, or its person no longer an admin."""
        if not isinstance(token, str):  # a list or a number sent as the token: no session either
            token = None
        with self._lock:
            session = self._sessions.get(token or "")
        if session is None or session.expires < time.monotonic():
            raise AdminDenied("this needs the admin session: log in on the admin page first")
        if session.name and self.people.active_role(session.name) != "admin":
            self.end(session.name)
            raise AdminDenied(f"{session.name} is no longer an admin (or is disabled): the admin session has ended")
        return session

    def check_holder(self, token: str | None, login: str | None) -> None:
        """AdminDenied unless `login` (the page login of the request that sends `token`) opened that session.
        A token sent from another login got out: the session is refused, and ended, and the log says so."""
        session = self.check(token)
        if session.login == (login or None):
            return
        with self._lock:
            self._sessions.pop(str(token), None)
        opener = session.login or "a page without a login"
        self._record(
            f"{login or 'a page without a login'}",
            "admin session",
            f"refused: the token of {session.name or 'the configured admin'}'s session (opened by {opener}) was "
            "sent from another login; that session is ended",
            ok=False,
        )
        raise AdminDenied(
            "this admin session was opened by another login, so it is not yours to use (and it is now ended): "
            "open your own with admin_login"
        )

    def named(self, token: str | None, where: str) -> str:
        """Who acts, for the admin log: the session's admin by name, and where from (AdminDenied: no session)."""
        return f"{self.check(token).name or 'admin'} ({where})"

    def end(self, name: str) -> int:
        """End every session of this person; how many there were."""
        with self._lock:
            ended = [token for token, s in self._sessions.items() if s.name == name]
            for token in ended:
                del self._sessions[token]
        return len(ended)

    def holds(self, token: str, secret: str) -> bool:
        """Whether `secret` is the live admin session `token`'s own token or upload ticket (what a download
        bound to that session needs: app/api/download_routes.py)."""
        try:
            session = self.check(token)
        except AdminDenied:
            return False
        return secrets.compare_digest(secret, token) or secrets.compare_digest(secret, session.ticket)

    def may_upload(self, secret: str) -> bool:
        """Whether `secret` is a live session's upload ticket or token (what a restore upload needs)."""
        now = time.monotonic()
        with self._lock:
            live = [(t, s) for t, s in self._sessions.items() if s.expires >= now]
        return any(secrets.compare_digest(secret, s.ticket) or secrets.compare_digest(secret, t) for t, s in live)
