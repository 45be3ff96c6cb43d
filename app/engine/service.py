"""The engine as the rest of the app sees it: one FIFO queue in front of one supervised backend.

One generation runs at a time; every waiting caller sees its position. When the backend is lost
(a card died, the worker was killed) the answer in flight fails with a message naming the card,
and the service rebuilds the backend by itself as soon as every card answers again.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Literal

from app.engine import cards as card_probe
from app.engine.backends import Backend, InProcessBackend, WorkerBackend, WorkerLost
from app.engine.engine_config import EngineConfig
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, ModelInfo, Queued, Stats, Token
from app.engine.meter import Counters, RateMeter
from app.engine.ticket import Ticket

log = logging.getLogger(__name__)

State = Literal["starting", "loading", "ready", "recovering", "failed", "stopped"]
_RETRY_S = 0.5
_RETRY_READY_S = 60.0  # how long a retried answer waits for the rebuilt engine


class EngineService:
    def __init__(self, config: EngineConfig, *, isolated: bool = True, max_queue: int = 32) -> None:
        self.config = config
        self.max_queue = max_queue
        self._make_backend: Callable[[], Backend] = (
            (lambda: WorkerBackend(config)) if isolated else (lambda: InProcessBackend(config))
        )
        self.isolated = isolated
        self._cond = threading.Condition()
        self._waiting: deque[Ticket] = deque()
        self._current: Ticket | None = None
        self._backend: Backend | None = None
        self._state: State = "starting"
        self._message = "starting"
        self._down_card: str | None = None
        self._info: ModelInfo | None = None
        self._ids = itertools.count(1)
        self._last_stats: Stats | None = None
        self.rate = RateMeter()
        self.counters = Counters()
        self._hold: Callable[[], str | None] = lambda: None
        self._held_for: str | None = None
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Load the model in the background and start serving the queue."""
        for target, name in ((self._bring_up, "engine-loader"), (self._dispatch, "engine-dispatch")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait_ready(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state in ("ready", "failed"), timeout) and (
                self._state == "ready"
            )

    def stop(self) -> None:
        with self._cond:
            self._state = "stopped"
            backend, self._backend = self._backend, None
            self._cond.notify_all()
        if backend:
            backend.stop()

    def _set_state(self, state: State, message: str, card: str | None = None) -> None:
        with self._cond:
            if self._state == "stopped":
                return
            self._state, self._message, self._down_card = state, message, card
            self._cond.notify_all()
        log.info("engine %s: %s", state, message)

    def _bring_up(self) -> None:
        self._load_when_cards_answer()

    def _load_when_cards_answer(self) -> None:
        """Wait for every card, then load; repeat until it works or the service stops."""
        while self._state != "stopped":
            down = card_probe.first_card_down(self.config.cards)
            if down:
                index, endpoint, reason = down
                if self._state != "recovering" or self._down_card != endpoint:
                    self._set_state("recovering", f"waiting for card {index} ({endpoint}): {reason}", endpoint)
                time.sleep(_RETRY_S)
                continue
            self._set_state("loading", f"loading {self.config.model_name} across {len(self.config.cards)} cards")
            backend = self._make_backend()
            try:
                info = backend.start()
            except EngineError as err:
                backend.stop()
                self._set_state("recovering" if err.card else "failed", str(err), err.card)
                if not err.card:
                    return
                time.sleep(_RETRY_S)
                continue
            with self._cond:
                if self._state == "stopped":
                    backend.stop()
                    return
                self._backend, self._info = backend, info
            self._set_state("ready", f"{info.name} ready on {len(info.cards)} cards")
            return

    def _recover(self, err: EngineError, failed: Backend) -> None:
        """Drop the backend that failed and rebuild; a no-op if it was already replaced."""
        with self._cond:
            if self._backend is not failed or self._state == "stopped":
                return
            self._backend = None
            self._state, self._message, self._down_card = "recovering", str(err), err.card
            self._cond.notify_all()
        log.info("engine recovering: %s", err)
        failed.stop()
        threading.Thread(target=self._bring_up, name="engine-recover", daemon=True).start()

    # -- the queue -------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> Ticket:
        request = _bounded(request, self.config.max_tokens_limit)
        ticket = Ticket(next(self._ids), request, self.cancel)
        with self._cond:
            if len(self._waiting) >= self.max_queue:
                raise EngineError(
                    f"the appliance is busy: {len(self._waiting)} answers are waiting; try again shortly",
                    kind="busy",
                )
            self._waiting.append(ticket)
            self._announce_positions()
            self._cond.notify_all()
        return ticket

    def cancel(self, ticket: Ticket) -> None:
        with self._cond:
            ticket.cancelled = True
            if ticket in self._waiting:
                self._waiting.remove(ticket)
                self._announce_positions()
                ticket.put(Done(_empty_stats("cancelled")))
                return
            backend = self._backend if self._current is ticket else None
        if backend:
            backend.cancel(ticket.id)

    def _announce_positions(self) -> None:
        for position, ticket in enumerate(self._waiting, start=1):
            ticket.put(Queued(position, self._held_for))

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and self._state != "stopped":
                    self._cond.wait(timeout=1.0)
                    self._watch_backend()
                if self._state == "stopped":
                    for ticket in self._waiting:
                        ticket.put(Failed("the engine is shutting down"))
                    return
                # At start-up or while a model loads, jobs wait their turn; a broken engine fails them.
                self._cond.wait_for(lambda: self._state not in ("starting", "loading"))
                if self._waiting_on_hold():
                    continue
                ticket = self._waiting.popleft()
                self._current = ticket
                self._announce_positions()
            try:
                self._execute(ticket)
            finally:
                with self._cond:
                    self._current = None

    def _waiting_on_hold(self) -> bool:
        """Called with the lock held: while held, tell the waiting why and look again shortly."""
        reason = self._hold()
        if reason != self._held_for:
            self._held_for = reason
            self._announce_positions()
        if reason:
            self._cond.wait(timeout=_RETRY_S)
        return reason is not None

    def _watch_backend(self) -> None:
        backend = self._backend
        if backend is not None and self._state == "ready" and not backend.alive():
            self._recover_async(WorkerLost("the engine worker stopped while idle"), backend)

    def hold_when(self, reason: Callable[[], str | None]) -> None:
        """New answers wait while `reason()` says why (e.g. a card is too hot); running ones finish."""
        self._hold = reason

    def note_card_down(self, index: int, endpoint: str, reason: str) -> None:
        """The card monitor saw a card stop answering. If the engine is idle, rebuild it now rather
        than fail the next user's answer on a dead connection."""
        with self._cond:
            backend = self._backend if self._state == "ready" and self._current is None else None
        if backend is not None and endpoint in self.config.cards:
            self._recover_async(EngineError(f"card {index} ({endpoint}) is down: {reason}", card=endpoint), backend)

    def _recover_async(self, err: EngineError, failed: Backend) -> None:
        threading.Thread(target=self._recover, args=(err, failed), name="engine-recover", daemon=True).start()

    def _usable_backend(self) -> Backend | EngineError:
        """The backend to run on; while it is being rebuilt, wait only if every card answers."""
        if self._state == "recovering":
            down = card_probe.first_card_down(self.config.cards)
            if down:
                index, endpoint, reason = down
                return EngineError(
                    f"card {index} ({endpoint}) is down ({reason}); answers resume when it is back", card=endpoint
                )
            self.wait_ready(_RETRY_READY_S)
        backend = self._backend
        if backend is None or self._state != "ready":
            return EngineError(f"the engine is not available: {self._message}", card=self._down_card)
        return backend

    def _execute(self, ticket: Ticket) -> None:
        for attempt in (1, 2):
            backend = self._usable_backend()
            if isinstance(backend, EngineError):
                ticket.put(backend.failed())
                self.counters.add("errors")
                return
            produced = False
            self.counters.add("requests")
            try:
                for event in backend.generate(ticket.id, ticket.request):
                    produced = produced or isinstance(event, Token)
                    ticket.put(event)
                    self._count(event)
                return
            except WorkerLost as err:
                self._recover(err, backend)
                # Every card answers yet the worker died before a token: a card restarted while we
                # held a stale connection. Rebuilt, the engine can take the same request once more.
                if produced or err.card or attempt == 2 or not self.wait_ready(_RETRY_READY_S):
                    ticket.put(err.failed())
                    self.counters.add("errors")
                    return
                log.info("answer %d: retrying on the rebuilt engine", ticket.id)

    def _count(self, event: Event) -> None:
        if isinstance(event, Token):
            self.rate.tick()
            self.counters.add("tokens")
        elif isinstance(event, Done):
            self._last_stats = event.stats
            if event.stats.finish_reason == "cancelled":
                self.counters.add("cancelled")
        elif isinstance(event, Failed):
            self.counters.add("errors")

    # -- what the UI and API show ------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        with self._cond:
            info = self._info
            return {
                "state": self._state,
                "message": self._message,
                "down_card": self._down_card,
                "isolated": self.isolated,
                "model": None
                if info is None
                else {
                    "name": info.name,
                    "gguf_file": info.path,  # not "path": gradio_client would fetch it as a file
                    "n_layers": info.n_layers,
                    "n_ctx": info.n_ctx,
                    "load_s": round(info.load_s, 2),
                },
                "placement": [asdict(card) for card in info.cards] if info else [],
                "queue": {"running": self._current is not None, "waiting": len(self._waiting), "held": self._held_for},
                "live_tps": round(self.rate.rate(), 1) if self._current is not None else 0.0,
                "last_stats": self._last_stats.as_dict() if self._last_stats else None,
            }


def _bounded(request: GenerationRequest, limit: int) -> GenerationRequest:
    from dataclasses import replace

    return replace(request, max_tokens=max(1, min(request.max_tokens, limit)))


def _empty_stats(reason: Literal["cancelled"]) -> Stats:
    return Stats(0, 0, 0, 0.0, 0.0, 0.0, 0.0, reason)
