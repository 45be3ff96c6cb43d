"""Which conversation each page shows, so that an answer draws only on a page that still shows it.

Gradio sends a queued step's frames on the page's one event stream, in order, each before the step that
made it runs on; a switch to another chat answers at once (not through the queue: a message typed right
after "New chat" must find it done), so its answer can overtake a frame of the old answer still on the
stream. So a switch returns only once no frame of the old answer is on its way, and the page then draws
the shown chat again through the queue: that frame comes after the old answer's last. (Checking and then
drawing, without either, let the old answer's first frame land after the switch on a busy box.)"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import TypeVar

Frame = TypeVar("Frame")


class Screens:
    """The pages' shown conversations (None: a new chat), and the answers' frames on their way to them."""

    def __init__(self, *, wait_s: float = 1.0, pages: int = 4096) -> None:
        self._changed = threading.Condition()
        self._shown: dict[str, str | None] = {}
        self._on_the_way: Counter[str] = Counter()
        # a frame whose step was cancelled (another chat picked) is never resumed: wait that long, no longer
        self._wait_s = wait_s
        self._pages = pages  # pages long closed are forgotten

    def shows(self, page: str, default: str | None = None) -> str | None:
        with self._changed:
            return self._shown.get(page, default)

    def show(self, page: str, cid: str | None) -> None:
        """`page` shows `cid` from now on; returns once no frame of another answer is still on its way."""
        with self._changed:
            if page not in self._shown and len(self._shown) >= self._pages:
                self._shown.pop(next(iter(self._shown)))
            self._shown[page] = cid
            self._changed.wait_for(lambda: not self._on_the_way[page], timeout=self._wait_s)

    def claim(self, page: str, before: str | None, cid: str) -> bool:
        """A message sent from `before` (None: a new chat) now shows its conversation `cid` — unless the page
        was switched to another one meanwhile (then it keeps that one, and the answer draws nothing)."""
        with self._changed:
            if self._shown.get(page, before) != before:
                return False
            self._shown[page] = cid
            return True

    def frames(self, page: str, cid: str, frames: Iterator[Frame], gone: Frame | None = None) -> Iterator[Frame]:
        """Passes an answer's frames on while `page` shows `cid`; ends (closing `frames`) once it does not,
        with `gone` as its last frame: Gradio applies a step's last frame once more as the step ends, and
        that one was drawn for the chat the page has left."""
        try:
            for frame in frames:
                with self._changed:
                    left = self._shown.get(page, cid) != cid
                    if not left:
                        self._on_the_way[page] += 1
                if left:
                    if gone is not None:
                        yield gone
                    return
                try:
                    yield frame  # Gradio resumes this step only after the frame is queued for the page
                finally:
                    with self._changed:
                        self._on_the_way[page] -= 1
                        if not self._on_the_way[page]:
                            del self._on_the_way[page]
                        self._changed.notify_all()
        finally:
            getattr(frames, "close", lambda: None)()
