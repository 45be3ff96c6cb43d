"""gradio_client's Client with one race of its own closed, for every test that calls the app's named endpoints.

With the `sse_v3` protocol one stream per session carries every event's messages, and the server closes it
right after the last pending event's `process_completed`. The client's reader reads that close a moment
later. A call sent in between is tied to the closing reader, which hands it "cancelled" as it ends: the
server runs the call, the test gets `CancelledError`. A busy machine (or a proxy holding the close back,
`test_gradio_api.py`) widens the moment: calls one after another on one Client lose one in two. So a
call here first waits, up to `SETTLE_S`, for a reader with no call left to finish closing. It reads the
Client's own fields (`stream_open`, `pending_event_ids`, `pending_lock`; gradio_client 2.7); without
them it waits for nothing, and `test_gradio_api.py` says so."""

from __future__ import annotations

import time
from typing import Any

from gradio_client import Client as _Client

SETTLE_S = 5.0


class Client(_Client):  # type: ignore[misc]
    def submit(self, *args: Any, **kwargs: Any) -> Any:
        self.settle()
        return super().submit(*args, **kwargs)

    def closing(self) -> bool:
        """A stream is open with no call of ours left on it: the server's close is on its way."""
        lock = getattr(self, "pending_lock", None)
        if lock is None or not hasattr(self, "stream_open"):
            return False
        with lock:
            return bool(self.stream_open) and not getattr(self, "pending_event_ids", True)

    def settle(self) -> None:
        deadline = time.monotonic() + SETTLE_S
        while self.closing() and time.monotonic() < deadline:
            time.sleep(0.01)
