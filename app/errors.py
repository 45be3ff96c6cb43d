"""One error vocabulary: a failure written for people, with a `kind` that callers branch on.

Every error that crosses a layer says what happened (its message, for a person), what sort of failure
it is (`kind`, for code: never match the message text) and, where one is to blame, which card. The
engine's errors are the first to share it (`EngineError`, kinds in app/engine/events.py).
"""

from __future__ import annotations


class QuartetError(Exception):
    """A failure to explain to a person; `kind` says what sort it is, `card` which card when one is to blame."""

    def __init__(self, message: str, *, kind: str, card: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.card = card
