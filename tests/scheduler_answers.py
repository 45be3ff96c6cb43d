"""One answer of the scheduler's tests, read with `follow()` as every caller reads one: event by event, each
within a few seconds or the test fails saying what it had seen."""

from __future__ import annotations

import time

from app.engine.events import Done, Event, Failed, Queued, Token
from app.engine.follow import follow
from app.engine.ticket import Ticket

WAIT_S = 10.0  # the most one event may take to come: a bound for a broken test, not a measure


class Answer:
    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        self.id = ticket.id
        self.events: list[Event] = []
        self._deadline = 0.0
        self._reader = follow(ticket, timeout=60, cancelled=self._overdue, poll_s=0.05)

    def _overdue(self) -> bool:
        if time.monotonic() > self._deadline:
            raise AssertionError(f"answer {self.id}: no event within {WAIT_S:g} s after {self.events}")
        return False

    @property
    def ended(self) -> bool:
        return bool(self.events) and isinstance(self.events[-1], Done | Failed)

    def next(self) -> Event:
        """Its next event (the test fails if none comes)."""
        assert not self.ended, f"answer {self.id} already ended: {self.events}"
        self._deadline = time.monotonic() + WAIT_S
        event = next(self._reader)
        self.events.append(event)
        return event

    def until(self, kind: type) -> Event:
        """Its events up to the next of this kind; returns that one."""
        while not isinstance(event := self.next(), kind):
            assert not self.ended, f"answer {self.id} ended before a {kind.__name__}: {self.events}"
        return event

    def end(self) -> Done | Failed:
        """Its events to the end; returns how it ended."""
        if not self.ended:
            self.until(Done | Failed)  # type: ignore[arg-type]
        end = self.events[-1]
        assert isinstance(end, Done | Failed)
        return end

    def finished(self) -> tuple[str, int]:
        """It ended with Done: its finish reason and the tokens it generated."""
        end = self.end()
        assert isinstance(end, Done), f"answer {self.id}: {self.events}"
        return end.stats.finish_reason, end.stats.generated_tokens

    def positions(self) -> list[int]:
        return [e.position for e in self.events if isinstance(e, Queued)]

    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, Token))

    def settle(self) -> None:
        """It ended with exactly one Done or Failed, and nothing came after it."""
        self.end()
        ends = [e for e in self.events if isinstance(e, Done | Failed)]
        assert len(ends) == 1, f"answer {self.id}: {self.events}"
        late = self.ticket.get(timeout=0)
        assert late is None, f"answer {self.id} heard {late} after its end {self.events[-1]}"
