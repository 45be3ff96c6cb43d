"""The appliance in Prometheus text format (served at /metrics on the web port).

A collector on a registry of the app's own reads the appliance's status and the engine's counters at
each scrape; prometheus_client writes the format (label values escaped, counters with `_total`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from app.telemetry.views import ApplianceStatus, CardView

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_CARD_GAUGES: list[tuple[str, str, Callable[[CardView], float | None]]] = [
    (
        "card_up",
        "Whether the card answers its health check (1) or not (0: down or not responding).",
        lambda c: 0 if c.failing else 1,
    ),
    (
        "card_load_percent",
        "Card load: NPU load where the board reports it, else the agent's CPU use.",
        lambda c: c.load_pct,
    ),
    ("card_temperature_celsius", "Card temperature; absent when the card has no sensor.", lambda c: c.temperature_c),
    ("card_memory_used_bytes", "Memory the card holds.", lambda c: c.mem_used_bytes),
    ("card_memory_total_bytes", "Memory the card has.", lambda c: c.mem_total_bytes),
    ("card_layers", "Model layers placed on the card.", lambda c: len(c.layers)),
    ("card_model_bytes", "Bytes of model weights placed on the card.", lambda c: c.layer_bytes),
    ("card_tokens_per_second", "Tokens per second passing through the card.", lambda c: c.tokens_per_s),
]
# name (without _total), help, key in the engine's Counters
_COUNTERS = [
    ("engine_tokens_generated", "Tokens generated since the app started.", "tokens"),
    ("engine_prompt_tokens", "Prompt tokens of the answers that ended, cached ones included.", "prompt_tokens"),
    ("engine_requests", "Answers started since the app started.", "requests"),
    ("engine_errors", "Answers that failed since the app started.", "errors"),
    ("engine_cancelled", "Answers stopped before their end.", "cancelled"),
    (
        "engine_drafted_tokens",
        "Tokens speculative decoding drafted from an answer's context and checked.",
        "drafted_tokens",
    ),
    ("engine_accepted_tokens", "Drafted tokens the model kept (each saved a step).", "accepted_tokens"),
    (
        "engine_decode_steps",
        "Engine steps that gave ended answers tokens (tokens generated ÷ steps: per step).",
        "decode_steps",
    ),
]
_CACHE_COUNTERS: list[tuple[str, str, Callable[[ApplianceStatus], float]]] = [
    (
        "engine_prefix_hits",
        "Answers that found the start of their prompt in a slot's KV cache.",
        lambda s: s.prefix_hits,
    ),
    ("engine_host_restores", "Conversations whose KV cache was restored from host memory.", lambda s: s.host_restores),
    (
        "engine_cached_tokens",
        "Prompt tokens taken from a cache instead of computed again.",
        lambda s: s.cached_tokens_total,
    ),
]


def _gauges(status: ApplianceStatus) -> list[tuple[str, str, float]]:
    last = status.last_stats or {}
    return [
        ("engine_ready", "Whether the engine can answer (1) or not (0).", 1 if status.state == "ready" else 0),
        ("engine_queue_length", "Answers waiting for the engine.", status.waiting),
        ("engine_running_answers", "Answers in the engine's slots, generating together.", status.running),
        ("engine_slots", "Slots: answers the engine generates at once (parallel).", status.queue.parallel),
        (
            "engine_background_answers",
            "Background answers (extraction, summaries) in the slots.",
            status.queue.background,
        ),
        ("engine_aggregate_tokens_per_second", "Tokens per second across every running answer.", status.live_tps),
        ("engine_decode_tokens_per_second", "Decode speed of the last answer.", float(last.get("decode_tps", 0.0))),
        (
            "engine_time_to_first_token_seconds",
            "Time to first token of the last answer.",
            float(last.get("ttft_s", 0.0)),
        ),
        (
            "engine_thermal_hold",
            "Whether new answers wait for a hot card (1) or not (0).",
            1 if status.thermal.hold else 0,
        ),
        (
            "engine_kv_host_bytes",
            "KV cache kept in host memory for conversations that left their slot.",
            status.kv_host_bytes,
        ),
        ("engine_kv_host_entries", "Conversations whose KV cache is kept in host memory.", status.kv_host_entries),
    ]


class ApplianceCollector(Collector):
    """Reads `status()` and `counters()` at every scrape."""

    def __init__(self, status: Callable[[], ApplianceStatus], counters: Callable[[], dict[str, int]]) -> None:
        self.status, self.counters = status, counters

    def collect(self) -> Iterator[Metric]:
        status, counters = self.status(), self.counters()
        yield from _card_families(status)
        for name, help_text, key in _COUNTERS:
            yield CounterMetricFamily(f"quartet_{name}", help_text, value=counters.get(key, 0))
        for name, help_text, read in _CACHE_COUNTERS:
            yield CounterMetricFamily(f"quartet_{name}", help_text, value=read(status))
        for name, help_text, value in _gauges(status):
            yield GaugeMetricFamily(f"quartet_{name}", help_text, value=float(value))
        if status.model is not None:
            model = InfoMetricFamily("quartet_engine_model", "The loaded model.")
            model.add_metric([], {"name": status.model.name, "n_ctx": str(status.model.n_ctx)})
            yield model


def _card_families(status: ApplianceStatus) -> Iterator[Metric]:
    for name, help_text, read in _CARD_GAUGES:
        family = GaugeMetricFamily(f"quartet_{name}", help_text, labels=["card", "endpoint"])
        for card in status.cards:
            value = read(card)
            if value is not None:
                family.add_metric([str(card.index), card.endpoint], float(value))
        yield family


def registry(status: Callable[[], ApplianceStatus], counters: Callable[[], dict[str, int]]) -> CollectorRegistry:
    """A registry of the app's own (not prometheus_client's global one), holding the appliance's collector."""
    own = CollectorRegistry(auto_describe=False)
    own.register(ApplianceCollector(status, counters))
    return own


def render(own: CollectorRegistry) -> bytes:
    return generate_latest(own)
