"""Live card telemetry through the running appliance: tokens/s per card, down within 3 s, /metrics, heat."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gradio_api import Client
from tests.harness import API_KEY, Appliance, api_client, get_json, wait_until


def cards(c: Client) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = c.predict(api_name="/cards")
    return found


def test_while_an_answer_streams_every_card_with_layers_shows_tokens(appliance: Appliance) -> None:
    c = api_client(appliance.url)
    job = c.submit("Write a long story about four friends.", "", "", 400, api_name="/chat")
    try:
        wait_until(lambda: job.outputs() and job.outputs()[-1][0], timeout=60)
        seen = wait_until(lambda: (now := cards(c)) and all(card["tokens_per_s"] > 0 for card in now) and now, 10)
        for card in seen:
            assert card["layers"] and card["state"] == "busy"
            assert card["temperature_c"] == 45.0 and card["thermal"] == "ok"
    finally:
        c.predict(api_name="/stop")
        job.result(timeout=30)
    idle = wait_until(lambda: (now := cards(c)) and all(card["tokens_per_s"] == 0 for card in now) and now, 5)
    assert {card["state"] for card in idle} == {"up"}


def test_metrics_parse_and_carry_one_series_per_card(appliance: Appliance) -> None:
    keyed = urllib.request.Request(appliance.url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(keyed, timeout=5) as response:
        text = response.read().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for name in (
        "quartet_card_up",
        "quartet_card_load_percent",
        "quartet_card_temperature_celsius",
        "quartet_card_memory_used_bytes",
        "quartet_card_layers",
        "quartet_card_tokens_per_second",
    ):
        series = families[name].samples
        assert sorted(s.labels["card"] for s in series) == ["0", "1", "2", "3"], name
    assert all(s.value == 1 for s in families["quartet_card_up"].samples)
    assert sum(s.value for s in families["quartet_card_layers"].samples) == 19
    assert families["quartet_engine_tokens_generated"].type == "counter"
    assert families["quartet_engine_queue_length"].samples[0].value == 0


def test_a_killed_card_shows_down_within_three_seconds(appliance: Appliance) -> None:
    c = api_client(appliance.url)
    appliance.card_agents.kill(0)
    killed = time.monotonic()
    try:
        down = wait_until(lambda: (now := cards(c)) and now[0]["state"] == "down" and now, timeout=3, every=0.1)
        assert time.monotonic() - killed < 3
        assert down[0]["reason"] in ("refused", "timeout", "reset")  # killed mid-probe: reset
        assert down[0]["last_seen"] is not None
    finally:
        appliance.card_agents.start(0)
        appliance.card_agents.wait_healthy(0)
        wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)


def _heat(appliance: Appliance, card: int, celsius: float) -> None:
    board = appliance.card_agents.settings.local_cards.sysfs_root.parent / f"card{card}"
    (board / "sys/class/thermal/thermal_zone1/temp").write_text(f"{int(celsius * 1000)}\n")


def test_a_critical_card_holds_new_answers_until_it_cools_below_warning(appliance: Appliance) -> None:
    c = api_client(appliance.url)
    try:
        _heat(appliance, 2, 97.0)
        wait_until(lambda: c.predict(api_name="/status")["thermal"]["hold"], timeout=5)
        assert cards(c)[2]["thermal"] == "critical"
        job = c.submit("Hello?", "", "", 8, api_name="/chat")
        held = wait_until(lambda: [o for o in job.outputs() if o[2]["held"]], timeout=10)
        assert "card 2 is too hot" in held[-1][2]["held"] and held[-1][2]["waiting"] == 1
        _heat(appliance, 2, 90.0)  # below critical, above warning: still held
        time.sleep(2.5)
        assert not job.done()
        assert cards(c)[2]["thermal"] == "warning"
        _heat(appliance, 2, 60.0)
        _answer, _cid, progress = job.result(timeout=30)
        assert progress["done"] and progress["stats"]["generated_tokens"] > 0
    finally:
        _heat(appliance, 2, 45.0)
    wait_until(lambda: not c.predict(api_name="/status")["thermal"]["hold"], timeout=5)


@pytest.mark.parametrize("path", ["/kiosk/", "/metrics", "/health"])
def test_pages_beside_the_app_are_served(appliance: Appliance, path: str) -> None:
    asked = urllib.request.Request(appliance.url + path, headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(asked, timeout=5) as response:
        assert response.status == 200


def test_why_a_card_is_down_is_said_in_a_word() -> None:
    """A card killed while its health was being read reset the connection: the page showed
    "[Errno 104] Connection reset by peer" where the other reasons are one word."""
    import http.client
    import urllib.error

    from app.telemetry.monitor import _reason

    assert _reason(urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))) == "refused"
    assert _reason(urllib.error.URLError(TimeoutError("timed out"))) == "timeout"
    assert _reason(ConnectionResetError(104, "Connection reset by peer")) == "reset"
    assert _reason(http.client.RemoteDisconnected("Remote end closed connection without response")) == "reset"
    assert _reason(urllib.error.URLError(ConnectionResetError(104, "Connection reset by peer"))) == "reset"
