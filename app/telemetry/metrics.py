"""The appliance in Prometheus text format (served at /metrics on the web port)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_CARD_GAUGES = [
    ("card_up", "Whether the card answers its health check (1) or not (0: down or not responding).",
     lambda c: 0 if c["state"] in ("down", "not-responding") else 1),
    ("card_load_percent", "Card load: NPU load where the board reports it, else the agent's CPU use.",
     lambda c: c["load_pct"]),
    ("card_temperature_celsius", "Card temperature; absent when the card has no sensor.",
     lambda c: c["temperature_c"]),
    ("card_memory_used_bytes", "Memory the card holds.", lambda c: c["mem_used_bytes"]),
    ("card_memory_total_bytes", "Memory the card has.", lambda c: c["mem_total_bytes"]),
    ("card_layers", "Model layers placed on the card.", lambda c: len(c["layers"])),
    ("card_model_bytes", "Bytes of model weights placed on the card.", lambda c: c["layer_bytes"]),
    ("card_tokens_per_second", "Tokens per second passing through the card.", lambda c: c["tokens_per_s"]),
]
_COUNTERS = [
    ("engine_tokens_generated_total", "Tokens generated since the app started.", "tokens"),
    ("engine_requests_total", "Answers started since the app started.", "requests"),
    ("engine_errors_total", "Answers that failed since the app started.", "errors"),
    ("engine_cancelled_total", "Answers stopped before their end.", "cancelled"),
]
_CACHE = [  # the engine status keys of prefix reuse (engine/meter.py CacheMeter)
    ("engine_prefix_hits_total", "Answers that found part of their prompt's KV in their slot.", "prefix_hits",
     "counter"),
    ("engine_host_restores_total", "Answers whose prompt's KV came back from the host KV cache.", "host_restores",
     "counter"),
    ("engine_cached_tokens_total", "Prompt tokens not read again: their KV was in a slot or the host cache.",
     "cached_tokens_total", "counter"),
    ("engine_kv_host_bytes", "Bytes of KV held in the host KV cache.", "kv_host_bytes", "gauge"),
    ("engine_kv_host_entries", "Conversations whose KV the host KV cache holds.", "kv_host_entries", "gauge"),
]


def render(status: dict[str, Any], counters: dict[str, int]) -> str:
    return "".join(_lines(status, counters))


def _lines(status: dict[str, Any], counters: dict[str, int]) -> Iterator[str]:
    for name, help_text, read in _CARD_GAUGES:
        yield from _header(name, help_text, "gauge")
        for card in status["cards"]:
            value = read(card)
            if value is not None:
                yield f'quartet_{name}{{card="{card["index"]}",endpoint="{card["endpoint"]}"}} {float(value)}\n'
    for name, help_text, key in _COUNTERS:
        yield from _header(name, help_text, "counter")
        yield f"quartet_{name} {counters[key]}\n"
    for name, help_text, key, kind in _CACHE:
        yield from _header(name, help_text, kind)
        yield f"quartet_{name} {status.get(key, 0)}\n"
    last = status.get("last_stats") or {}
    gauges = [
        ("engine_ready", "Whether the engine can answer (1) or not (0).", 1 if status["state"] == "ready" else 0),
        ("engine_queue_length", "Answers waiting for the engine.", status["queue"]["waiting"]),
        ("engine_running_answers", "Answers in the engine's slots, generating together.", status["queue"]["running"]),
        ("engine_aggregate_tokens_per_second", "Tokens per second across every running answer.",
         status.get("live_tps", 0.0)),
        ("engine_decode_tokens_per_second", "Decode speed of the last answer.", last.get("decode_tps", 0.0)),
        ("engine_time_to_first_token_seconds", "Time to first token of the last answer.", last.get("ttft_s", 0.0)),
        ("engine_thermal_hold", "Whether new answers wait for a hot card (1) or not (0).",
         1 if status["thermal"]["hold"] else 0),
    ]
    for name, help_text, value in gauges:
        yield from _header(name, help_text, "gauge")
        yield f"quartet_{name} {float(value)}\n"


def _header(name: str, help_text: str, kind: str) -> Iterator[str]:
    yield f"# HELP quartet_{name} {help_text}\n"
    yield f"# TYPE quartet_{name} {kind}\n"
