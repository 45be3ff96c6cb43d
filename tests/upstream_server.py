"""An upstream for the upstream backend's tests: llama-cpp-python's own OpenAI-compatible server (`python -m
llama_cpp.server`, a server nobody here wrote) serving the demo model on loopback, and a proxy in front of
it that offers only what the boards' vendor servers offer (streaming chat completions and the model list).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from app.engine.lifecycle import die_with_parent
from app.settings import DEMO_MODEL
from tests.harness import get_json


class LlamaCppServer:
    """llama_cpp.server with the demo model as `demo`, restartable on the same port (loopback only)."""

    def __init__(self, port: int, log_dir: Path, *, n_ctx: int = 2048) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.n_ctx = n_ctx
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 120.0) -> None:
        self.starts += 1
        log = open(self.log_dir / f"llama-server-{self.starts}.log", "wb")  # noqa: SIM115
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(DEMO_MODEL), "--model_alias", "demo",
            "--chat_format", "gemma", "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.n_ctx), "--n_threads", "1",
        ]  # fmt: skip
        # dies with the test run, however it ends (a server left behind would hold the port for the next run)
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}; see {log.name}")
            try:
                get_json(f"{self.url}/models", timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"llama_cpp.server did not answer within {timeout:.0f} s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class ChatOnlyProxy:
    """A loopback proxy that passes streaming `POST /v1/chat/completions` and `GET /v1/models` through, drops
    the request fields such a server does not know (`response_format`, `stream_options`), and answers 404
    to every other route: what the boards' vendor server (RKLLM's OpenAI front) offers. For each stream it
    notes how many chunks it passed and whether the client (Quartet) closed it before its end."""

    def __init__(self, port: int, upstream_port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/v1"
        self.upstream_port = upstream_port
        self.refused: list[str] = []
        self.streams: list[tuple[int, bool]] = []  # (chunks passed, closed by the client before the end)
        self.asked: list[tuple[str, float | None]] = []  # each chat stream's last message and temperature
        # (text, n): the next n streams whose last message holds `text` end where their first words would come,
        # with none, as from a server that answered an empty message
        self.blank: tuple[str, int] = ("", 0)
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="chat-only-proxy", daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path != "/v1/models":
                    return self._refuse()
                self._forward("GET", None)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path != "/v1/chat/completions" or not body.get("stream"):
                    return self._refuse()
                body.pop("response_format", None)
                body.pop("stream_options", None)
                prompt = str((body.get("messages") or [{}])[-1].get("content", ""))
                proxy.asked.append((prompt, body.get("temperature")))
                text, left = proxy.blank
                blank = bool(text) and text in prompt and left > 0
                if blank:
                    proxy.blank = (text, left - 1)
                self._forward("POST", json.dumps(body).encode(), blank=blank)

            def _refuse(self) -> None:
                proxy.refused.append(f"{self.command} {self.path}")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _forward(self, method: str, body: bytes | None, *, blank: bool = False) -> None:
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                headers = {"Content-Type": "application/json"} if body else {}
                upstream.request(method, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
                self.send_header("Connection", "close")
                self.end_headers()
                passed, left = 0, False
                while line := answer.readline():
                    ended = False
                    if blank:
                        line, ended = _without_words(line)
                    try:
                        self.wfile.write(line)
                        self.wfile.flush()
                    except OSError:  # the client closed the stream: so does the proxy, upstream
                        left = True
                        break
                    passed += line.startswith(b"data:")
                    if ended:
                        break
                proxy.streams.append((passed, left))
                upstream.close()

        return Handler


def _without_words(line: bytes) -> tuple[bytes, bool]:
    """A chat stream's line as a server that answered an empty message sends it: the first line with words
    becomes the stream's end (no words, finish "stop", then [DONE]), and True says the stream is over."""
    if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
        return line, False
    chunk = json.loads(line[5:])
    said = [choice for choice in chunk.get("choices") or [] if (choice.get("delta") or {}).get("content")]
    if not said:
        return line, False
    for choice in said:
        choice["delta"], choice["finish_reason"] = {}, "stop"
    end = line[len(line.rstrip(b"\r\n")) :] or b"\n"
    return b"data: " + json.dumps(chunk).encode() + end + end + b"data: [DONE]" + end + end, True
