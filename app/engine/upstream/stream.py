"""One streamed answer from an upstream, read within bounds, and a way to end it from another thread.

A stream is read as bytes and cut into lines here, not by httpx: its line reader keeps a line until its end
comes, so one endless line from an upstream would grow the app without bound. A line longer than
`MAX_LINE_BYTES` ends the answer naming the upstream. Lines that are not what an OpenAI stream sends are
skipped and counted (the answer logs them once, with the first). `Hangup` ends a request at once, also
while the upstream sends nothing: it shuts its socket down, which wakes the read blocked on it.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from app.engine.events import EngineError

MAX_LINE_BYTES = 1 << 20  # an OpenAI stream's line is one chunk of a few tokens: a few hundred bytes
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")  # what a server-sent event's line may start with


class UpstreamError(EngineError):
    """The upstream did not answer as asked: down, slow, or an error status (named, without its key)."""


class Hangup:
    """Ends one streamed request from any thread: the first reason given is kept, and the request's socket
    (once it is connected, or as soon as it is) is shut down, so a read waiting on a silent upstream returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.reason: str | None = None

    def end(self, reason: str) -> None:
        with self._lock:
            self.reason = self.reason or reason
            if self._socket is not None:
                _shut(self._socket)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: the request's socket, when its connection (or its TLS) is made."""
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        found = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(found, socket.socket):
            with self._lock:
                self._socket = found
                if self.reason is not None:
                    _shut(found)

    def release(self) -> None:
        """The request is over: its socket is closed by httpx from now on, never shut down from here."""
        with self._lock:
            self._socket = None


@contextmanager
def deadline(hangup: Hangup, seconds: float, reason: str) -> Iterator[None]:
    """Within this block, `hangup` ends its request with `reason` once `seconds` have passed."""
    timer = threading.Timer(seconds, hangup.end, (reason,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):  # already closed; under TLS too, the plain socket's shutdown: the other end sees it
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class Stream:
    """The chunks of a streamed answer (`data:` lines as JSON objects), until `[DONE]` or the end. `done`
    says whether `[DONE]` came; `skipped` counts the lines that were not an OpenAI stream's, `first_skipped`
    shows the first of them (cut short)."""

    def __init__(self, pieces: Iterable[bytes], name: str) -> None:
        self._pieces = pieces
        self._name = name
        self.done = False
        self.skipped = 0
        self.first_skipped = ""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for line in lines(self._pieces, name=self._name):
            chunk = self._chunk(line)
            if self.done:
                return
            if chunk is not None:
                yield chunk

    def _chunk(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip() or (line.startswith(_SSE_FIELDS) and not line.startswith(b"data:")):
            return None  # an event's end, a comment (a keep-alive), another field of the event
        data = line[5:].strip() if line.startswith(b"data:") else None
        if data == b"[DONE]":
            self.done = True
            return None
        try:
            chunk = json.loads(data) if data is not None else None
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            self._skip(line)
            return None
        if "error" in chunk:
            raise UpstreamError(f"{self._name} failed the answer: {message(chunk['error'])}")
        return chunk

    def _skip(self, line: bytes) -> None:
        self.skipped += 1
        if self.skipped == 1:
            self.first_skipped = line[:80].decode("utf-8", "replace")


def lines(pieces: Iterable[bytes], *, name: str, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a byte stream (without their ends), never holding more than `limit` bytes of one: a
    longer line fails, naming the upstream."""
    held = bytearray()
    for piece in pieces:
        held += piece
        *whole, rest = held.split(b"\n")
        for line in whole:
            if len(line) > limit:
                raise _too_long(name, limit)
            yield bytes(line).rstrip(b"\r")
        if len(rest) > limit:
            raise _too_long(name, limit)
        held = bytearray(rest)
    if held:
        yield bytes(held).rstrip(b"\r")


def _too_long(name: str, limit: int) -> UpstreamError:
    return UpstreamError(f"{name} sent a line of more than {limit // 1024} KiB in its stream: the answer was ended")


def delta_text(chunk: dict[str, Any]) -> str:
    """The text a chat or completion chunk adds."""
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return text if isinstance(text, str) else ""


def finish_of(chunk: dict[str, Any]) -> str | None:
    choices = chunk.get("choices") or []
    first = choices[0] if isinstance(choices, list) and choices else None
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return reason if isinstance(reason, str) else None


def message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or error)[:300]
    return str(error)[:300]
