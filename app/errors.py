"""One error vocabulary: a failure written for people, with a `kind` that callers branch on.

Every error a person can meet derives from `QuartetError`: its message says what happened, to what,
and what to do (for a person); its `kind` says what sort of failure it is (for code: branch on it,
never on the message text); `card` names the card to blame, where one is. The kinds are `KINDS`,
documented in docs/development.md ("Errors"). They are translated for people in exactly two places:
`app/ui/errors.py` (Gradio handlers) and `app/api/errors.py` (the `/v1` routes: HTTP status and
OpenAI's error body).
"""

from __future__ import annotations

from typing import Literal, get_args

Kind = Literal[
    # what was asked cannot be done as asked: the person can change it and try again
    "request",  # bad input: an empty message, a bad argument or setting, a schema or tool we cannot use
    "not_found",  # no such conversation, document, model, template or job (someone else's looks the same)
    "denied",  # not allowed: no admin session, a wrong password, a throttled login, a wrong API key
    "too_large",  # a file or a request over a limit
    "busy",  # something else holds what is needed (a switch, another admin action, a full queue)
    # a file that cannot be read (a document's `error_kind`, app/knowledge/loaders/types.py)
    "unsupported",
    "encrypted",
    "no_text",
    "corrupt",
    "empty",
    # the engine (app/engine/events.py FailureKind)
    "context",  # the prompt overflows the model's context
    "card",  # a card failed; `card` names it
    "timeout",  # an answer or a file took longer than allowed
    "cancelled",  # stopped before it ended
    "engine",  # the engine is not available (loading, recovering, failed)
    # the data folder's disk has no room for what must be written (SQLite: SQLITE_FULL)
    "disk_full",
    # none of the above: a fault of ours, worded by the translation with a pointer to the log
    "internal",
]
KINDS: tuple[Kind, ...] = get_args(Kind)


class QuartetError(Exception):
    """A failure to explain to a person; `kind` says what sort it is, `card` which card when one is to blame."""

    def __init__(self, message: str, *, kind: Kind, card: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind: Kind = kind
        self.card = card


class Refused(QuartetError, ValueError):
    """What was asked cannot be done as asked (kind `request` unless told): the person can change it."""

    def __init__(self, message: str, *, kind: Kind = "request") -> None:
        super().__init__(message, kind=kind)


class NotFound(QuartetError, LookupError):
    """There is no such thing (or it is someone else's, which looks the same)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="not_found")
