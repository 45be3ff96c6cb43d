"""A script put at the top of each page's <head>, before Gradio's own modules run (assets/frames.js).

Gradio's `head` and `js` reach the page only after its modules have loaded, too late for what frames.js
changes: Gradio's status tracker keeps its own reference to `requestAnimationFrame`, taken when its module
loads. So each HTML page this app serves gets the script inline as the first thing in its <head> (the
Content-Security-Policy allows inline scripts: Gradio's pages need them)."""

from __future__ import annotations

from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_HEAD = b"<head>"


class EarlyScript:
    """ASGI middleware: the uncompressed text/html answer to a GET of one of `pages` (the mounted pages' own
    paths, never a file the app serves) has `script` (a JavaScript function of no arguments, as in assets/)
    run at the top of its <head>."""

    def __init__(self, app: ASGIApp, script: Path, pages: frozenset[str]) -> None:
        self.app = app
        self.pages = pages
        self.tag = f"<script>({script.read_text(encoding='utf-8').strip()})();</script>".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET" or scope.get("path") not in self.pages:
            await self.app(scope, receive, send)
            return
        held: Message | None = None  # an HTML response's start, sent once its body is whole
        parts: list[bytes] = []

        async def rewrite(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("text/html") and "content-encoding" not in headers:
                    held = message
                    return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(parts).replace(_HEAD, _HEAD + self.tag, 1)
            MutableHeaders(scope=held)["content-length"] = str(len(body))
            await send(held)
            await send({"type": "http.response.body", "body": body, "more_body": False})

        await self.app(scope, receive, rewrite)
