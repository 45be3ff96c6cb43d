"""The engine as the rest of the app sees it: a FIFO queue in front of the slots of one supervised backend.

Up to `parallel` answers run at once, batched in the backend (batcher.py); beyond that every waiting
caller sees its position. When the backend is lost (a card died or hung, the worker was killed)
every answer in flight fails with a message naming the card, and the supervisor rebuilds the
backend by itself as soon as every card answers again.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Literal

from app.engine.backends import Backend, WorkerLost
from app.engine.engine_config import EngineConfig
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, Queued, Stats, Token
from app.engine.meter import CacheMeter, CacheUse, Counters, RateMeter
from app.engine.status import EngineStatus
from app.engine.supervisor import RETRY_S, BackendSupervisor
from app.engine.ticket import Ticket

log = logging.getLogger(__name__)


class EngineService(BackendSupervisor):
    def __init__(
        self, config: EngineConfig, *, isolated: bool = True, max_queue: int = 32, background_slots: int = 1
    ) -> None:
        super().__init__(config, isolated=isolated)
        self.max_queue = max_queue
        self._waiting: deque[Ticket] = deque()
        self._ids = itertools.count(1)
        self._last_stats: Stats | None = None
        self.rate = RateMeter()
        self.counters = Counters()
        self.cache = CacheMeter()  # prefix reuse and the host KV cache (kv_host.py)
        self._hold: Callable[[], str | None] = lambda: None
        self._held_for: str | None = None
        self._cancel_s: float | None = None  # from the last cancel to its slot being free
        self.background_slots = max(1, background_slots)

    @property
    def parallel(self) -> int:
        """Slots: answers generated at once, as the loaded configuration says (an admin may change it)."""
        return max(1, self.config.parallel)

    def start(self) -> None:
        """Load the model in the background and start serving the queue."""
        super().start()
        self._spawn(self._dispatch, "engine-dispatch")

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
            ticket.cancel_at = ticket.cancel_at or time.monotonic()
            if ticket in self._waiting:
                self._waiting.remove(ticket)
                self._announce_positions()
                ticket.put(Done(_empty_stats("cancelled")))
                return
            backend = self._backend if ticket.id in self._running else None
        if backend:
            backend.cancel(ticket.id)

    def _announce_positions(self) -> None:
        for position, ticket in enumerate(self._waiting, start=1):
            ticket.put(Queued(position, self._held_for))

    def _dispatch(self) -> None:
        """Admit waiting answers into the engine's slots, first come first served."""
        while True:
            with self._cond:
                while self._next() is None and self._state != "stopped":
                    self._cond.wait(timeout=1.0)
                    self._watch_backend()
                if self._state == "stopped":
                    for waiting in self._waiting:
                        waiting.put(Failed("the engine is shutting down"))
                    return
                # At start-up or while a model loads, jobs wait their turn; a broken engine fails them.
                self._cond.wait_for(lambda: self._state not in ("starting", "loading"))
                if self._waiting_on_hold():
                    continue
                chosen = self._next()
                if chosen is None:
                    continue
                self._waiting.remove(chosen)
                self._announce_positions()
            self._admit(chosen)

    def _next(self) -> Ticket | None:
        """Called with the lock held: the first waiting answer a slot may take now. Background work
        (extraction, summary parts) takes at most `background_slots`, so people are served first."""
        if len(self._running) >= self.parallel:
            return None
        background = sum(t.request.background for t in self._running.values())
        for ticket in self._waiting:
            if not ticket.request.background or background < min(self.background_slots, self.parallel):
                return ticket
        return None

    def _waiting_on_hold(self) -> bool:
        """Called with the lock held: while held, tell the waiting why and look again shortly."""
        reason = self._switching or self._hold()
        if reason != self._held_for:
            self._held_for = reason
            self._announce_positions()
        if reason:
            self._cond.wait(timeout=RETRY_S)
        return reason is not None

    def hold_when(self, reason: Callable[[], str | None]) -> None:
        """New answers wait while `reason()` says why (e.g. a card is too hot); running ones finish."""
        self._hold = reason

    def _admit(self, ticket: Ticket) -> None:
        backend = self._usable_backend()
        if isinstance(backend, EngineError):
            ticket.put(backend.failed())
            self.counters.add("errors")
            return
        with self._cond:
            self._running[ticket.id] = ticket
        self.counters.add("requests")
        try:
            backend.submit(ticket.id, ticket.request, lambda event: self._on_event(ticket, event))
        except WorkerLost as err:
            self._backend_lost(backend, err, [ticket.id])
            return
        if ticket.cancelled:  # cancelled between leaving the queue and reaching its slot
            backend.cancel(ticket.id)

    def _on_event(self, ticket: Ticket, event: Event | CacheUse) -> None:
        """An event of a running answer, from the backend's thread."""
        if isinstance(event, CacheUse):  # how its prompt's KV was found: counted, not the caller's
            self.cache.note(event)
            return
        ticket.produced = ticket.produced or isinstance(event, Token)
        ticket.put(self._noticed(ticket, event))
        self._count(event)
        if isinstance(event, Done | Failed):
            self._finished(ticket)

    def _finished(self, ticket: Ticket) -> None:
        with self._cond:
            self._running.pop(ticket.id, None)
            if ticket.cancel_at is not None:
                self._cancel_s = time.monotonic() - ticket.cancel_at
            self._cond.notify_all()

    def _backend_lost(self, backend: Backend, err: WorkerLost, jobs: list[int]) -> None:
        """Every answer running on the lost backend fails naming the card, and the engine rebuilds.

        Every card answers yet the worker died before a token: a card restarted while we held a stale
        connection. Rebuilt, the engine can take such an answer once more (at the head of the queue)."""
        with self._cond:
            tickets = [self._running.pop(job) for job in jobs if job in self._running]
            self._cond.notify_all()
        again = [t for t in tickets if not (t.produced or err.card or t.attempts or t.cancelled)]
        for ticket in tickets:
            if ticket not in again:
                ticket.put(err.failed())
                self.counters.add("errors")
        self._recover(err, backend)
        with self._cond:
            for ticket in reversed(again):
                ticket.attempts += 1
                log.info("answer %d: retrying on the rebuilt engine", ticket.id)
                self._waiting.appendleft(ticket)
            self._cond.notify_all()

    def _noticed(self, ticket: Ticket, event: Event) -> Event:
        """An answer stopped to switch models ends with a notice that says so."""
        if isinstance(event, Done) and ticket.id in self._switch_stopped:
            self._switch_stopped.discard(ticket.id)
            return Failed(f"the answer was stopped: the administrator is {self._switching or 'switching models'}")
        return event

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

    def status(self) -> EngineStatus:
        with self._cond:
            info = self._info
            return EngineStatus.model_validate({
                "state": self._state,
                "message": self._message,
                "switching": self._switching,
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
                "queue": {
                    "running": len(self._running),
                    "waiting": len(self._waiting),
                    "held": self._held_for,
                    "parallel": self.parallel,
                    "background": sum(t.request.background for t in self._running.values()),
                    "background_slots": min(self.background_slots, self.parallel),
                    "background_waiting": sum(t.request.background for t in self._waiting),
                },
                "live_tps": round(self.rate.rate(), 1) if self._running else 0.0,
                "last_stats": self._last_stats.as_dict() if self._last_stats else None,
                "last_cancel_s": None if self._cancel_s is None else round(self._cancel_s, 3),
                **self.cache.snapshot(),  # prefix_hits, host_restores, cached_tokens_total, kv_host_bytes/entries
            })


def _bounded(request: GenerationRequest, limit: int) -> GenerationRequest:
    return replace(request, max_tokens=max(1, min(request.max_tokens, limit)))


def _empty_stats(reason: Literal["cancelled"]) -> Stats:
    return Stats(0, 0, 0, 0.0, 0.0, 0.0, 0.0, reason)
