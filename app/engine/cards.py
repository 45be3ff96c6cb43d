"""Is a card there? A TCP connect to its RPC port, the one thing every card (real or local) answers.

ggml aborts the whole process when it cannot reach a registered card (docs/design.md, engine fact 5), so cards
are probed before registration and, after a failure, to name the card that went away.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from app.engine.events import EngineError


def probe_card(endpoint: str, *, timeout: float = 0.5) -> str | None:
    """None when the card's RPC port accepts a connection, else why not ("refused", "timed out")."""
    host, _, port = endpoint.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except TimeoutError:
        return "timed out"
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as err:
        return err.strerror or type(err).__name__


def first_card_down(cards: Sequence[str]) -> tuple[int, str, str] | None:
    """(index, endpoint, reason) of the first card that does not answer, or None."""
    for index, endpoint in enumerate(cards):
        reason = probe_card(endpoint)
        if reason:
            return index, endpoint, reason
    return None


def check_cards(cards: Sequence[str]) -> None:
    """Raise EngineError naming the first card that does not answer."""
    down = first_card_down(cards)
    if down:
        index, endpoint, reason = down
        raise EngineError(f"card {index} ({endpoint}) does not answer: {reason}", card=endpoint)
