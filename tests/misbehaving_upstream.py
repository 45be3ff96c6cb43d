"""A misbehaving OpenAI-compatible upstream, on loopback, for the upstream backend's bounds: a fake, named for what
it is. Real servers misbehave so when they are broken or hostile; this one does it on purpose, one way each.

`GET /v1/models` lists `fake`; a probe (a request with `response_format`) gets a short honest answer; every other
streamed chat answer misbehaves as the fake was told (`Misbehaviour`). Each answer it begins is an `Served`, which
notes what it sent and whether the client (Quartet) closed the connection before the fake was done with it.
"""

from __future__ import annotations

import gzip
import json
import select
import socket
import struct
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.harness import free_port

Misbehaviour = Literal[
    "polite",  # five words, finish "stop", [DONE]: what a server should do
    "ignores_max_tokens",  # words for ever, never a finish
    "keep_alives",  # SSE comments for ever, never a word
    "empty_deltas",  # chunks with an empty delta for ever
    "endless_line",  # one `data:` line that never ends
    "huge_token",  # one chunk whose "token" is 10 MB, then a finish
    "big_tokens",  # "tokens" of 100 kB each (lines within the bound), for ever
    "malformed",  # three words among 200 lines that are not JSON, then a finish
    "cut",  # one word, then the connection closed: no finish, no [DONE]
    "reset",  # one word, then the connection reset
    "dies",  # one word, then the whole server gone (its process killed)
    "endless_error",  # status 500 with a body that never ends
    "compressed",  # its stream gzipped, though asked for none (unpacked, one piece could be any size)
    "silent",  # the answer's headers, then nothing
    "mute",  # not even headers
]
WORDS = ("one ", "two ", "three ", "four ", "five ")
GIVE_UP_S = 30.0  # an endless answer nobody closes ends here, so a failing test cannot hang the run


@dataclass
class Served:
    """One answer the fake began: what it was asked, how much it sent, and whether its client left first."""

    asked: dict[str, Any]
    sent: int = 0  # bytes of the answer's body written
    left: threading.Event = field(default_factory=threading.Event)  # the client closed the connection first


class MisbehavingUpstream:
    def __init__(self, misbehaviour: Misbehaviour) -> None:
        self.misbehaviour = misbehaviour
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/v1"
        self.served: list[Served] = []
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False  # `die` closes it from a handler's thread
        serve = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="misbehaving-upstream")
        serve.daemon = True
        serve.start()

    def close(self) -> None:
        self._closing.set()
        if self._server.socket.fileno() != -1:
            self._server.shutdown()
            self._server.server_close()

    def die(self) -> None:
        """Stop listening, as a killed server does (from a handler's thread: serve_forever runs elsewhere)."""
        self._server.shutdown()
        self._server.server_close()

    def misbehave(self, handler: BaseHTTPRequestHandler, served: Served) -> None:
        answer = _Answer(handler, served, self._closing)
        getattr(answer, self.misbehaviour)()
        if self.misbehaviour == "dies":
            self.die()
        answer.finish(reset=self.misbehaviour == "reset")


class _Answer:
    """Writes one answer's body (close-delimited, as HTTP/1.0 and many small servers send a stream)."""

    def __init__(self, handler: BaseHTTPRequestHandler, served: Served, closing: threading.Event) -> None:
        self.handler, self.served, self.closing = handler, served, closing
        self.conn: socket.socket = handler.connection

    def write(self, data: bytes) -> bool:
        """False once the client has gone (it closed the connection) or the fake is closing."""
        if self.closing.is_set() or self.gone():
            return False
        try:
            self.handler.wfile.write(data)
            self.handler.wfile.flush()
        except OSError:
            self.served.left.set()
            return False
        self.served.sent += len(data)
        return True

    def gone(self) -> bool:
        """The client closed its end: its request was read whole, so anything readable now is the close."""
        try:
            readable, _, _ = select.select([self.conn], [], [], 0)
            if readable and not self.conn.recv(1, socket.MSG_PEEK):
                self.served.left.set()
        except OSError:
            self.served.left.set()
        return self.served.left.is_set()

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> bool:
        body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return self.write(b"data: " + json.dumps(body).encode() + b"\n\n")

    def for_ever(self, data: bytes, every_s: float = 0.0) -> None:
        waited = 0.0
        while waited < GIVE_UP_S and self.write(data):
            if every_s and self.closing.wait(every_s):
                return
            waited += every_s or 0.0001

    def until_gone(self) -> None:
        """Send nothing, until the client leaves (or the fake closes)."""
        for _ in range(int(GIVE_UP_S / 0.02)):
            if self.gone() or self.closing.wait(0.02):
                return

    def finish(self, *, reset: bool = False) -> None:
        if reset:  # SO_LINGER 0: the close sends RST, not FIN
            self.conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.handler.close_connection = True

    def end(self) -> None:
        self.chunk({}, "stop")
        self.write(b"data: [DONE]\n\n")

    # -- the misbehaviours -------------------------------------------------------------------------

    def polite(self) -> None:
        self.chunk({"role": "assistant", "content": ""})
        for word in WORDS:
            self.chunk({"content": word})
        self.end()

    def ignores_max_tokens(self) -> None:
        word = b'data: {"choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": null}]}\n\n'
        self.for_ever(word)

    def keep_alives(self) -> None:
        self.for_ever(b": keep-alive\n\n", every_s=0.01)

    def empty_deltas(self) -> None:
        self.for_ever(b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": null}]}\n\n', every_s=0.01)

    def endless_line(self) -> None:
        self.write(b'data: {"choices": [{"index": 0, "delta": {"content": "')
        self.for_ever(b"x" * 65536)

    def huge_token(self) -> None:
        self.chunk({"content": "x" * 10_000_000})
        self.end()

    def big_tokens(self) -> None:
        self.for_ever(b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n' % (b"y" * 100_000))

    def malformed(self) -> None:
        for word in WORDS[:3]:
            self.chunk({"content": word})
            for n in range(100 if word != WORDS[2] else 0):
                self.write(b"data: {not json %d\n\n" % n if n % 2 else b"garbage without a field\n\n")
        self.end()

    def endless_error(self) -> None:
        self.for_ever(b"x" * 65536)

    def compressed(self) -> None:
        self.write(gzip.compress(b"\n" * 65536))
        self.until_gone()

    def cut(self) -> None:
        self.chunk({"content": WORDS[0]})

    reset = dies = cut

    def silent(self) -> None:
        self.until_gone()

    mute = silent


def _handler(fake: MisbehavingUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path != "/v1/models":
                return self._status(404)
            body = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode()
            self._status(200, body)

        def do_POST(self) -> None:
            asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path != "/v1/chat/completions" or not asked.get("stream"):
                return self._status(404)
            served = Served(asked)
            if "response_format" in asked:  # a probe: answered honestly, not counted
                return self._stream(served, "polite")
            fake.served.append(served)
            if fake.misbehaviour == "mute":
                _Answer(self, served, fake._closing).until_gone()
                return
            self._stream(served, fake.misbehaviour)

        def _stream(self, served: Served, misbehaviour: Misbehaviour) -> None:
            self.send_response(500 if misbehaviour == "endless_error" else 200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            if misbehaviour == "compressed":
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            if misbehaviour == "polite":
                _Answer(self, served, fake._closing).polite()
            else:
                fake.misbehave(self, served)

        def _status(self, code: int, body: bytes = b"") -> None:
            with suppress(OSError):  # a client that asked as its backend stopped may be gone
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

    return Handler
