"""The appliance's status as typed values: what the engine reports, the cards' view telemetry adds,
what `record` keeps from the samples it is handed, and /metrics written by prometheus_client."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.engine.engine_config import EngineConfig
from app.engine.kinds import backend_kind
from app.engine.service import EngineService
from app.engine.status import EngineStatus
from app.settings import DEMO_MODEL
from app.telemetry import metrics
from app.telemetry.monitor import CardMonitor, CardSample
from app.telemetry.service import Telemetry
from app.telemetry.views import ApplianceStatus, CardView, Thermal

CARDS = ("127.0.0.1:1", "127.0.0.1:2")
# the keys /status has always had (docs/api.md); new ones may be added, none may go
STATUS_KEYS = {
    "state",
    "message",
    "switching",
    "down_card",
    "isolated",
    "model",
    "queue",
    "live_tps",
    "last_stats",
    "last_cancel_s",
    "cards",
    "thermal",
}
CARD_KEYS = {
    "index",
    "endpoint",
    "state",
    "reason",
    "last_seen",
    "load_pct",
    "load_source",
    "temperature_c",
    "thermal",
    "mem_used_bytes",
    "mem_total_bytes",
    "layers",
    "layer_bytes",
    "tokens_per_s",
}


def telemetry() -> Telemetry:
    """The real engine service (not started: nothing loads) and card monitor (not polling)."""
    engine = EngineService(
        EngineConfig(model_path=DEMO_MODEL, model_name="demo", cards=CARDS, isolation=False), kinds=backend_kind
    )
    monitor = CardMonitor(lambda: CARDS, lambda card: f"http://{card}/health", every_s=1.0, timeout_s=0.1)
    return Telemetry(engine=engine, monitor=monitor, warning_c=80.0, critical_c=95.0, every_s=1.0)


def test_the_engine_status_is_typed_with_its_counters_defaulting_to_zero() -> None:
    status = telemetry().engine.status()
    assert isinstance(status, EngineStatus)
    assert (status.state, status.running, status.waiting, status.live_tps) == ("starting", 0, 0, 0.0)
    assert (status.prefix_hits, status.host_restores, status.cached_tokens_total) == (0, 0, 0)
    assert (status.kv_host_bytes, status.kv_host_entries, status.queue.parallel) == (0, 0, 4)
    with pytest.raises(Exception, match="frozen"):
        status.state = "ready"  # type: ignore[misc]
    with pytest.raises(TypeError):  # a value read by attribute, not a mapping (no `status["queue"]`)
        status["queue"]  # type: ignore[index]


@pytest.mark.parametrize("where", ["top", "grouped"])
def test_cache_counters_flow_through_wherever_the_engine_puts_them(where: str) -> None:
    counters = {
        "prefix_hits": 3,
        "host_restores": 1,
        "cached_tokens_total": 1500,
        "kv_host_bytes": 2**20,
        "kv_host_entries": 2,
    }
    raw: dict[str, object] = {"state": "ready", "message": "ok", "queue": {"running": 2, "waiting": 1, "parallel": 4}}
    raw |= counters if where == "top" else {"cache": counters}
    status = EngineStatus.model_validate(raw)
    assert {name: getattr(status, name) for name in counters} == counters
    assert (status.running, status.waiting) == (2, 1)


def test_the_status_endpoint_keeps_its_json_shape() -> None:
    shown = telemetry().status().model_dump(mode="json")
    assert set(shown) >= STATUS_KEYS and "placement" not in shown
    assert [set(card) - {"health"} for card in shown["cards"]] == [CARD_KEYS] * 2
    assert shown["queue"]["running"] == 0 and shown["thermal"] == {"warning_c": 80.0, "critical_c": 95.0, "hold": None}
    assert ApplianceStatus.model_validate(shown).cards[1].endpoint == CARDS[1]  # what a client gets reads back


def test_record_keeps_the_samples_it_is_handed() -> None:
    """The monitor has not polled (its snapshot says "unknown"); what `record` is handed is what counts."""
    seen = telemetry()
    hot = {"temperature_c": 97.0, "load_pct": 12.0, "mem_used_bytes": 5, "mem_total_bytes": 10}
    seen.record([CardSample(0, CARDS[0], "up", None, 1.0, hot), CardSample(1, CARDS[1], "down", "refused")])
    assert [(row["card"], row["temperature_c"], row["load_pct"]) for row in seen.history()] == [
        (0, 97.0, 12.0),
        (1, None, None),
    ]
    assert "card 0 is too hot (97 °C)" in (seen.thermal_hold() or "")
    assert [card.state for card in seen.status().cards] == ["unknown", "unknown"]  # the monitor's own view


def status_with(endpoint: str, model: str) -> ApplianceStatus:
    engine = EngineStatus.model_validate(
        {
            "state": "ready",
            "message": "ready",
            "queue": {"running": 3, "waiting": 2, "parallel": 4},
            "model": {"name": model, "gguf_file": "/m/x.gguf", "n_layers": 18, "n_ctx": 4096, "load_s": 1.0},
            "live_tps": 41.5,
            "prefix_hits": 7,
            "cached_tokens_total": 1234,
            "kv_host_bytes": 4096,
            "kv_host_entries": 1,
        }
    )
    card = CardView(
        index=0,
        endpoint=endpoint,
        state="busy",
        temperature_c=45.0,
        thermal="ok",
        load_pct=30.0,
        mem_used_bytes=100,
        mem_total_bytes=1000,
        layers=(0, 1),
        layer_bytes=50,
        tokens_per_s=41.5,
    )
    return ApplianceStatus.of(engine, [card], Thermal(warning_c=80, critical_c=95))


def scrape(status: ApplianceStatus) -> dict[str, list[tuple[dict[str, str], float]]]:
    counters = {"tokens": 10, "prompt_tokens": 70, "requests": 2, "errors": 0, "cancelled": 1}
    text = metrics.render(metrics.registry(lambda: status, lambda: counters)).decode()
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_metrics_escape_label_values() -> None:
    """A card endpoint or model name with quotes, a backslash or a newline stays one well-formed label
    (the hand-written format broke the whole page on such a value)."""
    endpoint, model = 'card "one"\\\nhost:1', 'Model "x"\nline two'
    families = scrape(status_with(endpoint, model))
    assert families["quartet_card_up"] == [({"card": "0", "endpoint": endpoint}, 1.0)]
    assert families["quartet_engine_model_info"][0][0]["name"] == model


def test_metrics_keep_their_names_and_add_slots_and_cache() -> None:
    families = scrape(status_with("127.0.0.1:1", "demo"))
    kept = [
        "quartet_card_up",
        "quartet_card_load_percent",
        "quartet_card_temperature_celsius",
        "quartet_card_memory_used_bytes",
        "quartet_card_memory_total_bytes",
        "quartet_card_layers",
        "quartet_card_model_bytes",
        "quartet_card_tokens_per_second",
        "quartet_engine_tokens_generated",
        "quartet_engine_requests",
        "quartet_engine_errors",
        "quartet_engine_cancelled",
        "quartet_engine_ready",
        "quartet_engine_queue_length",
        "quartet_engine_running_answers",
        "quartet_engine_aggregate_tokens_per_second",
        "quartet_engine_decode_tokens_per_second",
        "quartet_engine_time_to_first_token_seconds",
        "quartet_engine_thermal_hold",
    ]
    assert [name for name in kept if name not in families] == []
    value = {name: samples[0][1] for name, samples in families.items() if samples}
    assert value["quartet_engine_tokens_generated"] == 10 and value["quartet_engine_cancelled"] == 1
    assert value["quartet_engine_prompt_tokens"] == 70
    assert (value["quartet_engine_running_answers"], value["quartet_engine_slots"]) == (3, 4)
    assert value["quartet_engine_queue_length"] == 2 and value["quartet_engine_aggregate_tokens_per_second"] == 41.5
    assert value["quartet_engine_prefix_hits"] == 7 and value["quartet_engine_cached_tokens"] == 1234
    assert value["quartet_engine_kv_host_bytes"] == 4096 and value["quartet_card_layers"] == 2


def test_the_metrics_registry_is_the_apps_own() -> None:
    from prometheus_client import REGISTRY

    metrics.registry(lambda: status_with("127.0.0.1:1", "demo"), dict)
    assert "quartet_card_up" not in {m.name for m in REGISTRY.collect()}


def test_the_header_and_the_cards_tab_show_the_slots_and_the_aggregate_rate() -> None:
    from app.ui import display, panels

    status = status_with("127.0.0.1:1", "demo")
    assert "3 running · 2 waiting · 41.5 tok/s" in display.header_html(status)
    overall = panels.overall(status)
    assert "3 of 4 slots running · 2 waiting" in overall and "decode 41.5 tok/s (live, all answers)" in overall
    assert "card 0" in panels.card_strip(status) and "layers 0–1" in panels.card_strip(status)
