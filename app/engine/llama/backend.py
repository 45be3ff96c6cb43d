"""The four cards as a backend (app/engine/backend.py): llama.cpp in one of two homes behind one interface, a
supervised worker process or the app process.

ggml-rpc aborts its host process when a card dies mid-answer (docs/design.md, engine fact 5), so by default
llama.cpp lives in a worker process: the app loses the answers in flight, not itself. The batching
loop runs there (engine.serve); answers are submitted over the pipe and their events come back
tagged with their job id, each to the sink it was submitted with. The in-process backend runs the
same loop on a thread, for debugging; there, a dead card takes the whole app down, and a hung card
cannot be ended.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import queue
import signal
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from app.engine import cards
from app.engine.backend import Backend, BackendKind, Down, JobSinks, OnLost, Sink, WorkerLost
from app.engine.counts import Call, Countable, counted
from app.engine.events import EngineError, Event, GenerationRequest, ModelInfo
from app.engine.llama.intake import Intake
from app.engine.llama.messages import (
    Cancel,
    Close,
    Count,
    Counted,
    Emitted,
    FromWorker,
    Generate,
    Loaded,
    LoadFailed,
    ToEngine,
)
from app.engine.meter import CacheUse

_LOAD_TIMEOUT_S = 600.0
_READ_S = 0.25  # how often the reader looks at the step clock while no message comes


class InProcessBackend:
    def __init__(self, config: Any, on_lost: OnLost) -> None:
        from app.engine.llama.engine import Engine

        self._engine = Engine(config)
        self._inbox: queue.Queue[ToEngine] = queue.Queue()
        self._sinks = JobSinks()
        self._thread = threading.Thread(target=self._serve, name="engine-batcher", daemon=True)

    def start(self) -> ModelInfo:
        info = self._engine.load()
        self._thread.start()
        return info

    def _serve(self) -> None:
        def count(message: Count) -> None:
            message.call.answer(counted(self._engine, message.items))

        intake = Intake(self._inbox.get, prepare=self._engine.prepare, count=count).start()

        def emit(events: list[tuple[int, Event | CacheUse]]) -> None:
            for job_id, event in events:
                self._sinks.deliver(job_id, event)

        self._engine.serve(intake.next, emit)
        self._engine.close()

    def submit(self, job_id: int, request: GenerationRequest, sink: Sink) -> None:
        self._sinks.add(job_id, sink)
        self._inbox.put(Generate(job_id, request))

    def cancel(self, job_id: int) -> None:
        self._inbox.put(Cancel(job_id))

    def count(self, items: list[Countable], *, timeout: float) -> list[int]:
        call = Call()
        self._inbox.put(Count(call, items))
        return call.result(timeout)

    def alive(self) -> bool:
        return True

    def stop(self) -> None:
        self._inbox.put(Close())
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        else:
            self._engine.close()


class WorkerBackend:
    def __init__(self, config: Any, on_lost: OnLost) -> None:
        self._config = config
        self._on_lost = on_lost
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_worker_main, args=(child, config), name="quartet-engine", daemon=True)
        self._child = child
        self._sinks = JobSinks()
        self._send_lock = threading.Lock()
        self._heard = time.monotonic()  # when the worker last said anything (or a job was sent)
        self._lost: WorkerLost | None = None
        self._stopping = False
        self._calls: dict[int, Call] = {}  # token counts asked of the worker, by call id
        self._call_ids = itertools.count(1)

    def start(self) -> ModelInfo:
        self._process.start()
        self._child.close()  # so that the worker's death reads as EOF here
        if not self._conn.poll(_LOAD_TIMEOUT_S):
            self.stop()
            raise EngineError(f"the model did not load within {_LOAD_TIMEOUT_S:.0f} s")
        try:
            said: FromWorker = self._conn.recv()
        except EOFError:
            raise self._died("while loading the model") from None
        if isinstance(said, LoadFailed):
            self.stop()
            raise EngineError(said.message, card=said.card)
        assert isinstance(said, Loaded), said
        threading.Thread(target=self._read, name="engine-reader", daemon=True).start()
        return said.info

    def submit(self, job_id: int, request: GenerationRequest, sink: Sink) -> None:
        if self._lost is not None:
            raise self._lost
        if not self._sinks:
            self._heard = time.monotonic()  # the step clock runs while there is work
        self._sinks.add(job_id, sink)
        self._send(Generate(job_id, request))

    def cancel(self, job_id: int) -> None:
        if job_id in self._sinks:
            self._send(Cancel(job_id))

    def count(self, items: list[Countable], *, timeout: float) -> list[int]:
        """Counted by the worker between two steps (its tokenizer is the model's)."""
        if self._lost is not None:
            raise self._lost
        call_id, call = next(self._call_ids), Call()
        with self._send_lock:
            self._calls[call_id] = call
        self._send(Count(call_id, items))
        try:
            return call.result(timeout)
        finally:
            with self._send_lock:
                self._calls.pop(call_id, None)

    def _send(self, message: ToEngine) -> None:
        with self._send_lock, contextlib.suppress(OSError):  # a dead worker is found by the reader
            self._conn.send(message)

    def _read(self) -> None:
        """Route the worker's events; end it when a step outlasts the step timeout (a card that stopped
        answering without dying: ggml-rpc then waits in a socket read forever)."""
        limit = self._config.step_timeout_s
        while not self._stopping:
            try:
                if not self._conn.poll(_READ_S):
                    if self._sinks and time.monotonic() - self._heard > limit:
                        self._fail(self._hung(limit))
                        return
                    continue
                said: FromWorker = self._conn.recv()
            except (EOFError, OSError):
                if not self._stopping:
                    self._fail(self._died("during an answer"))
                return
            self._heard = time.monotonic()
            if isinstance(said, Counted):
                with self._send_lock:
                    call = self._calls.get(said.call)
                if call is not None:
                    call.answer(said.counts)
            elif isinstance(said, Emitted):  # no events: a step finished, the worker lives
                for job_id, event in said.events:
                    self._sinks.deliver(job_id, event)

    def _fail(self, err: WorkerLost) -> None:
        self._lost = err
        with self._send_lock:
            calls = list(self._calls.values())
        for call in calls:
            call.answer(err)
        self._on_lost(self, err, self._sinks.drop_all())

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
        return WorkerLost(
            f"the engine made no progress for {limit:g} s (every card answers); restarting it", retry=False
        )

    def _died(self, when: str) -> WorkerLost:
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

    def alive(self) -> bool:
        return self._process.is_alive()

    def stop(self) -> None:
        self._stopping = True
        if self._process.is_alive():
            self._send(Close())
            self._process.join(timeout=3)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=3)
        self._conn.close()


