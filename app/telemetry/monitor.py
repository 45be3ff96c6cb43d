"""Polls every card agent's /health about once a second, off the generation path.

A card whose health endpoint refuses or fails is "down" with the reason; one that accepts the request
but sends no answer in time (a stopped or wedged card: the kernel still completes the handshake) is
"not-responding" (shown "not responding"). Either way the time it was last seen and its last good
reading are kept so the panels can show what was there.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class CardSample:
    index: int
    endpoint: str
    state: Literal["up", "down", "not-responding", "unknown"]
    reason: str | None = None
    last_seen: float | None = None  # wall-clock seconds
    health: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "endpoint": self.endpoint,
            "state": self.state,
            "reason": self.reason,
            "last_seen": self.last_seen,
            "health": self.health,
        }


def read_health(url: str, timeout: float) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


def _reason(err: Exception) -> str:
    if isinstance(err, urllib.error.URLError):
        err = err.reason if isinstance(err.reason, Exception) else err
    if isinstance(err, ConnectionRefusedError):
        return "refused"
    if isinstance(err, TimeoutError):
        return "timeout"
    if isinstance(err, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return "reset"  # the card went away in the middle of an answer to us (killed, rebooted)
    return str(err) or type(err).__name__


class CardMonitor:
    def __init__(
        self,
        cards: Callable[[], Sequence[str]],
        health_url: Callable[[str], str],
        *,
        every_s: float,
        timeout_s: float,
        on_down: Callable[[int, str, str], None] | None = None,
    ) -> None:
        self._health_url = health_url
        self._source = cards  # the engine's card list, read at every poll: the monitor follows it
        self._cards: list[str] = []
        self._urls: list[str] = []
        self._samples: list[CardSample] = []
        self._every = every_s
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._follow()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="card-poll")
        self._thread: threading.Thread | None = None
        self._on_down = on_down
        self.listeners: list[Callable[[list[CardSample]], None]] = []  # called after every poll

    def start(self) -> None:
        self.poll()
        self._thread = threading.Thread(target=self._run, name="card-monitor", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.poll()

    def _follow(self) -> None:
        """Take up the engine's card list if it changed (the admin moved the model); new cards start unknown."""
        cards = list(self._source())
        with self._lock:
            if cards == self._cards:
                return
            self._cards = cards
            self._urls = [self._health_url(card) for card in cards]
            self._samples = [CardSample(i, card, "unknown") for i, card in enumerate(cards)]

    @property
    def cards(self) -> list[str]:
        with self._lock:
            return list(self._cards)

    def poll(self) -> list[CardSample]:
        self._follow()
        with self._lock:
            cards, urls, previous = list(self._cards), list(self._urls), list(self._samples)
        results = list(self._pool.map(self._probe, cards, urls, previous))
        with self._lock:
            if self._cards != cards:  # changed while polling: this round is stale
                return list(self._samples)
            self._samples = results
        for old, new in zip(previous, results, strict=True):
            if new.state == "down" and old.state != "down" and self._on_down:
                self._on_down(new.index, new.endpoint, new.reason or "no answer")
        for listener in self.listeners:
            listener(results)
        return results

    def _probe(self, endpoint: str, url: str, previous: CardSample) -> CardSample:
        try:
            health = read_health(url, self._timeout)
        except Exception as err:  # any failure means the card is not serving
            reason = _reason(err)
            state: Literal["down", "not-responding"] = "not-responding" if reason == "timeout" else "down"
            return CardSample(previous.index, endpoint, state, reason, previous.last_seen, previous.health)
        return CardSample(previous.index, endpoint, "up", None, time.time(), health)

    def snapshot(self) -> list[CardSample]:
        with self._lock:
            return list(self._samples)
