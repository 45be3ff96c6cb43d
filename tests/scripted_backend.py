"""A scripted backend for the scheduler's own tests: answers play token scripts, one step each time the test
calls `step()`; no model, no cards, no clock (app/engine/backend.py is the port it plugs into).

It stands in for the backend only where the scheduler is the subject (queue, slots, holds, cancellation,
switches, lost backends: tests/test_scheduler.py). A feature's test never runs on it: what an answer says,
how it is batched and cached, and what a card's death does to llama.cpp are the real engine's, on the demo
model through card agents.

    stage = Stage({"story": Script(("Once", " upon", " a", " time"), read=1)})
    service = EngineService(config, kinds=stage.kinds)  # every backend the supervisor builds is scripted
    ...; stage.wait_jobs(1); stage.backend.step()       # one step of every answer in a slot
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from app.engine.backend import BackendKind, Down, JobSinks, OnLost, Sink, WorkerLost
from app.engine.counts import Countable
from app.engine.engine_config import EngineConfig
from app.engine.events import Capabilities, Done, EngineError, Event, Failed, GenerationRequest, ModelInfo, Stats, Token
from tests.harness import wait_until


@dataclass(frozen=True)
class Script:
    """What one answer plays: its tokens, what they cost in steps, and how it ends."""

    tokens: tuple[str, ...]
    read: int = 0  # steps spent reading the prompt before the first token
    cost: int = 1  # steps per token
    fail: str | None = None  # after its tokens it ends with Failed(fail, kind="request") instead of Done


class Playing:
    """One job in a slot of the backend: its script, how far it got, whether a cancel came."""

    def __init__(self, script: Script, request: GenerationRequest) -> None:
        self.script = script
        self.budget = min(len(script.tokens), request.max_tokens)
        self.prompt_tokens = sum(len(m.content.split()) for m in request.messages)
        self.steps = 0
        self.sent = 0
        self.cancelled = False

    def advance(self) -> tuple[list[Event], bool]:
        """One step: the events it gives, and whether the job is over."""
        if self.cancelled:
            return [self._done("cancelled")], True
        self.steps += 1
        due = max(0, self.steps - self.script.read) // self.script.cost
        events: list[Event] = []
        if due > self.sent and self.sent < self.budget:
            events.append(Token(self.script.tokens[self.sent]))
            self.sent += 1
        if self.sent < self.budget or self.steps <= self.script.read:
            return events, False
        if self.script.fail:
            return [*events, Failed(self.script.fail, kind="request")], True
        return [*events, self._done("length" if self.budget < len(self.script.tokens) else "stop")], True

    def _done(self, reason: Any) -> Done:
        return Done(Stats(self.prompt_tokens, 0, self.sent, 0.0, 0.0, 0.0, 0.0, reason))


class ScriptedBackend:
    """A Backend (app/engine/backend.py) whose answers move only when the test calls `step()`.

    Misbehaviour on request: `ignore_cancel` (cancels are heard, not honoured), `hung` (steps give nothing),
    `die()` (a worker crash: `on_lost` with the running jobs), `stop_gate` (`stop()` waits for it, as a
    worker's join does). A stopped backend still plays when stepped, like a worker's last words in the pipe:
    whether they reach anyone is the scheduler's business."""

    def __init__(self, stage: Stage, config: EngineConfig, on_lost: OnLost) -> None:
        self.stage, self.config, self._on_lost = stage, config, on_lost
        self._lock = threading.Lock()
        self._playing: dict[int, Playing] = {}
        self._sinks = JobSinks()
        self.submitted: list[int] = []  # every job it was given, in order
        self.cancels: list[int] = []  # every cancel it heard, in order
        self.peak = 0  # the most jobs it held at once
        self.ignore_cancel = False
        self.hung = False
        self.dead = False
        self.stopped = False
        self.stop_gate: threading.Event | None = None

    def start(self) -> ModelInfo:
        if self.config.model_name in self.stage.broken:
            raise EngineError(f"{self.config.model_name} is scripted not to load")
        name, caps = self.config.model_name, self.stage.capabilities
        return ModelInfo(name, "scripted", 1, self.config.n_ctx, (), backend="scripted", capabilities=caps)

    def submit(self, job_id: int, request: GenerationRequest, sink: Sink) -> None:
        if self.dead:
            raise WorkerLost("the scripted backend is dead")
        self._sinks.add(job_id, sink)
        with self._lock:
            self._playing[job_id] = Playing(self.stage.script_for(request), request)
            self.submitted.append(job_id)
            self.peak = max(self.peak, len(self._playing))

    def cancel(self, job_id: int) -> None:
        with self._lock:
            self.cancels.append(job_id)
            playing = self._playing.get(job_id)
            if playing is not None and not (self.ignore_cancel or self.hung):
                playing.cancelled = True

    def count(self, items: list[Countable], *, timeout: float) -> list[int]:
        return [len((item if isinstance(item, str) else item.messages[0].content).split()) for item in items]

    def alive(self) -> bool:
        return not self.dead

    def stop(self) -> None:
        if self.stop_gate is not None:
            self.stop_gate.wait(timeout=30)
        self.stopped = True

    # -- what the test does --------------------------------------------------------------------

    def jobs(self) -> list[int]:
        """The jobs in its slots now, in the order they came."""
        with self._lock:
            return list(self._playing)

    def step(self, times: int = 1) -> None:
        """`times` steps of every job it holds (each gives at most one token), events delivered in order."""
        for _ in range(times):
            if self.hung:
                return
            with self._lock:
                playing = list(self._playing.items())
            for job_id, job in playing:
                events, over = job.advance()
                if over:
                    with self._lock:
                        self._playing.pop(job_id, None)
                for event in events:
                    self._sinks.deliver(job_id, event)

    def die(
        self,
        message: str = "the engine worker stopped during an answer",
        card: str | None = None,
        *,
        retry: bool = True,
    ) -> None:
        """As a worker crash (or, `retry` False, a worker ended because it froze): it is dead, and says so with
        the jobs that were running on it."""
        self.dead = True
        with self._lock:
            self._playing.clear()
        self._on_lost(self, WorkerLost(message, card=card, retry=retry), self._sinks.drop_all())


@dataclass
class Stage:
    """What the test controls across every backend the supervisor builds: the scripts, what is down, which
    models do not load, and the backends built so far (the last one is in use)."""

    scripts: dict[str, Script] = field(default_factory=dict)
    down: Down | None = None  # what `first_down` reports: holds the supervisor in "recovering"
    broken: set[str] = field(default_factory=set)  # model names whose load fails
    capabilities: Capabilities = field(default_factory=Capabilities)
    built: list[ScriptedBackend] = field(default_factory=list)

    @property
    def kind(self) -> BackendKind:
        return BackendKind("scripted", build=self._build, first_down=lambda config: self.down, uses_cards=False)

    def kinds(self, config: EngineConfig) -> BackendKind:
        return self.kind

    def _build(self, config: Any, on_lost: OnLost) -> ScriptedBackend:
        backend = ScriptedBackend(self, config, on_lost)
        self.built.append(backend)
        return backend

    def script_for(self, request: GenerationRequest) -> Script:
        """The first user message names the script; any other text is played word by word."""
        text = next(m.content for m in request.messages if m.role == "user")
        return self.scripts.get(text) or Script(tuple(f"{word} " for word in text.split()))

    @property
    def backend(self) -> ScriptedBackend:
        return self.built[-1]

    def wait_jobs(self, *jobs: int, backend: ScriptedBackend | None = None) -> ScriptedBackend:
        """Wait until the backend (the one in use) holds exactly these jobs; returns it."""

        def holds() -> bool:
            return bool(self.built) and (backend or self.backend).jobs() == list(jobs)

        try:
            wait_until(holds, timeout=10, every=0.002)
        except TimeoutError:
            seen = (backend or self.backend).jobs() if self.built else "no backend built"
            raise AssertionError(f"the backend holds {seen}, not {list(jobs)}") from None
        return backend or self.backend
