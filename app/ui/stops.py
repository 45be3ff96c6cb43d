"""Stop buttons for answers that the engine holds for a page (Ask, Read it all): Stop marks the page's
answer stopped, and the answer (waiting in line or streaming) looks at the mark and ends cleanly.

Gradio's own `cancels=` was used before: it cancels the event's task while the answer's generator may be
blocked in a worker thread (waiting in the engine's line), so the generator could not be closed — the
ticket stayed in the line — and the page sometimes got the cancelled run's error, a red "Error"."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

import gradio as gr

from app.ui.callers import session_of

_KEPT = 4096  # pages long closed are forgotten first


class Stops:
    """One mark per (page session, what): `clear` when the button starts the work (before it waits in
    Gradio's queue: a Stop pressed meanwhile still counts), `stop` from the Stop button, `stopped(...)`
    is what the running answer asks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marks: dict[tuple[str, str], bool] = {}

    def clear(self, session: str, what: str) -> None:
        with self._lock:
            self._marks.pop((session, what), None)
            if len(self._marks) >= _KEPT:
                self._marks.pop(next(iter(self._marks)))
            self._marks[(session, what)] = False

    def stop(self, session: str, what: str) -> None:
        with self._lock:
            if (session, what) in self._marks:
                self._marks[(session, what)] = True

    def stopped(self, session: str, what: str) -> Callable[[], bool]:
        def asked() -> bool:
            with self._lock:
                return self._marks.get((session, what), False)

        return asked

    def marker(self, action: Literal["clear", "stop"], what: str) -> Callable[[gr.Request], None]:
        """A handler for a button: clears (the work's own button) or sets (Stop) the caller page's mark."""
        act = self.clear if action == "clear" else self.stop

        def mark(request: gr.Request) -> None:
            act(session_of(request), what)

        return mark
