"""One start/stop contract for everything that runs in the background, and one place that orders it.

A background service starts its threads in `start()` and ends them in `stop(timeout)`, returning within
about `timeout` seconds. The composition root starts them in the order `AppContext.background()` lists
them and an ExitStack stops them in the reverse order, whatever way the app ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import ExitStack
from typing import Protocol

STOP_TIMEOUT_S = 10.0


class Background(Protocol):
    def start(self) -> None: ...

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None: ...


def start_all(stack: ExitStack, services: Iterable[Background], *, timeout: float = STOP_TIMEOUT_S) -> None:
    """Start each service in turn; leaving `stack` stops those that started, last first."""
    for service in services:
        service.start()
        stack.callback(service.stop, timeout)
