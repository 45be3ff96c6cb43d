"""Two ASGI layers beside the /v1 gate (app/api/gate.py):

- `AdminUploads`: the admin page takes a backup of up to `backup.max_upload_mb` (8 GiB) for a restore, and
  Gradio's upload route takes a file before any handler could check an admin session. So a request to
  /admin/… larger than a document may be (`knowledge.max_file_mb`) is refused with 413 unless it carries
  a live admin session: the page's upload ticket as a cookie (set by assets/admin.js after the login) or
  the session's token in the `X-Quartet-Admin` header (a program that uploads to the admin page itself;
  the named `restore` endpoint lives on the main page, which takes no more than a document anyway). A body without a
  Content-Length is counted as it comes and cut off at the limit.
- `KeyOwners`: a named-endpoint caller that sends a live API key made on the admin page as its bearer is
  that key's owner: the layer says so in the `X-Quartet-Key-Owner` header, URL-quoted (app/ui/callers.py
  reads it),
  and drops any such header the client sent itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http.cookies import SimpleCookie
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UPLOAD_COOKIE = "quartet-admin-upload"
ADMIN_HEADER = "x-quartet-admin"
OWNER_HEADER = "x-quartet-key-owner"
ADMIN_PREFIX = "/admin/"


class AdminUploads:
    def __init__(self, app: ASGIApp, *, may_upload: Callable[[str], bool], small_bytes: int) -> None:
        self.app, self.may_upload, self.small_bytes = app, may_upload, small_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(ADMIN_PREFIX):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) <= self.small_bytes:
            await self.app(scope, receive, send)
            return
        if self._admin(headers):
            await self.app(scope, receive, send)
            return
        if length is not None:
            await _refuse(self.small_bytes, scope, receive, send)
            return
        await self.app(scope, self._counted(receive), send)

    def _admin(self, headers: Headers) -> bool:
        return any(self.may_upload(secret) for secret in admin_secrets(headers))

    def _counted(self, receive: Receive) -> Receive:
        """A receive that ends the request (a disconnect) once the body passes the limit."""
        size = 0

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.small_bytes:
                    return {"type": "http.disconnect"}
            return message

        return counted


def admin_secrets(headers: Headers) -> list[str]:
    """What a request shows of an admin session: the `X-Quartet-Admin` header (its token) and the admin page's
    upload ticket cookie, those it carries."""
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # a malformed cookie header is no ticket
        cookie = SimpleCookie()
    given = [headers.get(ADMIN_HEADER, ""), cookie[UPLOAD_COOKIE].value if UPLOAD_COOKIE in cookie else ""]
    return [secret for secret in given if secret]


async def _refuse(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    said = (
        f"this request is over {limit / 2**20:g} MiB: only an admin session may send more here "
        "(log in on the admin page first; a client sends its admin token in the X-Quartet-Admin header)"
    )
    await JSONResponse({"detail": said}, status_code=413)(scope, receive, send)


class KeyOwners:
    def __init__(self, app: ASGIApp, *, owner_of: Callable[[str], str | None]) -> None:
        """`owner_of(secret)`: the owner of a live key made on the admin page (None: not such a key)."""
        self.app, self.owner_of = app, owner_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] not in ("http", "websocket") or path == "/v1" or path.startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        raw = [(k, v) for k, v in scope.get("headers", []) if k.lower() != OWNER_HEADER.encode()]
        bearer = Headers(raw=raw).get("authorization", "")
        scheme, _, secret = bearer.partition(" ")
        if scheme.lower() == "bearer" and secret.strip():
            owner = await asyncio.to_thread(self.owner_of, secret.strip())
            if owner:
                raw.append((OWNER_HEADER.encode(), quote(owner, safe="").encode()))
        await self.app({**scope, "headers": raw}, receive, send)
