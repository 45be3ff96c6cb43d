"""How far a model load has got on each card, measured at the cards, not guessed from time.

While a model loads, each card's agent reports its memory; the memory it gained since the lowest point
of this load (after the old model left) is set against the weights llama's layer split sends that card
(from the GGUF's tensor table; the last card also holds the output matrix)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.engine.llama import card_fit
from app.engine.llama.gguf_header import HeaderError
from app.engine.service import EngineService
from app.telemetry.monitor import read_health
from app.telemetry.views import LoadRow


class LoadProgress:
    def __init__(
        self, engine: EngineService, *, health_url: Callable[[str], str], layer_bytes: Callable[[], dict[str, int]]
    ) -> None:
        """`layer_bytes()` gives, per card endpoint, the bytes of the model it holds now."""
        self.engine, self.health_url, self.layer_bytes = engine, health_url, layer_bytes
        self._lowest: dict[str, int] = {}  # per card endpoint: lowest memory seen during this load
        self._expected: tuple[Any, list[int]] = (None, [])  # (model, cards, split) → weights per card

    def note_baseline(self) -> None:
        """Before a load: each card's memory without the model it holds now, where the next load starts."""
        self._lowest = {}
        for endpoint, held in self.layer_bytes().items():
            used = self._memory_used(endpoint)
            if used is not None:
                self._lowest[endpoint] = max(0, used - held)

    def rows(self) -> list[LoadRow]:
        """Per card while a model loads (else []): loaded and expected GiB and the percentage, or pct None."""
        config = self.engine.config
        if self.engine.status().state != "loading" or config.backend != "cards":  # an upstream loads nothing here
            return []
        key = (str(config.model_path), len(config.cards), config.tensor_split)
        if self._expected[0] != key:
            try:
                self._expected = (
                    key,
                    card_fit.weights_per_card(config.model_path, len(config.cards), config.tensor_split),
                )
            except (OSError, HeaderError):
                return []
        rows = []
        for index, (endpoint, expected) in enumerate(zip(config.cards, self._expected[1], strict=True)):
            used = self._memory_used(endpoint)
            if used is None or not expected:
                rows.append(LoadRow(card=index, endpoint=endpoint))
                continue
            low = self._lowest[endpoint] = min(self._lowest.get(endpoint, used), used)
            rows.append(load_row(index, endpoint, gained=used - low, expected=expected))
        return rows

    def _memory_used(self, endpoint: str) -> int | None:
        # read now, not from the card monitor: its once-a-second samples miss most of a short load
        try:
            return int(read_health(self.health_url(endpoint), 0.5)["mem_used_bytes"])
        except Exception:  # no reading from this card now
            return None


def load_row(card: int, endpoint: str, *, gained: int, expected: int) -> LoadRow:
    """One card's row. Its memory grows by more than its weights (buffers, the KV cache, its other
    processes): the estimate is then what it has gained, never a share "1.05 of ≈0.02 GiB (100 %)"."""
    total = max(expected, gained)
    return LoadRow(
        card=card,
        endpoint=endpoint,
        loaded_gib=round(gained / 2**30, 2),
        expected_gib=round(expected / 2**30, 2),
        pct=min(99, round(100 * gained / total)),
        loaded_bytes=gained,
        expected_bytes=total,
    )
