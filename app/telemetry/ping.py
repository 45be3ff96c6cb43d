"""Pinging card endpoints for the admin, changing nothing: each one's RPC port and its agent's health."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from app.engine.cards import probe_card
from app.telemetry.monitor import read_health


def ping(endpoints: list[str], *, in_use: set[str], health_url: Callable[[str], str]) -> list[dict[str, Any]]:
    """Per endpoint: `rpc` ("ok", "in use by the engine" or why it did not answer) with the connect
    time, and the health reading (temperature, memory) or why there was none."""
    rows = []
    for index, endpoint in enumerate(endpoints):
        started = time.monotonic()
        # a card's RPC server serves one client: while the engine holds it, a probe would only
        # wait in its accept queue, so a card in use is reported as such
        rpc = "in use by the engine" if endpoint in in_use else probe_card(endpoint, timeout=1.0) or "ok"
        row: dict[str, Any] = {
            "card": index,
            "endpoint": endpoint,
            "rpc": rpc,
            "rpc_ms": round(1000 * (time.monotonic() - started), 1) if rpc == "ok" else None,
        }
        try:
            health = read_health(health_url(endpoint), 1.0)
            row |= {
                "health": "ok",
                "temperature_c": health.get("temperature_c"),
                "mem_used_gib": round(health.get("mem_used_bytes", 0) / 2**30, 2),
                "mem_total_gib": round(health.get("mem_total_bytes", 0) / 2**30, 2),
            }
        except Exception as err:  # the card agent's health port is down or not a card agent
            row |= {"health": f"no answer: {getattr(err, 'reason', err)}"}
        rows.append(row)
    return rows
