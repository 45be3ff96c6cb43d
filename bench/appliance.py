"""The appliance on loopback for the benches that go through its HTTP API (bench/api.py, concurrency.py,
pipeline.py): four card agents, the app as its own process, and one streaming `openai` client.

Not a bench itself: the scripts beside it import it (`import appliance`, bench/ first on sys.path).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai

from app.settings import Settings, env_name
from launcher.cluster import CardProcesses


@dataclass
class Streamed:
    """One streamed answer as its client saw it (perf_counter times)."""

    started: float
    first: float | None = None  # the first piece of text
    last: float | None = None  # the last piece of text
    tokens: int = 0  # completion tokens, as the usage chunk counts them
    prompt_tokens: int = 0

    @property
    def ttft(self) -> float:
        assert self.first is not None, "no text came"
        return self.first - self.started


def stream(url: str, text: str, max_tokens: int, *, started: float | None = None) -> Streamed:
    """Stream one answer to `text` through /v1/chat/completions (temperature 0), timing its pieces; `started`
    is when the client's clock starts (default: now; several clients at once share one)."""
    api = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)
    seen = Streamed(started if started is not None else time.perf_counter())
    chunks = api.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": text}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in chunks:
        if chunk.usage:
            seen.tokens, seen.prompt_tokens = chunk.usage.completion_tokens, chunk.usage.prompt_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            seen.last = time.perf_counter()
            seen.first = seen.first or seen.last
    return seen


@contextmanager
def card_agents(
    first_port: int, work: Path, *, threads: int | None = None, last_threads: int | None = None
) -> Iterator[CardProcesses]:
    """Four card agents on loopback RPC ports from `first_port` (health +1000): `threads` CPU threads each,
    `last_threads` for the last (None: the appliance's `[local_cards]` defaults)."""
    given = {"threads": threads, "last_threads": last_threads}
    settings = Settings(
        engine={"cards": [f"127.0.0.1:{first_port + i}" for i in range(4)]},
        local_cards={"cache_dir": work / "cache", **{k: v for k, v in given.items() if v is not None}},
    )
    cards = CardProcesses(settings, log_dir=work)
    cards.start_all()
    try:
        yield cards
    finally:
        cards.stop_all()


@contextmanager
def app(cards: list[str], work: Path, port: int = 0, settings: dict[str, str] | None = None) -> Iterator[str]:
    """The app on `cards`, ready, at the URL it yields (port 0: a free one); `settings` are more settings
    (`section.name` → value, passed as their environment variables). Stopped on the way out."""
    port = port or _free_port()
    env = {
        **os.environ,
        "QUARTET_WEB__PORT": str(port),
        "QUARTET_DATA_DIR": str(work / "var"),
        "QUARTET_ENGINE__CARDS": json.dumps(cards),
        "QUARTET_ENGINE__TEMPERATURE": "0",
        "QUARTET_KNOWLEDGE__DIR": str(work / "kb"),
        **{env_name(name): value for name, value in (settings or {}).items()},
    }
    with open(work / "app.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--die-with-parent"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, work / "app.log")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/health", timeout=2).json().get("engine") == "ready":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the app did not become ready; see {log}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
