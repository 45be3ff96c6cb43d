"""The engine's loop: take the messages that came (requests read by the intake, Cancel, Close) between two
steps, and run steps while answers run. It runs where llama.cpp lives (the engine worker, or a thread of the
app process)."""

from __future__ import annotations

import time
from collections.abc import Callable

from app.engine.events import EngineError, Event
from app.engine.llama.batcher import Batcher
from app.engine.llama.intake import Ready, StepMessage
from app.engine.llama.messages import Cancel, Close
from app.engine.meter import CacheUse

Inbox = Callable[[bool], StepMessage | None]  # block? → the next message, or None when none waits
Emit = Callable[[list[tuple[int, Event | CacheUse]]], None]  # a step's events by job id; [] = still alive


def serve(batcher: Batcher, inbox: Inbox, emit: Emit, *, check_picked: Callable[[], bool]) -> None:
    """Take messages (requests read by the intake, Cancel, Close) and run steps until closed.

    Between steps every waiting message is taken, so a newcomer joins at the next step and a cancel
    takes effect there. A step's events go out together (one message through the worker's pipe a step, not
    one a token: several answers, and several tokens each with drafts). While answers run, something is
    emitted at least every HEARTBEAT_S so that the supervisor can tell a slow step from a hung card."""
    last = time.monotonic()
    while True:
        message = inbox(not batcher.busy())
        while message is not None:
            if isinstance(message, Close):
                return
            if isinstance(message, Ready):
                emit([(message.job_id, _started(batcher, message, check_picked=check_picked()))])
            elif isinstance(message, Cancel):
                batcher.cancel(message.job_id)
            message = inbox(False)
        events = batcher.step()
        if events:
            emit(list(events))
            last = time.monotonic()
        if time.monotonic() - last >= HEARTBEAT_S:
            emit([])
            last = time.monotonic()


def _started(batcher: Batcher, ready: Ready, *, check_picked: bool) -> CacheUse | Event:
    """Start a read request in a slot: how its prompt's KV was found, or why it failed."""
    try:
        if isinstance(ready.prepared, EngineError):
            raise ready.prepared
        return batcher.add(ready.job_id, ready.request, ready.prepared, check_picked=check_picked)
    except EngineError as err:
        return err.failed()


HEARTBEAT_S = 0.5
