"""The card agent: it refuses the LAN, serves health from the card's sysfs, stops on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.card_agent import AddressRefused, check_address
from launcher.cluster import CardProcesses
from tests.harness import PORT_OFFSET, card_settings, get_json, rk_board


@pytest.mark.parametrize(
    ("host", "bound"),
    [("127.0.0.1", "127.0.0.1"), ("127.0.0.2", "127.0.0.2"), ("::1", "::1"), ("localhost", "127.0.0.1")],
)
def test_loopback_is_allowed(host: str, bound: str) -> None:
    assert check_address(host, []) == bound


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "10.0.0.5", "::"])
def test_any_other_address_is_refused_with_the_reason(host: str) -> None:
    with pytest.raises(AddressRefused, match="no authentication"):
        check_address(host, [])


def test_an_internal_link_address_can_be_allowed_explicitly() -> None:
    check_address("10.10.0.2", ["10.10.0.2"])
    with pytest.raises(AddressRefused):
        check_address("10.10.0.3", ["10.10.0.2"])


def test_the_agent_exits_instead_of_binding_the_lan() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "launcher.card_agent", "--card", "0", "--listen", "0.0.0.0:30299"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to serve RPC on 0.0.0.0" in done.stderr


@pytest.mark.cards  # starts a card agent of its own
def test_health_reads_the_boards_sensors_and_sigterm_stops_it(tmp_path: Path) -> None:
    board = rk_board(tmp_path / "board", zones={"npu-thermal": 55500}, npu_load="NPU load:  Core0: 30%, Core1: 10%,\n")
    cards = CardProcesses(card_settings(30290 + PORT_OFFSET, 1, tmp_path / "cache", sysfs_root=board))
    cards.start_all()
    try:
        health = get_json(cards.settings.health_url(cards.settings.cards[0]))
        assert health["card"] == 0 and health["rpc_endpoint"] == f"127.0.0.1:{30290 + PORT_OFFSET}"
        assert health["temperature_c"] == 55.5
        assert (health["load_pct"], health["load_source"]) == (20.0, "npu")
        assert 0 < health["mem_used_bytes"] < health["mem_total_bytes"]
        assert health["uptime_s"] >= 0
        (board / "sys/class/thermal/thermal_zone0/temp").write_text("81000\n")
        assert get_json(cards.settings.health_url(cards.settings.cards[0]))["temperature_c"] == 81.0
        proc = cards.procs[0]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        cards.stop_all()


def test_a_card_without_sensors_says_so(engine_cards: CardProcesses) -> None:
    health = get_json(engine_cards.settings.health_url(engine_cards.settings.cards[0]))
    assert health["temperature_c"] is None
    assert health["load_source"] == "process_cpu" and 0 <= health["load_pct"] <= 100


def test_rpc_port_in_use_is_a_clear_failure(appliance_cards: CardProcesses) -> None:
    taken = appliance_cards.settings.cards[0]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "launcher.card_agent", "--card", "9", "--listen", taken, "--health-port", "31299"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "could not listen" in done.stderr or "Failed to create server socket" in done.stderr
    assert time.monotonic() - started < 40
