"""The engine as the rest of the app sees it: a scheduler with a FIFO queue in front of the slots of
one supervised backend (ollama's scheduler and runner).

The scheduler owns the answers: the queue, the slots in use, holds (a hot card, a model switch) and what
happens to answers when a backend is lost (each fails naming the card). It *holds* a BackendSupervisor
(supervisor.py), which owns the backend's life, and asks it for a backend, a rebuild, a replacement model
and token counts. Up to `parallel` answers run at once, batched in the backend (batcher.py); an answer
that may run now hears `Reading` when it takes its slot, `Queued(position)` only while it must wait.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.engine import events as ev
from app.engine.backends import WorkerLost
from app.engine.engine_config import EngineConfig
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, Queued, Reading, Token
from app.engine.meter import CacheMeter, CacheUse
from app.engine.queue_view import Tally, empty_stats, status_of
from app.engine.status import EngineStatus
from app.engine.supervisor import RETRY_S, BackendSupervisor
from app.engine.ticket import Ticket

log = logging.getLogger(__name__)
COUNT_WAIT_S = 60.0  # how long a token count waits for a model that is (re)loading


class EngineService:
    def __init__(
        self, config: EngineConfig, *, isolated: bool = True, max_queue: int = 32, background_slots: int = 1
    ) -> None:
        self.cache = CacheMeter()  # prefix reuse and the host KV cache (kv_host.py)
        self.supervisor = BackendSupervisor(
            config, isolated=isolated, on_change=self._wake, on_lost=self._fail_jobs, on_new_backend=self.cache.emptied
        )
        self.max_queue = max_queue
        self.background_slots = max(1, background_slots)
        self.tally = Tally()
        self.rate, self.counters = self.tally.rate, self.tally.counters
        self._cond = threading.Condition()
        self._waiting: deque[Ticket] = deque()
        self._running: dict[int, Ticket] = {}  # answers in the backend's slots, by job id
        self._ids = itertools.count(1)
        self._stopped = False
        self._hold: Callable[[], str | None] = lambda: None
        self._held_for: str | None = None
        self._switching: str | None = None
        self._switch_stopped: set[int] = set()

    @property
    def config(self) -> EngineConfig:
        return self.supervisor.config

    @property
    def parallel(self) -> int:
        """Slots: answers generated at once, as the loaded configuration says (an admin may change it)."""
        return max(1, self.config.parallel)

    def start(self) -> None:
        """Load the model in the background and start serving the queue."""
        self.supervisor.start()
        threading.Thread(target=self._dispatch, name="engine-dispatch", daemon=True).start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and close the backend (its own joins bound the wait: a worker gets 3 s, then is killed)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self.supervisor.stop()

    def wait_ready(self, timeout: float) -> bool:
        return self.supervisor.wait_ready(timeout)

    # -- token counts ------------------------------------------------------------------------

    def count_tokens(self, request: GenerationRequest) -> int:
        """The prompt tokens of `request` exactly as the model reads them (chat template included)."""
        return self.supervisor.count([request], wait_s=COUNT_WAIT_S)[0]

    def count_text(self, texts: Sequence[str]) -> list[int]:
        """The tokens of each piece of text as the model reads it inside a prompt (for sizing parts)."""
        return self.supervisor.count(list(texts), wait_s=COUNT_WAIT_S) if texts else []

    # -- the queue -------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> Ticket:
        request = replace(request, max_tokens=max(1, min(request.max_tokens, self.config.max_tokens_limit)))
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
                ticket.put(Done(empty_stats("cancelled")))
                return
            running = ticket.id in self._running
        backend = self.supervisor.current() if running else None
        if backend is not None:
            backend.cancel(ticket.id)

    def hold_when(self, reason: Callable[[], str | None]) -> None:
        """New answers wait while `reason()` says why (e.g. a card is too hot); running ones finish."""
        self._hold = reason

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _announce_positions(self) -> None:
        """Called with the lock held: each answer that must wait hears its place among those that wait.
        Answers a free slot takes now hear nothing here: `Reading` follows when they reach it."""
        admissible = set(self._admissible())
        position = 0
        for ticket in self._waiting:
            if ticket not in admissible:
                position += 1
                ticket.tell(Queued(position, self._held_for))

    def _admissible(self) -> list[Ticket]:
        """Called with the lock held: the waiting answers free slots take now, in order. Background work
        (extraction, summary parts) takes at most `background_slots`, so people are served first."""
        if self._held_for or self.supervisor.view().state in ("starting", "loading", "stopped"):
            return []
        free = self.parallel - len(self._running)
        background = sum(t.request.background for t in self._running.values())
        chosen: list[Ticket] = []
        for ticket in self._waiting:
            if len(chosen) >= free:
                break
            if not ticket.request.background or background < min(self.background_slots, self.parallel):
                chosen.append(ticket)
                background += ticket.request.background
        return chosen

    def _dispatch(self) -> None:
        """Admit waiting answers into the backend's slots, first come first served."""
        while True:
            with self._cond:
                chosen = self._next_admission()
                if chosen is None:
                    for waiting in self._waiting:
                        waiting.put(Failed("the engine is shutting down"))
                    return
                self._waiting.remove(chosen)
                self._running[chosen.id] = chosen  # its slot is taken from now on
                self._announce_positions()
            self._admit(chosen)

    def _next_admission(self) -> Ticket | None:
        """Called with the lock held: wait for an answer a slot may take now (None: stopped)."""
        while not self._stopped:
            if not self._running:
                self.supervisor.check_idle()
            # At start-up or while a model loads, answers wait their turn; a broken engine fails them.
            if self.supervisor.view().state in ("starting", "loading") or not self._waiting:
                self._cond.wait(timeout=1.0)
                continue
            if self._waiting_on_hold():
                continue
            chosen = self._admissible()
            if chosen:
                return chosen[0]
            self._cond.wait(timeout=1.0)
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

    def _admit(self, ticket: Ticket) -> None:
        backend = self.supervisor.backend()
        if isinstance(backend, EngineError):
            with self._cond:
                self._running.pop(ticket.id, None)
                self._cond.notify_all()
            ticket.put(backend.failed())
            self.counters.add("errors")
            return
        self.counters.add("requests")
        ticket.put(Reading())
        try:
            backend.submit(ticket.id, ticket.request, lambda event: self._on_event(ticket, event))
        except WorkerLost as err:
            self.supervisor.recover(err, backend)
            self._fail_jobs(err, [ticket.id])
            return
        if ticket.cancelled:  # cancelled between leaving the queue and reaching its slot
            backend.cancel(ticket.id)

    def _on_event(self, ticket: Ticket, event: Event | CacheUse) -> None:
        """An event of a running answer, from the backend's thread."""
        if isinstance(event, CacheUse):  # how its prompt's KV was found: counted, not the caller's
            self.cache.note(event)
            return
        ticket.produced = ticket.produced or isinstance(event, Token)
        if isinstance(event, Done | Failed):  # its slot is free before its caller hears the end
            with self._cond:
                self._running.pop(ticket.id, None)
                if ticket.cancel_at is not None:
                    self.tally.cancel_s = time.monotonic() - ticket.cancel_at
                self._cond.notify_all()
        ticket.put(self._noticed(ticket, event))
        self.tally.record(event)

    def _fail_jobs(self, err: WorkerLost, jobs: list[int]) -> None:
        """The backend running `jobs` was lost (the supervisor rebuilds it): every one fails naming the card.

        Every card answers yet the worker died before a token: a card restarted while we held a stale
        connection. Rebuilt, the engine can take such an answer once more (at the head of the queue)."""
        with self._cond:
            tickets = [self._running.pop(job) for job in jobs if job in self._running]
            again = [t for t in tickets if not (t.produced or err.card or t.attempts or t.cancelled)]
            for ticket in reversed(again):
                ticket.attempts += 1
                log.info("answer %d: retrying on the rebuilt engine", ticket.id)
                self._waiting.appendleft(ticket)
            self._cond.notify_all()
        for ticket in tickets:
            if ticket not in again:
                ticket.put(err.failed())
                self.counters.add("errors")

    def _noticed(self, ticket: Ticket, event: Event) -> Event:
        """An answer stopped to switch models ends with a notice that says so."""
        if isinstance(event, Done) and ticket.id in self._switch_stopped:
            self._switch_stopped.discard(ticket.id)
            return Failed(f"the answer was stopped: the administrator is {self._switching or 'switching models'}")
        return event

    # -- model switches and card faults ----------------------------------------------------------

    def switch(self, config: EngineConfig, *, grace_s: float = 5.0) -> ev.ModelInfo:
        """Load another model (or the same one with other settings). New answers wait; the running ones
        have `grace_s` to finish, then are stopped with a notice; the old model is unloaded first. If the
        new one fails to load, the old one is loaded again and the error says why."""
        with self._cond:
            if self._switching:
                raise EngineError(f"a switch is already under way ({self._switching})", kind="busy")
            self._switching = why = f"switching to {config.model_name}"
            self._cond.notify_all()
        previous = self.config
        try:
            self._drain(grace_s)
            try:
                return self.supervisor.replace(config, why=why)
            except EngineError as err:
                log.warning("switch to %s failed: %s; loading %s again", config.model_name, err, previous.model_name)
                self.supervisor.replace(previous, why=why)
                raise EngineError(
                    f"{config.model_name} could not be loaded ({err}); {previous.model_name} is loaded again",
                    kind=err.kind,
                ) from err
        finally:
            with self._cond:
                self._switching = None
                self._cond.notify_all()

    def _drain(self, grace_s: float) -> None:
        """Let every running answer finish within `grace_s`, then stop them (each ends with a notice)."""
        with self._cond:
            if self._cond.wait_for(lambda: not self._running, grace_s):
                return
            jobs = list(self._running)
            self._switch_stopped.update(jobs)
        backend = self.supervisor.current()
        if backend is not None:
            for job in jobs:
                backend.cancel(job)
        with self._cond:
            self._cond.wait_for(lambda: not self._running, 30)

    def note_card_down(self, index: int, endpoint: str, reason: str) -> None:
        """The card monitor saw a card stop answering. If no answer runs, the engine is rebuilt now rather
        than fail the next user's answer on a dead connection (running answers find out themselves)."""
        with self._cond:
            idle = not self._running
        if idle:
            self.supervisor.card_down(index, endpoint, reason)

    # -- what the UI and API show ------------------------------------------------------------

    def status(self) -> EngineStatus:
        with self._cond:
            running, waiting = list(self._running.values()), list(self._waiting)
            held, switching = self._held_for, self._switching
        return EngineStatus.model_validate({**status_of(
            self.supervisor.view(), isolated=self.supervisor.isolated, switching=switching, held=held,
            running=running, waiting=waiting, parallel=self.parallel, rate=self.rate.rate(),
            last_stats=self.tally.last_stats, cancel_s=self.tally.cancel_s,
            background_slots=min(self.background_slots, self.parallel),
        ), **self.cache.snapshot()})  # fmt: skip  # prefix_hits, host_restores, cached_tokens_total, kv_host_*
