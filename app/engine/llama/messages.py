"""What the app and the engine worker say to each other over the pipe (or the in-process inbox): frozen
dataclasses, matched by type — no tuples dispatched on their first item."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.counts import Countable
from app.engine.events import Event, GenerationRequest, ModelInfo
from app.engine.meter import CacheUse

# -- to the engine ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Generate:
    job_id: int
    request: GenerationRequest


@dataclass(frozen=True)
class Cancel:
    job_id: int


@dataclass(frozen=True)
class Count:
    """Token counts, answered between two steps: `call` is the caller's id (a pipe) or its Call (in process)."""

    call: Any
    items: list[Countable]


@dataclass(frozen=True)
class Close:
    pass


ToEngine = Generate | Cancel | Count | Close

# -- from the worker --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loaded:
    info: ModelInfo


@dataclass(frozen=True)
class LoadFailed:
    message: str
    card: str | None


@dataclass(frozen=True)
class Counted:
    call: int
    counts: Any  # list[int], or the EngineError to raise


@dataclass(frozen=True)
class Emitted:
    """A step's events, each with its answer's job id (none: a step ended, the worker lives)."""

    events: list[tuple[int, Event | CacheUse]]


FromWorker = Loaded | LoadFailed | Counted | Emitted
