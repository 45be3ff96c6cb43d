"""The local profile: four card agents on loopback and the app, started, watched and stopped together.

    python -m launcher          # what `make run` runs

Before anything starts, every port it needs must be free (launcher/ports.py): one a process listens on
stops the launcher at once, naming it; one a closed connection holds (TIME_WAIT) is waited for. A card
agent that exits is restarted, one told alone to stop included; an app that crashes is restarted; the app
refusing its configuration (exit 2) stops everything with its message. Ctrl-C reaches the launcher and the app
(the cards run in process groups of their own); the launcher stops the app, then the cards (each with
SIGTERM; they die with the launcher even if it is killed), so nothing is left behind and the engine never
speaks to a card already gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from app.endpoint import Endpoint
from app.settings import Settings, SettingsInvalid, load
from launcher.ports import PortTaken, wait_free

_HEALTH_WAIT_S = 60.0
_WATCH_S = 0.5
_GROUP_STOP_S = 2.0  # a card that exits 0 waits this long for the launcher's own stop before it is restarted
REFUSED = 2  # the app's exit code for a configuration it will not run (app/__main__.py): not restarted


class CardProcesses:
    """Card agents for the loopback cards of `settings`, one process each."""

    def __init__(self, settings: Settings, *, log_dir: Path | None = None) -> None:
        self.settings = settings
        self.endpoints = list(settings.engine.cards)
        self.log_dir = log_dir
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def command(self, index: int) -> list[str]:
        local, card = self.settings.local_cards, Endpoint.parse(self.endpoints[index])
        last = index == len(self.endpoints) - 1
        return [
            sys.executable,
            "-m",
            "launcher.card_agent",
            "--card",
            str(index),
            "--listen",
            str(card),
            "--health-port",
            str(card.health_port(self.settings.engine.health_offset)),
            "--threads",
            str(local.last_threads if last else local.threads),
            "--cache-dir",
            str(local.cache_dir),
            "--sysfs-root",
            str(local.sysfs_root).replace("{card}", str(index)),
            "--die-with-parent",
        ]

    def start(self, index: int) -> None:
        out = open(self.log_dir / f"card{index}.log", "ab") if self.log_dir else subprocess.DEVNULL  # noqa: SIM115
        # Each card in a process group of its own: a terminal's Ctrl-C reaches the launcher and the app, not the
        # cards, which the launcher stops after the app. Stopped first, they left the engine's last sends to a
        # dead card ("llama: send failed ... Remote RPC server crashed"). Cards still die with the launcher.
        self.procs[index] = subprocess.Popen(self.command(index), stdout=out, stderr=subprocess.STDOUT, process_group=0)

    def start_all(self) -> None:
        for index in range(len(self.endpoints)):
            self.start(index)
        for index in range(len(self.endpoints)):
            self.wait_healthy(index)

    def wait_healthy(self, index: int, timeout: float = _HEALTH_WAIT_S) -> None:
        url = self.settings.health_url(self.endpoints[index])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs.get(index)
            if proc is not None and proc.poll() is not None:
                where = f"; see {self.log_dir / f'card{index}.log'}" if self.log_dir else ""
                raise RuntimeError(f"card agent {index} exited with code {proc.returncode}{where}")
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    answered = json.loads(response.read()).get("pid")
            except (OSError, ValueError):
                time.sleep(0.1)
                continue
            if proc is None or answered == proc.pid:
                return
            # another appliance's (or test run's) card holds the port: ours will fail to bind and exit
            raise RuntimeError(f"card agent {index}'s port at {url} answers for another process (pid {answered})")
        raise RuntimeError(f"card agent {index} did not become healthy at {url} within {timeout:.0f} s")

    def kill(self, index: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[index]
        proc.send_signal(sig)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# The app's allocator settings. Embedding (MiniLM through torch) on indexing threads grew the app by
# 323 MB for 1,500 passages and never gave it back (glibc's per-thread arenas; oneDNN's cache of one
# kernel per batch shape); with both settings it grew 186 MB (bench/embed_memory.py, docs/benchmarks.md).
# The same values are in launcher/systemd/quartet-app.service; a value in the environment wins.
APP_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "16"}


def app_environment(base: Mapping[str, str]) -> dict[str, str]:
    return {**APP_ENVIRONMENT, **base}


class Supervisor:
    """Starts the cards, waits until they are healthy, starts the app, and restarts any card that exits
    and an app that dies (a non-zero exit) until it is told to stop."""

    def __init__(self, settings: Settings, *, log_dir: Path) -> None:
        self.settings = settings
        self.cards = CardProcesses(settings, log_dir=log_dir)
        self.app: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()
        self.restarts: dict[str, int] = {}
        self.code = 0  # what the launcher exits with

    def stop(self, *_: object) -> None:
        self.stopping.set()

    def start_app(self) -> None:
        self.app = subprocess.Popen([sys.executable, "-m", "app", "--die-with-parent"], env=app_environment(os.environ))

    def ports(self) -> dict[tuple[str, int], str]:
        """Every port the local profile will listen on, and what for."""
        settings, wanted = self.settings, {}
        for index, text in enumerate(self.cards.endpoints):
            card = Endpoint.parse(text)
            wanted[(card.host, card.port)] = f"card agent {index}'s RPC port"
            wanted[(card.host, card.health_port(settings.engine.health_offset))] = f"card agent {index}'s health port"
        wanted[(settings.web.host, settings.web.port)] = "the web app"
        return wanted

    def run(self) -> int:
        try:
            wait_free(self.ports(), say=lambda line: print(line, file=sys.stderr, flush=True))
        except PortTaken as err:
            print(f"launcher: {err}", file=sys.stderr, flush=True)
            return 1
        cards = self.cards.endpoints
        print(f"starting {len(cards)} card agents: {', '.join(cards)} (logs in {self.cards.log_dir})", flush=True)
        try:
            self.cards.start_all()
            self.start_app()
            while not self.stopping.wait(_WATCH_S):
                self.watch()
            return self.code
        finally:
            if self.app is not None and self.app.poll() is None:
                self.app.terminate()
                try:
                    self.app.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.app.kill()
            self.cards.stop_all()

    def watch(self) -> None:
        for index, proc in list(self.cards.procs.items()):
            code = proc.poll()
            if code is None or self.stopping.is_set():
                continue
            # A card exits 0 when it is told to stop. A stop sent to every process at once (a service manager's)
            # reaches the launcher too, so the launcher's stop arrives with it; a card told alone is restarted
            # like one that died, since a box missing a card cannot answer.
            if code == 0 and self.stopping.wait(_GROUP_STOP_S):
                return
            self._restarted(f"card agent {index}", code)
            self.cards.start(index)
        if self.app is not None and self.app.poll() == REFUSED:  # it said why; restarting would say it again
            print("launcher: the app refused its configuration (above); stopping", file=sys.stderr, flush=True)
            self.code = REFUSED
            self.stopping.set()
        elif self.app is not None and self.app.poll() not in (None, 0) and not self.stopping.is_set():
            self._restarted("the app", self.app.returncode)
            self.start_app()
        elif self.app is not None and self.app.poll() == 0:
            self.stopping.set()  # the app was asked to stop (Ctrl-C reaches it too): so do we

    def _restarted(self, what: str, code: int) -> None:
        self.restarts[what] = self.restarts.get(what, 0) + 1
        print(f"launcher: {what} exited with code {code}; restarting it", file=sys.stderr, flush=True)


def run() -> int:
    try:
        settings = load()
    except SettingsInvalid as err:
        print(f"launcher: Quartet cannot start: {err}", file=sys.stderr, flush=True)
        return 2
    logs = settings.data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(settings, log_dir=logs)
    signal.signal(signal.SIGTERM, supervisor.stop)
    signal.signal(signal.SIGINT, supervisor.stop)
    return supervisor.run()