def _worker_main(conn: Connection, config: Any) -> None:
    # No PR_SET_PDEATHSIG here: Linux ties it to the *thread* that spawned us, which is a
    # short-lived loader thread. The pipe ends instead: when the app dies, recv/send fail and
    # the worker leaves.
    os.environ["GGML_NO_BACKTRACE"] = "1"  # a dead card aborts us: one line, not a gdb session
    # The app owns this process's life (Close, a kill after 3 s, or the pipe's end when the app dies). A Ctrl-C
    # or a service stop reaches the whole process group, and the worker dying of it first read as an engine
    # lost mid-stop: "engine recovering ... restarting it" while everything was stopping.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    from app.engine.llama.engine import Engine

    engine = Engine(config)
    try:
        info = engine.load()
    except EngineError as err:
        conn.send(LoadFailed(str(err), err.card))  # kind follows from card
        return
    conn.send(Loaded(info))

    sending = threading.Lock()  # the step loop's events and the intake's counts share the pipe

    def send(message: FromWorker) -> None:
        with sending:
            conn.send(message)

    def count(message: Count) -> None:
        send(Counted(message.call, counted(engine, message.items)))

    intake = Intake(conn.recv, prepare=engine.prepare, count=count).start()

    def emit(events: list[tuple[int, Event | CacheUse]]) -> None:
        send(Emitted(events))

    with contextlib.suppress(BrokenPipeError, EOFError, OSError):  # the app went away
        engine.serve(intake.next, emit)
    engine.close()


def _first_card_down(config: Any) -> Down | None:
    down = cards.first_card_down(config.cards, health_offset=config.health_offset)
    if down is None:
        return None
    index, endpoint, reason = down
    return Down(f"card {index} ({endpoint})", endpoint, reason)


def _build(config: Any, on_lost: OnLost) -> Backend:
    home = WorkerBackend if config.isolation else InProcessBackend
    return home(config, on_lost)


CARDS = BackendKind("cards", build=_build, first_down=_first_card_down)
