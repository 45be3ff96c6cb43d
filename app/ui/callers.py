"""What a handler may know of its caller."""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import unquote

import gradio as gr

from app.errors import Refused
from app.guards import OWNER_HEADER

# The header a client of the named endpoints keeps its identity in (gradio_client: `headers=`).
CLIENT_HEADER = "X-Quartet-Client"
_SHORTEST_TOKEN = 16
Handler = TypeVar("Handler", bound=Callable[..., Any])


def client_address(request: gr.Request | None) -> str:
    """The caller's network address (what login throttling counts by), "?" when unknown."""
    return request.client.host if request is not None and request.client else "?"


def acted_from(request: gr.Request | None) -> str:
    """Where an admin action came from, as the admin log names it ("web <address>")."""
    return f"web {client_address(request)}"


def login_of(request: gr.Request | None) -> str | None:
    """The page login of the request (None: the pages have no logins)."""
    return getattr(request, "username", None) if request is not None else None


def held(check: Callable[[str | None, str | None], None]) -> Callable[[Handler], Handler]:
    """A named endpoint that takes `admin_token`, refused unless its caller's page login opened that admin
    session (`check(token, login)` raises AdminDenied: app/admin_sessions.py `check_holder`). An empty token
    is passed on (the endpoint then acts as no admin, or the service refuses it as no session)."""

    def wrap(handler: Handler) -> Handler:
        signature = inspect.signature(handler)

        @functools.wraps(handler)
        def called(*args: Any, **kwargs: Any) -> Any:
            given = signature.bind_partial(*args, **kwargs).arguments
            if given.get("admin_token"):
                check(given["admin_token"], login_of(given.get("request")))
            return handler(*args, **kwargs)

        return cast(Handler, called)

    return wrap


def throttle_key(request: gr.Request | None) -> str:
    """Whom wrong admin passwords are counted against: the login name (none without logins) and the
    address — never a session, which a client renews at will."""
    username = getattr(request, "username", None) if request is not None else None
    return f"{username or ''}@{client_address(request)}"


# A page whose load has not yet said whose it is (its browser id comes with the load's answer, which a
# loaded machine can deliver after the first click): it owns nothing and lists nothing. It must never fall
# back to a shared owner (once "api", every named-endpoint caller's): an early "New chat" listed their
# conversations, and a message sent before the load landed was filed under them.
UNKNOWN_PAGE = "page:unknown"


class Owners:
    """Whose rows a caller's are. A login is owned by what `of_login(name)` says (app/people_admin.py: a
    person's stable id, never their name, which can change or be reused); the tabs and endpoints get one."""

    def __init__(self, of_login: Callable[[str], str]) -> None:
        self.of_login = of_login

    def owner_of(self, request: gr.Request | None) -> str:
        """Whose conversations and runs, for a client of the named endpoints: the login's; else, for a live API
        key made on the admin page, its owner's (app/guards.py `KeyOwners` vouches for the header); else the
        token the client keeps (the `X-Quartet-Client` header, or the API key it sends as a bearer), never
        stored as sent; else this connection's own (a gradio_client `Client`'s session: gone with it)."""
        login = self._login(request)
        if login:
            return login
        headers = getattr(request, "headers", None) or {}
        vouched = str(headers.get(OWNER_HEADER) or "")
        if vouched:
            return self.of_login(unquote(vouched))
        token = _client_token(request)
        if token:
            return "client:" + hashlib.sha256(token.encode()).hexdigest()[:32]
        return f"session:{session_of(request)}"

    def page_owner(self, request: gr.Request | None, browser_id: str | None) -> str:
        """Whose conversations, for a page: the login's when people log in, else the browser's own random id,
        else nobody's yet (UNKNOWN_PAGE)."""
        return self._login(request) or (f"browser:{browser_id}" if browser_id else UNKNOWN_PAGE)

    def _login(self, request: gr.Request | None) -> str | None:
        username = getattr(request, "username", None) if request is not None else None
        return self.of_login(username) if username else None


def _client_token(request: gr.Request | None) -> str | None:
    headers = getattr(request, "headers", None) or {}
    token = str(headers.get(CLIENT_HEADER.lower()) or headers.get(CLIENT_HEADER) or "").strip()
    if token and len(token) < _SHORTEST_TOKEN:
        raise Refused(f"the {CLIENT_HEADER} header must be a random token of at least {_SHORTEST_TOKEN} characters")
    bearer = str(headers.get("authorization") or "").strip()
    if not token and bearer.lower().startswith("bearer ") and bearer[7:].strip():
        token = "key:" + bearer[7:].strip()
    return token or None


def session_of(request: gr.Request | None) -> str:
    """Who waits for an answer (what Stop cancels): one page or API session."""
    return (request.session_hash if request is not None else None) or "anon"
