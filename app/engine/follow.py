"""Following one answer to its end: the one way chat, Q&A, summaries, extraction and /v1 read a ticket.

    for event in follow(ticket, timeout=120, cancelled=stopped):
        ...  # Queued* → Reading → Token* → Done | Failed, then the iterator ends

`Queued` comes only while the answer must wait (someone is ahead, or a hold), `Reading` when it
has a slot and the engine reads its prompt. `timeout` counts from `Reading` (waiting in line does
not count): past it the answer is stopped and ends with Failed(kind="timeout"). `cancelled()` is
looked at every `poll_s` and after each event: once it says so the answer is stopped and ends with
the engine's Done (finish_reason "cancelled"). Leaving the loop early (a client gone) stops it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from app.engine.events import Done, Event, Failed, Reading
from app.engine.ticket import Ticket

POLL_S = 0.25


def _never() -> bool:
    return False


def follow(
    ticket: Ticket, timeout: float | None = None, cancelled: Callable[[], bool] = _never, *, poll_s: float = POLL_S
) -> Iterator[Event]:
    deadline: float | None = None
    stopped: str | None = None  # why this helper stopped the answer: "timeout" or "cancelled"
    finished = False
    try:
        while True:
            event = ticket.get(timeout=poll_s)
            if isinstance(event, Reading) and timeout is not None:
                deadline = time.monotonic() + timeout
            if stopped is None:
                late = deadline is not None and time.monotonic() > deadline
                stopped = "cancelled" if cancelled() else "timeout" if late else None
                if stopped is not None:
                    ticket.cancel()
            if event is None:
                continue
            if isinstance(event, Done) and stopped == "timeout" and event.stats.finish_reason == "cancelled":
                event = Failed(f"stopped after {timeout:g} s without finishing", kind="timeout")
            finished = isinstance(event, Done | Failed)
            yield event
            if finished:
                return
    finally:
        if not finished:
            ticket.cancel()
