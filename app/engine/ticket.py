"""One caller's place in the engine's queue, and the events that follow it to the end (read them with
app/engine/follow.py)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from app.engine.events import Done, Event, Failed, GenerationRequest, Queued, Stats, Token


class Ticket:
    """One caller's place in the queue; `follow(ticket)` reads its events to the end."""

    def __init__(self, job_id: int, request: GenerationRequest, cancel: Callable[[Ticket], None]) -> None:
        self.id = job_id
        self.request = request
        self.cancelled = False
        self.cancel_at: float | None = None  # monotonic time a cancel was asked for
        self.produced = False  # a token reached the caller
        self.attempts = 0  # times it was taken again after the engine was lost before its first token
        self.stopped_for: str | None = None  # why the scheduler stopped it (a model switch), told at its end
        self.ended = False  # its Done or Failed was put: it is the last event its caller hears
        self.tokens = 0  # tokens its caller heard
        self._cancel = cancel
        self._events: queue.Queue[Event] = queue.Queue()
        self._lock = threading.Lock()
        self._told: Queued | None = None

    def ended_early(self) -> bool:
        """It cannot be taken again after its engine was lost: it streamed, was retried, or was stopped."""
        return self.produced or bool(self.attempts) or self.cancelled or self.stopped_for is not None

    def cancel(self) -> None:
        """Stop this answer (waiting: it leaves the queue; running: it ends at the next step)."""
        self._cancel(self)

    def put(self, event: Event) -> None:
        """One more event for its caller; nothing after its end (exactly one Done or Failed, whoever says it)."""
        with self._lock:
            if self.ended:
                return
            self.ended = isinstance(event, Done | Failed)
            self.tokens += isinstance(event, Token)
        self._events.put(event)

    def end_after(self, seconds: float) -> None:
        """Unless it ended by then, its caller hears the end in `seconds`, as stopped, whatever its backend says
        later (a card that hangs holds its step; the slot stays taken until the backend lets go or is lost)."""
        later = threading.Timer(seconds, lambda: self.put(Done(Stats(0, 0, self.tokens, 0, 0, 0, 0, "cancelled"))))
        later.daemon = True
        later.start()

    def tell(self, place: Queued) -> None:
        """Its place in the queue, when that changed since it was last told."""
        if place != self._told:
            self._told = place
            self._events.put(place)

    def get(self, timeout: float) -> Event | None:
        """The next event, or None if none came within `timeout` seconds (for async callers)."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None
