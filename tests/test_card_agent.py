"""The card agent: it refuses the LAN, serves health from the card's sysfs, stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.endpoint import Endpoint
from app.engine.cards import NOT_RESPONDING, card_problem, first_card_down, probe_card
from app.settings import Settings
from launcher.agent_settings import from_command_line
from launcher.card_agent import AddressRefused, check_address
from launcher.cluster import CardProcesses
from tests.harness import PORT_OFFSET, card_settings, get_json, rk_board


@pytest.fixture
def no_agent_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [n for n in os.environ if n.startswith("QUARTET_AGENT_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_the_agents_settings_from_its_flags(no_agent_environment: pytest.MonkeyPatch) -> None:
    flags = ["--card", "2", "--listen", "10.10.0.4:50052", "--threads", "3", "--cache-dir", "/var/cache/rpc"]
    flags += ["--allow-address", "10.10.0.4", "--allow-address", "10.10.0.5", "--die-with-parent"]
    agent = from_command_line(flags)
    assert (agent.card, agent.listen, agent.threads, agent.cache_dir) == (
        2,
        "10.10.0.4:50052",
        3,
        Path("/var/cache/rpc"),
    )
    assert (agent.allow_address, agent.die_with_parent, agent.sysfs_root) == (
        ["10.10.0.4", "10.10.0.5"],
        True,
        Path("/"),
    )
    assert agent.health == 51052  # the RPC port + 1000, where the app looks by default
    assert from_command_line([*flags, "--health-port", "40000"]).health == 40000


def test_the_agents_settings_from_its_environment_and_a_flag_wins(no_agent_environment: pytest.MonkeyPatch) -> None:
    no_agent_environment.setenv("QUARTET_AGENT_CARD", "1")
    no_agent_environment.setenv("QUARTET_AGENT_LISTEN", "10.10.0.3:50052")
    no_agent_environment.setenv("QUARTET_AGENT_ALLOW_ADDRESS", '["10.10.0.3"]')
    no_agent_environment.setenv("QUARTET_AGENT_THREADS", "4")
    agent = from_command_line([])
    assert (agent.card, agent.listen, agent.allow_address, agent.threads) == (1, "10.10.0.3:50052", ["10.10.0.3"], 4)
    assert from_command_line(["--threads", "2"]).threads == 2


def test_a_bad_agent_setting_is_one_line_naming_the_flag_and_the_variable(
    no_agent_environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        from_command_line(["--card", "0", "--listen", "10.10.0.2"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "card_agent: --listen (or QUARTET_AGENT_LISTEN): card endpoint '10.10.0.2' is not host:port" in err


def test_the_launcher_passes_the_health_port_the_app_looks_at() -> None:
    settings = Settings(engine={"cards": ["127.0.0.1:40000", "127.0.0.1:40001"], "health_offset": 500})
    command = CardProcesses(settings).command(1)
    assert command[command.index("--health-port") + 1] == "40501"
    assert settings.health_url("127.0.0.1:40001") == "http://127.0.0.1:40501/health"


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
    by_environment = {**os.environ, "QUARTET_AGENT_CARD": "0", "QUARTET_AGENT_LISTEN": "0.0.0.0:30299"}
    done = subprocess.run(
        [sys.executable, "-m", "launcher.card_agent"], env=by_environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "card 0: refusing to serve RPC on 0.0.0.0" in done.stderr


@pytest.mark.cards  # starts a card agent of its own
def test_health_reads_the_boards_sensors_and_sigterm_stops_it(tmp_path: Path) -> None:
    board = rk_board(tmp_path / "board", zones={"npu-thermal": 55500}, npu_load="NPU load:  Core0: 30%, Core1: 10%,\n")
    cards = CardProcesses(card_settings(30290 + PORT_OFFSET, 1, tmp_path / "cache", sysfs_root=board))
    cards.start_all()
    try:
        health = get_json(cards.settings.health_url(cards.endpoints[0]))
        assert health["card"] == 0 and health["rpc_endpoint"] == f"127.0.0.1:{30290 + PORT_OFFSET}"
        assert health["temperature_c"] == 55.5
        assert (health["load_pct"], health["load_source"]) == (20.0, "npu")
        assert 0 < health["mem_used_bytes"] < health["mem_total_bytes"]
        assert health["uptime_s"] >= 0
        (board / "sys/class/thermal/thermal_zone0/temp").write_text("81000\n")
        assert get_json(cards.settings.health_url(cards.endpoints[0]))["temperature_c"] == 81.0
        proc = cards.procs[0]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        cards.stop_all()


def test_a_card_without_sensors_says_so(engine_cards: CardProcesses) -> None:
    health = get_json(engine_cards.settings.health_url(engine_cards.endpoints[0]))
    assert health["temperature_c"] is None
    assert health["load_source"] == "process_cpu" and 0 <= health["load_pct"] <= 100


def test_rpc_port_in_use_is_a_clear_failure(appliance_cards: CardProcesses) -> None:
    taken = appliance_cards.endpoints[0]
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


def test_cards_started_on_ports_another_run_holds_fail_instead_of_borrowing_its_cards(
    appliance_cards: CardProcesses, tmp_path: Path
) -> None:
    """A second suite (or appliance) on the same ports: its health checks reach the first one's agents, and it
    would drive them from a second host. Starting says so instead of waiting on someone else's health."""
    first = Endpoint.parse(appliance_cards.endpoints[0]).port
    second = CardProcesses(card_settings(first, 1, tmp_path / "cache"))
    try:
        with pytest.raises(RuntimeError, match=r"answers for another process \(pid \d+\)"):
            second.start_all()
    finally:
        second.stop_all()


@pytest.mark.cards  # starts a card agent of its own
def test_a_card_serving_an_engine_is_not_called_not_responding_and_a_stopped_one_is(tmp_path: Path) -> None:
    """ggml's RPC server serves one connection at a time and queues one or two more (docs/design.md, engine fact
    11): while it serves an engine, a third connect to its port waits like a stopped card's. The probes that name
    a card to the person (after a failed answer, before a load) ask the agent's health then."""
    cards = CardProcesses(card_settings(30288 + PORT_OFFSET, 1, tmp_path / "cache"))
    cards.start_all()
    endpoint, offset = cards.endpoints[0], cards.settings.engine.health_offset
    card = Endpoint.parse(endpoint)
    try:
        with socket.create_connection((card.host, card.port), timeout=2):  # the engine's connection, being served
            assert [probe_card(endpoint) for _ in range(5)][3:] == [NOT_RESPONDING] * 2  # the port alone misleads
            assert [card_problem(endpoint, health_offset=offset) for _ in range(4)] == [None] * 4
            assert first_card_down([endpoint], health_offset=offset) is None
            cards.procs[0].send_signal(signal.SIGSTOP)  # a wedged card: neither dies nor answers
            try:
                assert card_problem(endpoint, health_offset=offset) == NOT_RESPONDING
            finally:
                cards.procs[0].send_signal(signal.SIGCONT)
        cards.kill(0)
        assert card_problem(endpoint, health_offset=offset) == "connection refused"
    finally:
        cards.stop_all()
