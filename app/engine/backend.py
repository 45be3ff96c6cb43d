"""The engine's port: what a backend is to the scheduler, what it says it can do, and how one is built.

A backend runs answers (`submit`, `cancel`), counts tokens, and says what it can do (`Capabilities`) in
the `ModelInfo` its `start` returns. Two are built into the appliance: the four cards (llama.cpp's RPC
split, app/engine/llama/backend.py) and an OpenAI-compatible upstream (app/engine/upstream/). The scheduler
(service.py) and the supervisor (supervisor.py) know nothing else of them: the composition root hands
the supervisor a `BackendKind` (how to build one, and what must answer before it can), as ollama's
scheduler is handed its runner constructor, so the scheduler's own tests run on a scripted backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.engine.counts import Countable
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, ModelInfo
from app.engine.meter import CacheUse

Sink = Callable[[Event | CacheUse], None]  # an answer's events, and how its prompt's KV was found


class WorkerLost(EngineError):
    """The backend died or stopped answering (a card failed, the worker was killed, the upstream went
    away); the engine must be rebuilt. `retry`: an answer it held that gave no token yet may run again on
    the rebuilt one (not when the engine froze with every card answering: that answer may be the cause)."""

    def __init__(self, message: str, *, card: str | None = None, retry: bool = True) -> None:
        super().__init__(message, card=card)
        self.retry = retry


# (the backend that was lost, why, the jobs that were running on it)
OnLost = Callable[[Any, WorkerLost, list[int]], None]


class Backend(Protocol):
    def start(self) -> ModelInfo: ...
    def submit(self, job_id: int, request: GenerationRequest, sink: Sink) -> None: ...
    def cancel(self, job_id: int) -> None: ...
    def count(self, items: list[Countable], *, timeout: float) -> list[int]: ...
    def alive(self) -> bool: ...
    def stop(self) -> None: ...


@dataclass(frozen=True)
class Down:
    """What must answer before a backend can be built, and does not: a card, or the upstream."""

    name: str  # "card 2 (127.0.0.1:30254)", "the upstream at http://…/v1"
    endpoint: str  # what the status names as down (a card's endpoint, the upstream's URL)
    reason: str

    def message(self) -> str:
        """ "card 1 (host:port) is not responding" / "the upstream at … is down (connection refused)"."""
        return f"{self.name} is {'not responding' if self.reason == 'not responding' else f'down ({self.reason})'}"


@dataclass(frozen=True)
class BackendKind:
    """How the supervisor builds a backend for a configuration, and what it waits for first."""

    name: str  # "cards", "upstream", "scripted"
    build: Callable[[Any, OnLost], Backend]  # (EngineConfig, on_lost) → a backend not yet started
    first_down: Callable[[Any], Down | None]  # (EngineConfig) → what does not answer yet, if anything
    uses_cards: bool = True  # a card the monitor finds down means this backend must be rebuilt


class JobSinks:
    """Where each running job's events go; the job leaves when its Done or Failed has gone."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._sinks: dict[int, Sink] = {}

    def add(self, job_id: int, sink: Sink) -> None:
        with self.lock:
            self._sinks[job_id] = sink

    def __contains__(self, job_id: int) -> bool:
        with self.lock:
            return job_id in self._sinks

    def __bool__(self) -> bool:
        with self.lock:
            return bool(self._sinks)

    def deliver(self, job_id: int, event: Event | CacheUse) -> None:
        with self.lock:
            sink = self._sinks.get(job_id)
            if isinstance(event, Done | Failed):
                self._sinks.pop(job_id, None)
        if sink is not None:
            sink(event)

    def drop_all(self) -> list[int]:
        with self.lock:
            jobs = list(self._sinks)
            self._sinks.clear()
            return jobs
