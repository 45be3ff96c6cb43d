"""`GET /downloads/{key}` (a chat's export) and `GET /admin/downloads/{key}` (a backup): a file offered once
(app/downloads.py), streamed to whoever may have it and gone from the disk as it starts. A backup goes only
to a request that carries the admin session it was taken in — the admin page's upload ticket cookie (sent
under /admin), or the session's token in the `X-Quartet-Admin` header (a program). Anyone else, a second
fetch, or a key past its time gets the same 404, so nothing tells a stranger that a key exists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO
from urllib.parse import quote

import fastapi
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.downloads import Download, Downloads
from app.guards import admin_secrets

GONE = (
    "no such download here: each is fetched once, within 10 minutes, by whoever asked for it (a backup only in "
    "the admin session that took it): ask for it again"
)
_CHUNK = 1 << 20


def add(api: fastapi.FastAPI, downloads: Downloads, *, holds: Callable[[str, str], bool]) -> None:
    """The routes on `api`; `holds(token, secret)`: whether `secret` belongs to the live admin session `token`."""

    def fetch(key: str, request: fastapi.Request) -> Response:
        given = admin_secrets(request.headers)

        def may_fetch(download: Download) -> bool:
            session = download.admin_session
            return session is None or any(holds(session, secret) for secret in given)

        claimed = downloads.claim(key, may_fetch=may_fetch)
        if claimed is None:
            return JSONResponse({"detail": GONE}, status_code=404)
        headers = {
            "Content-Length": str(claimed.size),
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(claimed.name, safe='')}",
            "Cache-Control": "no-store",
        }
        return StreamingResponse(_chunks(claimed.file), media_type=claimed.media_type, headers=headers)

    for path in ("/downloads/{key}", "/admin/downloads/{key}"):
        api.add_api_route(path, fetch, methods=["GET"], include_in_schema=False)


def _chunks(file: BinaryIO) -> Iterator[bytes]:
    """The open file's bytes, and the file closed at the end (or when the client leaves)."""
    with file:
        while block := file.read(_CHUNK):
            yield block
