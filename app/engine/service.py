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

from app.engine import admission
from app.engine.backend import WorkerLost
from app.engine.counts import bounded
from app.engine.engine_config import EngineConfig
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, ModelInfo, Reading, Token
from app.engine.meter import CacheMeter, CacheUse
from app.engine.queue_view import Tally, empty_stats, status_of
from app.engine.status import EngineStatus
from app.engine.supervisor import RETRY_S, BackendSupervisor, Kinds
from app.engine.ticket import Ticket

log = logging.getLogger(__name__)
COUNT_WAIT_S = 60.0  # how long a token count waits for a model that is (re)loading
STOP_GRACE_S = 0.5  # after Stop, how long the backend has to end an answer before its caller hears the end anyway
_DRAIN_S = 30.0  # how long a switch waits for stopped answers to end before it ends them itself


class EngineService:
    def __init__(self, config: EngineConfig, *, kinds: Kinds) -> None:
        self.cache = CacheMeter()  # prefix reuse and the host KV cache (kv_host.py)
        self.supervisor = BackendSupervisor(
            config, kinds=kinds, on_change=self._wake, on_lost=self._fail_jobs, on_new_backend=self.cache.emptied
        )
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

    @property
    def config(self) -> EngineConfig:
        return self.supervisor.config

    @property
    def background_slots(self) -> int:
        """Slots background work may take at once, as the loaded configuration says (the one owner)."""
        return max(1, self.config.background_slots)

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
            while self._waiting:  # each ends once, and leaves the line (a cancel after it finds nothing)
                self._waiting.popleft().put(Failed("the engine is shutting down"))
            self._cond.notify_all()
        self.supervisor.stop()
        self._fail_running("the engine stopped before the answer ended")

    def wait_ready(self, timeout: float) -> bool:
        return self.supervisor.wait_ready(timeout)

    def loaded(self) -> tuple[str, int]:
        """The loaded model's name and context per answer (while one loads: the configuration's)."""
        info = self.supervisor.view().info
        return (info.name, info.n_ctx) if info is not None else (self.config.model_name, self.config.n_ctx)

    # -- token counts ------------------------------------------------------------------------

    def count_tokens(self, request: GenerationRequest) -> int:
        """The prompt tokens of `request` exactly as the model reads them (chat template included)."""
        return self.supervisor.count([request], wait_s=COUNT_WAIT_S)[0]

    def count_text(self, texts: Sequence[str]) -> list[int]:
        """The tokens of each piece of text as the model reads it inside a prompt (for sizing parts)."""
        return self.supervisor.count(list(texts), wait_s=COUNT_WAIT_S) if texts else []

    # -- the queue -------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> Ticket:
        request = bounded(request, n_ctx=self.loaded()[1], max_tokens_limit=self.config.max_tokens_limit)
        ticket = Ticket(next(self._ids), request, self.cancel)
        with self._cond:
            if self._stopped:  # nobody would serve it
                raise EngineError("the engine is shutting down; try again once it is back")
            if len(self._waiting) >= self.config.max_queue:
                busy = f"the appliance is busy: {len(self._waiting)} answers are waiting; try again shortly"
                raise EngineError(busy, kind="busy")
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
            ticket.end_after(STOP_GRACE_S)  # a hung card holds its step: its caller hears the end anyway

    def hold_when(self, reason: Callable[[], str | None]) -> None:
        """New answers wait while `reason()` says why (e.g. a card is too hot); running ones finish."""
        self._hold = reason

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _announce_positions(self) -> None:
        """Called with the lock held: the waiting hear their places."""
        admission.announce(self._waiting, self._admissible(), self._held_for)

    def _admissible(self) -> list[Ticket]:
        """Called with the lock held: the waiting answers free slots take now (none while held or loading)."""
        if self._held_for or self.supervisor.view().state in ("starting", "loading", "stopped"):
            return []
        return admission.admissible(
            self._waiting, self._running.values(), parallel=self.parallel, background_slots=self.background_slots
        )

    def _dispatch(self) -> None:
        """Admit waiting answers into the backend's slots, first come first served."""
        while True:
            with self._cond:
                chosen = self._next_admission()
                if chosen is None:  # stopped
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
        with self._cond:  # while it waited for the backend, the service may have stopped and ended it
            if self._running.get(ticket.id) is not ticket:
                return
            if isinstance(backend, EngineError):
                del self._running[ticket.id]
                self._cond.notify_all()
                ticket.put(backend.failed())
                self.counters.add("errors")
                return
            ticket.put(Reading())
        self.counters.add("requests")
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
        with self._cond:
            if self._running.get(ticket.id) is not ticket:  # it already ended here (its backend was replaced)
                return
            if isinstance(event, Done | Failed):  # its slot is free before its caller hears the end
                self._running.pop(ticket.id, None)
                if ticket.cancel_at is not None:
                    self.tally.cancel_s = time.monotonic() - ticket.cancel_at
                self._cond.notify_all()
        ticket.produced = ticket.produced or isinstance(event, Token)
        if isinstance(event, Done) and ticket.stopped_for:  # stopped for a switch: the notice says so
            event = Failed(f"the answer was stopped: the administrator is {ticket.stopped_for}")
        ticket.put(event)
        self.tally.record(event)

    def _fail_jobs(self, err: WorkerLost, jobs: list[int]) -> None:
        """The backend running `jobs` was lost (the supervisor rebuilds it): every one fails naming the card.

        Every card answers yet the worker died before a token (a card restarted while we held a stale connection):
        rebuilt, the engine takes such an answer once more, first in line — unless it froze (`err.retry`)."""
        with self._cond:
            tickets = [self._running.pop(job) for job in jobs if job in self._running]
            again = [] if self._stopped or not err.retry else [t for t in tickets if not (err.card or t.ended_early())]
            for ticket in reversed(again):
                ticket.attempts += 1
                log.info("answer %d: retrying on the rebuilt engine", ticket.id)
                self._waiting.appendleft(ticket)
            self._cond.notify_all()
        for ticket in tickets:
            if ticket not in again and not ticket.ended:
                ticket.put(err.failed())
                self.counters.add("errors")

    # -- model switches and card faults ----------------------------------------------------------

    def switch(self, config: EngineConfig, *, grace_s: float = 5.0) -> ModelInfo:
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
        why = self._switching or "switching models"
        with self._cond:
            if self._cond.wait_for(lambda: not self._running, grace_s):
                return
            stopping = list(self._running.values())
        backend = self.supervisor.current()
        for ticket in stopping:
            ticket.stopped_for = why
            if backend is not None:
                backend.cancel(ticket.id)
        with self._cond:
            if self._cond.wait_for(lambda: not self._running, _DRAIN_S):
                return
        self._fail_running(f"the answer was stopped: the administrator is {why}")  # its backend did not end it

    def _fail_running(self, message: str) -> None:
        """Every answer in a slot ends now (its backend was stopped or replaced); what it says later goes nowhere."""
        with self._cond:
            jobs = list(self._running)
        self._fail_jobs(WorkerLost(message), jobs)

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
            self.supervisor.view(), isolated=self.config.isolation and self.supervisor.kind.uses_cards,
            switching=switching, held=held, running=running, waiting=waiting, parallel=self.parallel,
            rate=self.rate.rate(), last_stats=self.tally.last_stats, cancel_s=self.tally.cancel_s,
            background_slots=min(self.background_slots, self.parallel),
        ), **self.cache.snapshot()})  # fmt: skip  # prefix_hits, host_restores, cached_tokens_total, kv_host_*
