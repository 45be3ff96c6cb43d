"""One caller's place in the engine's queue, and the events that follow it to the end."""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator

from app.engine.events import Done, Event, Failed, GenerationRequest


class Ticket:
    """One caller's place in the queue; iterate `events()` to follow it to the end."""

    def __init__(self, job_id: int, request: GenerationRequest, cancel: Callable[[Ticket], None]) -> None:
        self.id = job_id
        self.request = request
        self.cancelled = False
        self.cancel_at: float | None = None  # monotonic time a cancel was asked for
        self.produced = False  # a token reached the caller
        self.attempts = 0  # times it was taken again after the engine was lost before its first token
        self._cancel = cancel
        self._events: queue.Queue[Event] = queue.Queue()

    def put(self, event: Event) -> None:
        self._events.put(event)

    def get(self, timeout: float) -> Event | None:
        """The next event, or None if none came within `timeout` seconds (for async callers)."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def events(self) -> Iterator[Event]:
        """Queued* → Token* → Done | Failed. Leaving early (a closed client) cancels the job."""
        finished = False
        try:
            while True:
                event = self._events.get()
                yield event
                if isinstance(event, Done | Failed):
                    finished = True
                    return
        finally:
            if not finished:
                self._cancel(self)
