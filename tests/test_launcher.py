"""`python -m launcher` (`make run`): all up, one ready line, dead children restarted, Ctrl-C leaves nothing."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from app.endpoint import Endpoint
from app.settings import Settings
from launcher import ports
from launcher.cluster import APP_ENVIRONMENT
from tests.harness import PORT_OFFSET, free_port, get_json, wait_until


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _answer(url: str) -> bool:
    try:
        get_json(url, timeout=1)
    except OSError:
        return False
    return True


def _ready(url: str) -> bool:
    return _answer(url) and get_json(url)["engine"] == "ready"


def _app_pid(launcher_pid: int) -> int | None:
    for pid in descendants(launcher_pid):
        try:
            if b"-m\x00app\x00" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


def _engine_worker(app_pid: int | None) -> int:
    """The app's engine worker: the child multiprocessing spawned (the only one the app starts)."""
    for pid in descendants(app_pid or 0):
        with contextlib.suppress(OSError):
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
    raise AssertionError(f"the app {app_pid} has no engine worker")


@pytest.mark.cards
@pytest.mark.appliance  # `make run` itself: four card agents and the app
def test_make_run_starts_everything_restarts_what_dies_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    cards = [f"127.0.0.1:{p}" for p in range(30272 + PORT_OFFSET, 30276 + PORT_OFFSET)]
    env = {
        **os.environ,
        "QUARTET_WEB__PORT": str(port),
        "QUARTET_DATA_DIR": str(tmp_path / "var"),
        "QUARTET_ENGINE__CARDS": json.dumps(cards),
        "QUARTET_LOCAL_CARDS__CACHE_DIR": str(tmp_path / "cache"),
    }
    launcher = subprocess.Popen(  # its own process group, as a terminal's: Ctrl-C reaches every process in it
        [sys.executable, "-m", "launcher"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 180
        assert launcher.stdout is not None
        while time.monotonic() < deadline:
            line = launcher.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Quartet ready at"):
                break
        ready = [line for line in lines if line.startswith("Quartet ready at")]
        assert ready == [f"Quartet ready at http://127.0.0.1:{port}\n"], "".join(lines[-20:])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            assert json.loads(response.read())["engine"] == "ready"
        health = f"http://127.0.0.1:{port}/health"
        card_health = f"http://127.0.0.1:{31273 + PORT_OFFSET}/health"  # card 1: RPC 30273 + 1000
        first_card_pid = get_json(card_health)["pid"]
        os.kill(first_card_pid, signal.SIGKILL)  # a card agent dies: the launcher brings it back
        wait_until(lambda: _answer(card_health) and get_json(card_health)["pid"] != first_card_pid, 30)
        told = get_json(card_health)["pid"]
        os.kill(told, signal.SIGTERM)  # told alone to stop, it exits 0: still a card the box lacks, so it comes back
        wait_until(lambda: _answer(card_health) and get_json(card_health)["pid"] not in (first_card_pid, told), 30)
        app_pid = _app_pid(launcher.pid)
        assert app_pid is not None, "the launcher started no app"
        given = dict(v.split("=", 1) for v in Path(f"/proc/{app_pid}/environ").read_text().split("\0") if "=" in v)
        assert {k: given.get(k) for k in APP_ENVIRONMENT} == APP_ENVIRONMENT  # memory given back after indexing
        os.kill(app_pid, signal.SIGKILL)  # so does the app
        wait_until(lambda: _app_pid(launcher.pid) not in (None, app_pid) and _ready(health), 120)
        family = descendants(launcher.pid)
        assert len(family) >= 6  # four card agents, the app, the engine worker
        # a Ctrl-C reaches the engine worker too: it leaves its stop to the app (dying first, it read as an
        # engine lost mid-stop and logged a restart); watched for 2 s, it stays and the engine stays ready
        worker = _engine_worker(_app_pid(launcher.pid))
        os.kill(worker, signal.SIGINT)
        os.kill(worker, signal.SIGTERM)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert alive(worker) and _ready(health), "the engine worker died of a signal meant for the app"
            time.sleep(0.2)
        os.killpg(launcher.pid, signal.SIGINT)  # Ctrl-C: the launcher stops the app, then the cards, for good
        out, _ = launcher.communicate(timeout=30)
        assert launcher.returncode == 0, out[-2000:]
        # the cards outlive the app's stop: the engine's last words reach them (a card gone first made it say so,
        # as it does above, rightly, for the card killed while the app ran)
        stopping = out.rsplit("Quartet ready at", 1)[-1]  # what the restarted app and the Ctrl-C printed
        lost = [line for line in stopping.splitlines() if "send failed" in line or "RPC server crashed" in line]
        assert not lost, stopping[-2000:]
        restarts = [line for line in out.splitlines() if "restarting" in line]
        assert restarts == [  # what was killed or told to stop above, and nothing the Ctrl-C stopped
            "launcher: card agent 1 exited with code -9; restarting it",
            "launcher: card agent 1 exited with code 0; restarting it",
            "launcher: the app exited with code -9; restarting it",
        ], restarts
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) for pid in family):
            time.sleep(0.2)
        assert not [pid for pid in family if alive(pid)], "processes left behind"
    finally:
        if launcher.poll() is None:
            launcher.kill()


