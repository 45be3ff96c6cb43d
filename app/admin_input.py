"""What an admin types into the engine settings, checked before anything changes: each value in the
engine's type and within its bounds, or a refusal that names the setting; card endpoints the same."""

from __future__ import annotations

from typing import Any

from app.endpoint import Endpoint
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError

# The engine settings the admin may change, the whole numbers with their bounds.
SETTINGS = ("n_ctx", "n_threads", "n_batch", "n_ubatch", "kv_type", "tensor_split", "parallel", "background_slots")
_RANGES = {
    "n_ctx": (256, 2**20),
    "n_threads": (1, 256),
    "n_batch": (1, 2**16),
    "n_ubatch": (1, 2**16),
    "parallel": (1, 64),
}


def checked_settings(changes: dict[str, Any], config: EngineConfig) -> dict[str, Any]:
    """The admin's changes in the engine's types, or a refusal naming the setting."""
    unknown = set(changes) - set(SETTINGS)
    if unknown:
        raise EngineError(f"these engine settings cannot be changed here: {', '.join(sorted(unknown))}", kind="request")
    checked = dict(changes)
    for name, (low, high) in _RANGES.items():
        if name in checked:
            checked[name] = _count(name, checked[name], low, high)
    if "tensor_split" in checked:
        checked["tensor_split"] = _split(checked["tensor_split"], len(config.cards))
    if "background_slots" in checked:
        most = checked.get("parallel", config.parallel)
        checked["background_slots"] = _count("background_slots", checked["background_slots"], 1, most)
    return checked


def _count(name: str, value: Any, low: int, high: int) -> int:
    """A whole number from the admin within [low, high], or a refusal that says which setting and why."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = low - 1
    if not low <= number <= high:
        raise EngineError(f"{name} must be a whole number from {low} to {high}, not {value!r}", kind="request")
    return number


def _split(shares: Any, n_cards: int) -> tuple[float, ...] | None:
    """A tensor split from the admin ("1, 1, 1, 2" or a list): one share ≥ 0 per card; empty = llama's."""
    if shares is None or (isinstance(shares, str) and not shares.strip()):
        return None
    parts = shares.replace(",", " ").split() if isinstance(shares, str) else list(shares)
    try:
        values = tuple(float(part) for part in parts)
    except (TypeError, ValueError) as err:
        raise EngineError(f"tensor split {shares!r} is not a list of numbers", kind="request") from err
    if len(values) != n_cards:
        raise EngineError(f"tensor split needs one share per card ({n_cards}), not {len(values)}", kind="request")
    if any(v < 0 for v in values) or sum(values) <= 0:
        raise EngineError("tensor split shares must be ≥ 0 and not all 0", kind="request")
    return values


def valid_endpoints(endpoints: list[str]) -> list[str]:
    cards = [e.strip() for e in endpoints if e.strip()]
    if not cards:
        raise EngineError("at least one card endpoint is needed", kind="request")
    for card in cards:
        try:
            Endpoint.parse(card)
        except ValueError as err:
            raise EngineError(str(err), kind="request") from None
    duplicates = sorted({c for c in cards if cards.count(c) > 1})
    if duplicates:
        raise EngineError(f"card endpoint {duplicates[0]} is listed twice", kind="request")
    return cards
