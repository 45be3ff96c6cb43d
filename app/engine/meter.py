"""Counting what the engine does: a live tokens/s, running totals and prefix reuse, safe across threads."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass


class RateMeter:
    """Events per second over the last `window` seconds."""

    def __init__(self, window: float = 2.0) -> None:
        self.window = window
        self._ticks: deque[float] = deque()
        self._lock = threading.Lock()

    def tick(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._ticks.append(now)
            self._trim(now)

    def rate(self) -> float:
        now = time.monotonic()
        with self._lock:
            self._trim(now)
            if len(self._ticks) < 2:
                return 0.0
            span = max(now - self._ticks[0], 1e-6)
            return len(self._ticks) / max(span, min(self.window, 1.0))

    def _trim(self, now: float) -> None:
        while self._ticks and now - self._ticks[0] > self.window:
            self._ticks.popleft()


class Counters:
    """Monotonic totals for /metrics: requests, tokens generated, prompt tokens, errors, cancellations, and the
    speculative decoding of ended answers (tokens drafted, drafted tokens kept, steps that gave tokens)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = {"requests": 0, "tokens": 0, "prompt_tokens": 0, "errors": 0, "cancelled": 0}
        self._values |= {"drafted_tokens": 0, "accepted_tokens": 0, "decode_steps": 0}

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._values[name] += amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)


@dataclass(frozen=True)
class CacheUse:
    """How one answer found its prompt's KV, and the host KV cache after it was placed (worker → app)."""

    cached: int  # prompt tokens whose KV was reused: held in the slot, or restored from host memory
    restored: bool  # they came back from host memory
    host_bytes: int
    host_entries: int


class CacheMeter:
    """Prefix reuse since the app started, and the host KV cache as the engine last reported it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = {
            "prefix_hits": 0,
            "host_restores": 0,
            "cached_tokens_total": 0,
            "kv_host_bytes": 0,
            "kv_host_entries": 0,
        }

    def note(self, use: CacheUse) -> None:
        with self._lock:
            v = self._values
            v["host_restores"] += use.restored
            v["prefix_hits"] += bool(use.cached) and not use.restored
            v["cached_tokens_total"] += use.cached
            v["kv_host_bytes"], v["kv_host_entries"] = use.host_bytes, use.host_entries

    def emptied(self) -> None:
        """A new backend starts with an empty host KV cache (the old one's went with its process)."""
        with self._lock:
            self._values["kv_host_bytes"] = self._values["kv_host_entries"] = 0

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)
