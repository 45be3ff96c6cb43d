"""Who may take a slot now, and what the others hear: the scheduler's policy as plain functions of its
lines (service.py holds the lock and calls these)."""

from __future__ import annotations

from collections.abc import Iterable

from app.engine.events import Queued
from app.engine.ticket import Ticket


def admissible(
    waiting: Iterable[Ticket], running: Iterable[Ticket], *, parallel: int, background_slots: int
) -> list[Ticket]:
    """The waiting answers free slots take now, in order. Background work (extraction, summary parts) takes
    at most `background_slots`, so people are served first."""
    running = list(running)
    free = parallel - len(running)
    background = sum(t.request.background for t in running)
    chosen: list[Ticket] = []
    for ticket in waiting:
        if len(chosen) >= free:
            break
        if not ticket.request.background or background < min(background_slots, parallel):
            chosen.append(ticket)
            background += ticket.request.background
    return chosen


def announce(waiting: Iterable[Ticket], taken: list[Ticket], held: str | None) -> None:
    """Each answer that must wait hears its place among those that wait. Answers a free slot takes now
    (`taken`) hear nothing here: `Reading` follows when they reach it."""
    position = 0
    for ticket in waiting:
        if ticket not in taken:
            position += 1
            ticket.tell(Queued(position, held))
