"""The page logins (`web.users`, and the people made on the admin page): every try costs the same whether
the name exists or not, and wrong passwords are throttled per name and address, as the admin login is.
A person removed, disabled or given a new password on the admin page has their page sessions ended at once;
with a reset password the login is refused (403) until they set a new one at /password.

Gradio calls the login check with the name and password only, so the caller's address reaches it
through `CallerAddress`, the ASGI layer that notes each request's client in a context variable.

`SameOrigin` refuses a login or `/password` form posted from another site (login CSRF: a page elsewhere
logging the visitor's browser in as the attacker, issue 47, item 14)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import fastapi
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth import LoginThrottle, hash_password, verify_password

_ADDRESS: contextvars.ContextVar[str] = contextvars.ContextVar("caller_address", default="?")


class PageLogins:
    """Checks page logins for every mounted page at once (one throttle, shared)."""

    def __init__(
        self,
        users: Mapping[str, str],
        *,
        throttle: LoginThrottle | None = None,
        made: Callable[[str], str | None] = lambda name: None,
        must_change: Callable[[str], bool] = lambda name: False,
    ) -> None:
        """`users`: the settings file's; `made(name)`: the hash of a person made on the admin page (first);
        `must_change(name)`: their password was reset, so the right one leads to /password, not in."""
        self.users, self.made, self.must_change = dict(users), made, must_change
        self.throttle = throttle or LoginThrottle(free=3)
        # An unknown name is checked against this, so it takes as long as a known one.
        self._dummy = hash_password("not a password", iterations=_iterations([*self.users.values(), hash_password("")]))
        self._pages: list[Any] = []  # the mounted Gradio apps, whose sessions `end` ends

    def follow(self, page: Any) -> None:
        """Note a mounted Gradio app (its `tokens`: session cookie → login name)."""
        self._pages.append(page)

    def end(self, name: str) -> None:
        """End every page session of this login (its next request asks it to log in again)."""
        for page in self._pages:
            tokens: dict[str, str] = getattr(page, "tokens", {})
            for token in [t for t, who in list(tokens.items()) if who == name]:
                tokens.pop(token, None)

    async def check(self, name: str, password: str) -> bool:
        """Gradio's auth callable: True for a right name and password; raises 429 while throttled."""
        who = f"{name}@{_ADDRESS.get()}"
        wait_s = self.throttle.wait_s(who)
        if wait_s > 0:
            raise fastapi.HTTPException(429, f"too many wrong passwords for {name!r}: try again in {wait_s} s")
        stored = await asyncio.to_thread(self.made, name) or self.users.get(name)
        right = await asyncio.to_thread(verify_password, password, stored or self._dummy)
        if right and stored is not None:
            self.throttle.succeeded(who)
            if await asyncio.to_thread(self.must_change, name):
                raise fastapi.HTTPException(403, f"{name}: your password was reset: set a new one at /password first")
            return True
        self.throttle.failed(who)
        return False


def _iterations(hashes: Iterable[str]) -> int:
    """The largest PBKDF2 iteration count among the stored hashes (what a dummy check must cost)."""
    counts = [int(part[1]) for part in (h.split("$") for h in hashes) if len(part) == 4 and part[1].isdigit()]
    return max(counts, default=1000)


class CallerAddress:
    """Notes each HTTP request's client address for `PageLogins` (which Gradio gives no request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        token = _ADDRESS.set(client[0] if client else "?")
        try:
            await self.app(scope, receive, send)
        finally:
            _ADDRESS.reset(token)


class SameOrigin:
    """Refuses (403) a POST to a page's login (`…/login`) or to `/password` whose `Origin` (or, without one,
    `Referer`) is another site than the one it was sent to (its `Host`, or `X-Forwarded-Host` behind a proxy,
    which a page elsewhere cannot set). A request with neither header (curl, a script) is let through: login
    CSRF needs a browser, and a browser sends `Origin` with every POST."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and _is_form(scope.get("path", "")):
            sender = _foreign_sender(Headers(scope=scope))
            if sender is not None:
                detail = (
                    f"this form was sent from another site ({sender}), not from this appliance's own page: "
                    "open Quartet's page and log in (or set your password) there"
                )
                await JSONResponse({"ok": False, "detail": detail}, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _is_form(path: str) -> bool:
    """A page's login (`/login`, `/admin/login`, `/kiosk/login`) or the password form."""
    end = path.rstrip("/")
    return end == "/password" or end.endswith("/login")


def _foreign_sender(headers: Headers) -> str | None:
    """The sending site when it is not this one; None when it is, or when the request names none."""
    sender = headers.get("origin") or headers.get("referer")
    if sender is None:
        return None
    ours = {h.strip().lower() for h in (headers.get("host", ""), headers.get("x-forwarded-host", "")) if h.strip()}
    netloc = urlsplit(sender).netloc.lower() if sender != "null" else ""
    return None if netloc and netloc in ours else sender
