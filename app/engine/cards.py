"""Is a card there? A TCP connect to its RPC port, then (where the card runs our agent) its /health.

ggml aborts the whole process when it cannot reach a registered card (docs/design.md, engine fact 5), so cards
are probed before registration and, after a failure, to name the card that went away.

A card that is stopped but not dead (SIGSTOP, a wedged board) still completes TCP handshakes: the
kernel accepts into the listen backlog for it. Only a request that needs an answer tells: its
health endpoint then times out, and that card is "not responding".
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from app.endpoint import Endpoint
from app.engine.events import EngineError

HEALTH_TIMEOUT_S = 2.0
NOT_RESPONDING = "not responding"


def probe_card(endpoint: str, *, timeout: float = 0.5) -> str | None:
    """None when the card's RPC port accepts a connection, else why not ("connection refused", "not responding")."""
    card = Endpoint.parse(endpoint)
    try:
        with socket.create_connection((card.host, card.port), timeout=timeout):
            return None
    except TimeoutError:  # a stopped card's backlog is full: the handshake itself waits
        return NOT_RESPONDING
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as err:
        return err.strerror or type(err).__name__


def describe(index: int, endpoint: str, reason: str) -> str:
    """ "card 1 (host:port) is not responding" / "card 1 (host:port) is down (connection refused)"."""
    state = "not responding" if reason == NOT_RESPONDING else f"down ({reason})"
    return f"card {index} ({endpoint}) is {state}"


def health_url(endpoint: str, offset: int) -> str:
    return Endpoint.parse(endpoint).health_url(offset)


def probe_health(
    endpoint: str, *, offset: int, timeout: float = HEALTH_TIMEOUT_S, port_says: str | None = None
) -> str | None:
    """NOT_RESPONDING when the card's health endpoint accepts the request but sends no answer in time; None
    when it answers.

    Any other failure (no agent listening there, an HTTP error) says nothing about a hang: the card is judged
    by its RPC port alone, whose verdict is `port_says` (None: it took the connection)."""
    try:
        with urllib.request.urlopen(health_url(endpoint, offset), timeout=timeout) as response:
            response.read()
    except TimeoutError:
        return NOT_RESPONDING
    except urllib.error.URLError as err:
        return NOT_RESPONDING if isinstance(err.reason, TimeoutError) else port_says
    except OSError:
        return port_says
    return None


def card_problem(endpoint: str, *, health_offset: int | None = None) -> str | None:
    """Why this card cannot serve now, or None: its RPC port first, then (if known) its health.

    A connect that times out on the RPC port is not enough to call a card with our agent "not responding":
    ggml's RPC server serves one connection at a time and queues only one or two more (engine fact 11), so
    while it serves an engine, or a connection whose engine just died and it has not yet read to its end, a
    third probe waits unanswered like a stopped card's. There the agent's health endpoint, served by threads
    of its own, decides."""
    reason = probe_card(endpoint)
    if health_offset is not None and reason in (None, NOT_RESPONDING):
        return probe_health(endpoint, offset=health_offset, port_says=reason)
    return reason


def first_card_down(cards: Sequence[str], *, health_offset: int | None = None) -> tuple[int, str, str] | None:
    """(index, endpoint, reason) of the first card that is down or not responding, or None.

    The cards are asked side by side: a stopped card costs its health timeout once, not per card."""
    with ThreadPoolExecutor(max_workers=max(1, len(cards)), thread_name_prefix="card-probe") as pool:
        reasons = list(pool.map(lambda endpoint: card_problem(endpoint, health_offset=health_offset), cards))
    for index, (endpoint, reason) in enumerate(zip(cards, reasons, strict=True)):
        if reason:
            return index, endpoint, reason
    return None


def check_cards(cards: Sequence[str], *, health_offset: int | None = None) -> None:
    """Raise EngineError naming the first card that does not answer."""
    down = first_card_down(cards, health_offset=health_offset)
    if down:
        index, endpoint, reason = down
        raise EngineError(f"card {index} ({endpoint}) does not answer: {reason}", card=endpoint)
