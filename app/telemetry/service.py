"""Telemetry: each card's state and readings next to what the engine does with it, over time.

`status()` is the appliance now: the engine's status and the monitor's latest samples, as one frozen
`ApplianceStatus` that the panels, /status, /cards, /metrics and /health read. The card monitor calls
`record(samples)` after every poll (about once a second, off the generation path): those samples make
the history the plots show and drive thermal protection.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Literal

from app.engine.service import EngineService
from app.engine.status import EngineStatus, Placed
from app.telemetry.monitor import CardMonitor, CardSample
from app.telemetry.views import ApplianceStatus, CardState, CardView, Thermal

HISTORY_S = 600.0  # ten minutes of samples in memory


class Telemetry:
    def __init__(
        self, *, engine: EngineService, monitor: CardMonitor, warning_c: float, critical_c: float, every_s: float
    ) -> None:
        self.engine = engine
        self.monitor = monitor
        self.warning_c = warning_c
        self.critical_c = critical_c
        self._history: deque[dict[str, Any]] = deque(maxlen=max(1, int(HISTORY_S / every_s)))
        self._hot: tuple[int, float] | None = None
        self._lock = threading.Lock()

    def status(self) -> ApplianceStatus:
        """The engine's status with every card's view (state, readings, layers, tokens/s), read now."""
        return self._status(self.monitor.snapshot())

    def _status(self, samples: list[CardSample]) -> ApplianceStatus:
        engine = self.engine.status()
        placement = {card.endpoint: card for card in engine.placement}
        cards = [self._view(sample, placement.get(sample.endpoint), engine) for sample in samples]
        thermal = Thermal(warning_c=self.warning_c, critical_c=self.critical_c, hold=self.thermal_hold())
        return ApplianceStatus.of(engine, cards, thermal)

    def _view(self, sample: CardSample, held: Placed | None, engine: EngineStatus) -> CardView:
        health = sample.health
        layers = held.layers if held else ()
        state: CardState = sample.state
        if state == "up" and engine.down_card == sample.endpoint:
            state = "down"  # the engine saw it fail before the next health poll
        generating = bool(engine.running and layers)
        if state == "up" and generating:
            state = "busy"
        temperature = health.get("temperature_c") if sample.state == "up" else None
        return CardView(
            index=sample.index,
            endpoint=sample.endpoint,
            state=state,
            reason=sample.reason,
            last_seen=sample.last_seen,
            load_pct=health.get("load_pct"),
            load_source=health.get("load_source"),
            temperature_c=temperature,
            thermal=self._thermal(temperature),
            mem_used_bytes=health.get("mem_used_bytes"),
            mem_total_bytes=health.get("mem_total_bytes"),
            layers=layers,
            layer_bytes=held.buffer_bytes if held else 0,
            tokens_per_s=engine.live_tps if generating and state != "down" else 0.0,
            health=health,
        )

    def _thermal(self, temperature: float | None) -> Literal["ok", "warning", "critical"] | None:
        if temperature is None:
            return None
        if temperature >= self.critical_c:
            return "critical"
        return "warning" if temperature >= self.warning_c else "ok"

    def record(self, samples: list[CardSample]) -> None:
        """After each poll, with that poll's samples: keep a point per card for the plots, and update
        thermal protection."""
        cards = self._status(samples).cards
        now = time.time()
        with self._lock:
            self._history.append(
                {
                    "t": now,
                    "cards": [
                        {
                            "card": c.index,
                            "tokens_per_s": c.tokens_per_s,
                            "load_pct": c.load_pct,
                            "temperature_c": c.temperature_c,
                        }
                        for c in cards
                    ],
                }
            )
            self._update_hot(cards)

    def _update_hot(self, cards: tuple[CardView, ...]) -> None:
        temps = [(c.index, c.temperature_c) for c in cards if c.temperature_c is not None]
        if self._hot is None:
            critical = [(i, t) for i, t in temps if t >= self.critical_c]
            self._hot = max(critical, key=lambda it: it[1]) if critical else None
        elif all(t < self.warning_c for _, t in temps):
            self._hot = None  # cooled below the warning level: answers may start again
        else:
            self._hot = max(temps, key=lambda it: it[1])

    def thermal_hold(self) -> str | None:
        with self._lock:
            hot = self._hot
        if hot is None:
            return None
        index, temperature = hot
        return (
            f"card {index} is too hot ({temperature:.0f} °C); new answers wait until every card is below "
            f"{self.warning_c:.0f} °C"
        )

    def history(self) -> list[dict[str, Any]]:
        """Rows (t, card, tokens_per_s, load_pct, temperature_c) for the last ten minutes."""
        with self._lock:
            points = list(self._history)
        return [{"t": point["t"], **card} for point in points for card in point["cards"]]
