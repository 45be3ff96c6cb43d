"""The door of `/v1`: the API key is checked, and the body's size, before a byte of the body is read.

FastAPI reads and parses a route's body before its dependencies run, so a key checked in a dependency
came after the work: an unauthenticated 100 MB POST was read and parsed (the app's memory 200 → 499 MB)
before its 401, and malformed JSON without a key got a 400. This ASGI middleware answers first, in
OpenAI's shape (app/api/errors.py): 401 for a missing or wrong key, 413 for a body over
`web.max_body_mb` — at once from its Content-Length, or, for a chunked body, as soon as it grows past
the limit (such a body is read here, up to the limit, and handed on whole).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import errors
from app.api.errors import ApiError

PREFIX = "/v1"


class Keys:
    """The keys /v1 takes: the settings' `web.api_keys` (read as they are now) and the live keys made on the
        admin page (app/people.py). Open (loopback only, app/settings.py) only while none is configured and none
    was ever made on the page: revoking the last key made there does not open /v1."""

    def __init__(
        self,
        configured: Callable[[], list[str]],
        *,
        made: Callable[[str], object] = lambda secret: None,
        any_made: Callable[[], bool] = lambda: False,
    ) -> None:
        self.configured, self.made, self.any_made = configured, made, any_made

    def allows(self, authorization: str) -> bool:
        """Whether an Authorization header carries one of the keys as its Bearer token (no keys: all are)."""
        keys = self.configured()
        if not keys and not self.any_made():
            return True
        token = bearer_key(authorization)
        if not token:
            return False
        if any(hmac.compare_digest(token.encode(), k.encode()) for k in keys):
            return True
        return self.made(token) is not None  # a revoked key is out of the live ones at its revoke's commit


def bearer_key(authorization: str) -> str:
    """The key an Authorization header carries, as the gate reads it: "Bearer" in any case, then the key
    with the spaces around it dropped ("" for a header that carries none). What is the caller's by its key
    (app/api/response_store.py) is keyed by this, never by the header as sent."""
    scheme, _, given = authorization.partition(" ")
    return given.strip() if scheme.lower() == "bearer" else ""


def key_refused() -> ApiError:
    return ApiError(
        "invalid API key: send one of the appliance's keys as 'Authorization: Bearer <key>'",
        kind="denied",
        code="invalid_api_key",
    )


class ApiGate:
    """Checks the key and the body's size of every request under /v1 before the route reads its body."""

    def __init__(self, app: ASGIApp, *, keys: Keys, max_body_bytes: int) -> None:
        self.app, self.keys, self.max_body_bytes = app, keys, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not await asyncio.to_thread(self.keys.allows, headers.get("authorization", "")):
            await _refuse(key_refused(), scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None:  # the server holds the body to its Content-Length
            if not length.isdigit() or int(length) > self.max_body_bytes:
                await _refuse(self._too_large(length), scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        body = await self._read_chunked(receive)
        if body is None:
            await _refuse(self._too_large(None), scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_chunked(self, receive: Receive) -> bytes | None:
        """A body without Content-Length, read up to the limit (None: it is longer)."""
        parts, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            part = message.get("body", b"")
            size += len(part)
            if size > self.max_body_bytes:
                return None
            parts.append(part)
            more = message.get("more_body", False)
        return b"".join(parts)

    def _too_large(self, length: str | None) -> ApiError:
        mib = self.max_body_bytes / 2**20
        said = f"of {length} bytes " if length and length.isdigit() else ""
        return ApiError(
            f"the request body {said}is over the appliance's limit of {mib:g} MiB (web.max_body_mb)",
            kind="too_large",
            code="request_too_large",
        )


async def _refuse(err: ApiError, scope: Scope, receive: Receive, send: Send) -> None:
    """The refusal, sent without reading the body: the server then drops the body's bytes as they come
    (uvicorn discards what arrives after a response; closing at once would reset the connection before
    the client had read its answer)."""
    await JSONResponse(errors.body(err), status_code=errors.status(err))(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body already read, then whatever the client sends next (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
