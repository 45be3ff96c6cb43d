"""Two homes for the Engine behind one interface: a supervised worker process, or the app process.

ggml-rpc aborts its host process when a card dies mid-answer (DESIGN.md fact 5), so by default
llama.cpp lives in a worker process: the app loses one answer, not itself. The in-process backend
is for debugging; there, a dead card takes the whole app down.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any, Protocol

from app.engine import cards
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, ModelInfo

_LOAD_TIMEOUT_S = 600.0


class WorkerLost(EngineError):
    """The worker process died (a card failed, or it was killed); the engine must be rebuilt."""


class Backend(Protocol):
    def start(self) -> ModelInfo: ...
    def generate(self, job_id: int, request: GenerationRequest) -> Iterator[Event]: ...
    def cancel(self, job_id: int) -> None: ...
    def alive(self) -> bool: ...
    def stop(self) -> None: ...


class InProcessBackend:
    def __init__(self, config: Any) -> None:
        from app.engine.engine import Engine

        self._engine = Engine(config)
        self._cancel_id = -1
        self._lock = threading.Lock()

    def start(self) -> ModelInfo:
        return self._engine.load()

    def generate(self, job_id: int, request: GenerationRequest) -> Iterator[Event]:
        try:
            yield from self._engine.generate(request, cancelled=lambda: self._cancel_id == job_id)
        except EngineError as err:
            yield err.failed()

    def cancel(self, job_id: int) -> None:
        self._cancel_id = job_id

    def alive(self) -> bool:
        return True

    def stop(self) -> None:
        self._engine.close()


class WorkerBackend:
    def __init__(self, config: Any) -> None:
        self._config = config
        ctx = multiprocessing.get_context("spawn")
        self._cancel_id = ctx.Value("q", -1, lock=False)
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(
            target=_worker_main,
            args=(child, config, self._cancel_id),
            name="quartet-engine",
            daemon=True,
        )
        self._child = child

    def start(self) -> ModelInfo:
        self._process.start()
        self._child.close()  # so that the worker's death reads as EOF here
        if not self._conn.poll(_LOAD_TIMEOUT_S):
            self.stop()
            raise EngineError(f"the model did not load within {_LOAD_TIMEOUT_S:.0f} s")
        try:
            kind, *rest = self._conn.recv()
        except EOFError:
            raise self._lost("while loading the model") from None
        if kind == "load_failed":
            self.stop()
            raise EngineError(rest[0], card=rest[1])
        info: ModelInfo = rest[0]
        return info

    def generate(self, job_id: int, request: GenerationRequest) -> Iterator[Event]:
        """The answer's events; a step that takes longer than the config's step timeout (a card that
        stopped answering without dying: ggml-rpc then waits in a socket read forever) ends the worker."""
        limit = self._config.step_timeout_s
        try:
            self._conn.send(("generate", job_id, request))
            while True:
                if not self._conn.poll(limit):
                    raise self._hung(limit)
                _, got_id, event = self._conn.recv()
                if got_id != job_id or event is None:  # None: a step finished (the worker is alive)
                    continue
                yield event
                if isinstance(event, Done | Failed):
                    return
        except (EOFError, OSError):
            raise self._lost("during the answer") from None

    def _hung(self, limit: float) -> WorkerLost:
        """No step finished within `limit`: end the worker, and name the card that holds the step
        (a stopped card's health endpoint does not answer either)."""
        self._process.kill()
        self._process.join(timeout=5)
        down = cards.first_card_down(self._config.cards, health_offset=self._config.health_offset)
        if down:
            index, endpoint, reason = down
            return WorkerLost(
                f"card {index} ({endpoint}) stopped responding during the answer (no step finished in "
                f"{limit:g} s; {reason}); the engine restarts by itself once every card answers again",
                card=endpoint,
            )
        return WorkerLost(f"the engine made no progress for {limit:g} s (every card answers); restarting it")

    def _lost(self, when: str) -> WorkerLost:
        self._process.join(timeout=2)
        code = self._process.exitcode
        down = cards.first_card_down(self._config.cards, health_offset=self._config.health_offset)
        if down:
            index, endpoint, reason = down
            return WorkerLost(
                f"card {index} ({endpoint}) stopped answering {when} ({reason}); the engine restarts "
                "by itself once every card answers again",
                card=endpoint,
            )
        return WorkerLost(f"the engine worker stopped {when} (exit code {code}); restarting it")

    def cancel(self, job_id: int) -> None:
        self._cancel_id.value = job_id

    def alive(self) -> bool:
        return self._process.is_alive()

    def stop(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(("close",))
            self._process.join(timeout=3)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=3)
        self._conn.close()


def _worker_main(conn: Connection, config: Any, cancel_id: Any) -> None:
    # No PR_SET_PDEATHSIG here: Linux ties it to the *thread* that spawned us, which is a
    # short-lived loader thread. The pipe ends instead: when the app dies, recv/send fail and
    # the worker leaves.
    os.environ["GGML_NO_BACKTRACE"] = "1"  # a dead card aborts us: one line, not a gdb session
    from app.engine.engine import Engine

    engine = Engine(config)
    try:
        info = engine.load()
    except EngineError as err:
        conn.send(("load_failed", str(err), err.card))  # kind follows from card
        return
    conn.send(("loaded", info))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            break
        if message[0] == "close":
            break
        _, job_id, request = message
        beat = _Heartbeat(conn, job_id)
        try:
            for event in engine.generate(request, cancelled=lambda: cancel_id.value == job_id, on_step=beat):  # noqa: B023
                beat.sent()
                conn.send(("event", job_id, event))
        except EngineError as err:
            conn.send(("event", job_id, err.failed()))
        except (BrokenPipeError, EOFError):
            break
    engine.close()


class _Heartbeat:
    """Tells the app a step finished when nothing else has been sent for a while (a long prompt, or
    tokens the stop-string scanner holds back), so that only a step that really hangs looks hung."""

    EVERY_S = 0.5

    def __init__(self, conn: Connection, job_id: int) -> None:
        self.conn, self.job_id = conn, job_id
        self.last = time.monotonic()

    def sent(self) -> None:
        self.last = time.monotonic()

    def __call__(self) -> None:
        if time.monotonic() - self.last >= self.EVERY_S:
            self.conn.send(("event", self.job_id, None))
            self.last = time.monotonic()
