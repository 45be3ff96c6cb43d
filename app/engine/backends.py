"""Two homes for the Engine behind one interface: a supervised worker process, or the app process.

ggml-rpc aborts its host process when a card dies mid-answer (docs/design.md, engine fact 5), so by default
llama.cpp lives in a worker process: the app loses one answer, not itself. The in-process backend
is for debugging; there, a dead card takes the whole app down.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
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
        try:
            self._conn.send(("generate", job_id, request))
            while True:
                _, got_id, event = self._conn.recv()
                if got_id != job_id:
                    continue
                yield event
                if isinstance(event, Done | Failed):
                    return
        except (EOFError, OSError):
            raise self._lost("during the answer") from None

    def _lost(self, when: str) -> WorkerLost:
        self._process.join(timeout=2)
        code = self._process.exitcode
        down = cards.first_card_down(self._config.cards)
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
        try:
            for event in engine.generate(request, cancelled=lambda: cancel_id.value == job_id):  # noqa: B023
                conn.send(("event", job_id, event))
        except EngineError as err:
            conn.send(("event", job_id, err.failed()))
        except (BrokenPipeError, EOFError):
            break
    engine.close()
