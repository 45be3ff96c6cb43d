"""The appliance at a glance: the model, the queue, and each card with the layers it holds."""

from __future__ import annotations

from typing import Any

from app.engine.service import EngineService
from app.telemetry.monitor import CardMonitor


def appliance_status(engine: EngineService, monitor: CardMonitor) -> dict[str, Any]:
    status = engine.status()
    placement = {card["endpoint"]: card for card in status.pop("placement")}
    cards = []
    for sample in monitor.snapshot():
        held = placement.get(sample.endpoint, {})
        state = sample.state
        if state == "up" and status["down_card"] == sample.endpoint:
            state = "down"  # the engine saw it fail before the next health poll
        cards.append(
            {
                "index": sample.index,
                "endpoint": sample.endpoint,
                "state": state,
                "reason": sample.reason,
                "last_seen": sample.last_seen,
                "layers": list(held.get("layers", [])),
                "buffer_bytes": held.get("buffer_bytes", 0),
                "health": sample.health,
            }
        )
    status["cards"] = cards
    return status