def _launcher(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "launcher"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_second_launcher_on_taken_ports_exits_at_once_naming_what_holds_them(tmp_path: Path) -> None:
    first = 30282 + PORT_OFFSET
    cards = [f"127.0.0.1:{p}" for p in range(first, first + 4)]
    with socket.socket() as held:
        held.bind(("127.0.0.1", first + 1))  # card 1's RPC port: someone listens there
        held.listen()
        launcher = _launcher({"QUARTET_ENGINE__CARDS": json.dumps(cards), "QUARTET_DATA_DIR": str(tmp_path / "var")})
        out, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 1, out
    assert f"port {first + 1} (card agent 1's RPC port) is taken by process {os.getpid()}" in out, out
    assert "starting" not in out  # nothing was started: no card agent restarted, no log overwritten


@pytest.mark.slow
def test_the_launcher_stops_everything_when_the_app_refuses_its_configuration(tmp_path: Path) -> None:
    first = 30292 + PORT_OFFSET
    cards = [f"127.0.0.1:{p}" for p in range(first, first + 4)]
    env = {
        "QUARTET_ENGINE__CARDS": json.dumps(cards),
        "QUARTET_DATA_DIR": str(tmp_path / "var"),
        "QUARTET_LOCAL_CARDS__CACHE_DIR": str(tmp_path / "cache"),
        "QUARTET_WEB__HOST": "0.0.0.0",  # the LAN without users or keys: the app refuses (exit 2)
        "QUARTET_WEB__PORT": str(free_port()),
        "QUARTET_WEB__USERS": "{}",
        "QUARTET_WEB__API_KEYS": "[]",
    }
    launcher = _launcher(env)
    out, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == 2, out
    assert "reachable from the LAN" in out and "refused its configuration" in out, out
    assert "restarting" not in out
    for port in range(first, first + 4):  # the card agents were stopped with it
        assert ports.bindable("127.0.0.1", port), f"a card agent still holds {port}"


@pytest.mark.slow
def test_a_port_in_time_wait_is_waited_for_and_named() -> None:
    port = 30302 + PORT_OFFSET
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen()
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the side that closes first keeps TIME_WAIT on the listening port
    listener.close()
    time.sleep(0.1)
    client.close()
    said: list[str] = []
    if ports.bindable("127.0.0.1", port):
        pytest.skip("this kernel let the port go at once (no TIME_WAIT left to wait for)")
    with pytest.raises(ports.PortTaken, match=f"port {port} .* did not come free within 1 s"):
        ports.wait_free({("127.0.0.1", port): "a test port"}, say=said.append, wait_s=1)
    assert said == [
        f"launcher: waiting for port {port} (a test port): a connection that just closed holds it (TIME_WAIT)"
    ]


def test_the_local_profile_keeps_its_ports_below_the_ephemeral_range() -> None:
    """Linux hands out 32768–60999 as clients' source ports: a local card there can find its port taken."""
    settings = Settings()
    for card in settings.engine.cards:
        endpoint = Endpoint.parse(card)
        assert endpoint.port < 32768 and endpoint.health_port(settings.engine.health_offset) < 32768


def test_the_systemd_unit_gives_the_app_the_launchers_allocator_settings() -> None:
    unit = (Path(__file__).resolve().parent.parent / "launcher/systemd/quartet-app.service").read_text()
    line = next(line for line in unit.splitlines() if line.startswith("Environment="))
    assert dict(pair.split("=", 1) for pair in line.removeprefix("Environment=").split()) == APP_ENVIRONMENT
