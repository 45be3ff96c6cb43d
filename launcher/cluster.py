"""The local profile: four card agents on loopback and the app, started and stopped together.

    python -m launcher          # what `make run` runs

Each child gets SIGTERM on Ctrl-C (and dies with the launcher even if it is killed), so nothing
is left behind.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from app.settings import Settings

_HEALTH_WAIT_S = 60.0


class CardProcesses:
    """Card agents for the loopback cards of `settings`, one process each."""

    def __init__(self, settings: Settings, *, log_dir: Path | None = None) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def command(self, index: int) -> list[str]:
        s = self.settings
        return [
            sys.executable, "-m", "launcher.card_agent",
            "--card", str(index),
            "--listen", s.cards[index],
            "--health-port", str(int(s.cards[index].rpartition(":")[2]) + s.card_health_offset),
            "--threads", str(s.card_threads),
            "--cache-dir", str(s.card_cache_dir),
            "--sysfs-root", str(s.sysfs_root),
            "--die-with-parent",
        ]

    def start(self, index: int) -> None:
        out = open(self.log_dir / f"card{index}.log", "ab") if self.log_dir else subprocess.DEVNULL  # noqa: SIM115
        self.procs[index] = subprocess.Popen(self.command(index), stdout=out, stderr=subprocess.STDOUT)

    def start_all(self) -> None:
        for index in range(len(self.settings.cards)):
            self.start(index)
        for index in range(len(self.settings.cards)):
            self.wait_healthy(index)

    def wait_healthy(self, index: int, timeout: float = _HEALTH_WAIT_S) -> None:
        url = self.settings.health_url(self.settings.cards[index])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs.get(index)
            if proc is not None and proc.poll() is not None:
                where = f"; see {self.log_dir / f'card{index}.log'}" if self.log_dir else ""
                raise RuntimeError(f"card agent {index} exited with code {proc.returncode}{where}")
            try:
                with urllib.request.urlopen(url, timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
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


def run() -> int:
    settings = Settings()
    logs = settings.data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cards = CardProcesses(settings, log_dir=logs)
    print(f"starting {len(settings.cards)} card agents: {', '.join(settings.cards)} (logs in {logs})", flush=True)
    app: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        if app is not None and app.poll() is None:
            app.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        cards.start_all()
        app = subprocess.Popen([sys.executable, "-m", "app", "--die-with-parent"])
        while app.poll() is None:
            try:
                app.wait()
            except KeyboardInterrupt:
                forward(signal.SIGINT, None)
        return app.returncode or 0
    finally:
        cards.stop_all()
