"""A real appliance for tests: card agents on loopback and the app as its own process.

Tests use ports of their own, below Linux's ephemeral range (RPC 30252+, health +1000; web ports from
12000+, each parallel worker a block of its own), so that a running `make run` is left alone and no
outgoing connection takes them.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from app.auth import hash_password
from app.engine.engine_config import N_CTX
from app.settings import DEMO_MODEL, Settings
from launcher.cluster import CardProcesses

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
API_KEY = "sk-quartet-test"
# The tests' own identity for the named endpoints (docs/api.md, "Who you are"): the clients that one test
# makes (and the next, on the shared appliance) are one client, as one program's would be; a test of
# ownership makes clients of other identities.
CLIENT_ID = "quartet-tests-shared-client-identity"
ADMIN_PASSWORD = "admin-test-password"
# A step of the demo model takes milliseconds; the tests' appliance calls a card hung after this many
# seconds without one (the product's default is far wider, for a 27B model on real boards).
STEP_TIMEOUT_S = 15.0
CORPUS = ROOT.parent / "shared" / "corpus"
# Card ports are fixed (health = RPC + 1000, app.endpoint.HEALTH_OFFSET); QUARTET_TEST_PORT_OFFSET moves them
# all, so that two checkouts can run their suites side by side on one machine. A pytest-xdist worker (gw0,
# gw1, … where someone runs `pytest -n N`; make test runs one process: docs/development.md says why) takes its
# own block 2,000 ports lower, and its web ports from a block of its own below 20,000: nothing a test serves
# lies in Linux's ephemeral range (32768-60999), where an outgoing connection could take a port between the
# test choosing it and the server binding it.
WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_ASKED_OFFSET = int(os.environ.get("QUARTET_TEST_PORT_OFFSET", "0"))
PORT_OFFSET = _ASKED_OFFSET - 2000 * WORKER
UPSTREAM_PORT = 28081 + PORT_OFFSET  # llama_cpp.server in tests/test_upstream.py (below the ephemeral range)
_WEB_FIRST = 12_000 + 1_000 * WORKER  # this worker's block of web ports; the asked offset moves within it
_WEB_PORTS = iter(range(_WEB_FIRST + _ASKED_OFFSET % 1_000, _WEB_FIRST + 1_000))


def free_port() -> int:
    """A loopback port nobody holds, from this worker's block; never one handed out before in this run."""
    for port in _WEB_PORTS:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # held, or still closing from an earlier run
            return port
    raise RuntimeError(f"worker {WORKER} has handed out every port of its block")


def card_settings(first_port: int, count: int, cache_dir: Path, *, sysfs_root: Path | None = None) -> Settings:
    return Settings(
        engine={"cards": [f"127.0.0.1:{first_port + i}" for i in range(count)]},
        local_cards={"cache_dir": cache_dir, "threads": 1, "sysfs_root": sysfs_root or Path("/nonexistent-sysfs")},
    )


def get_json(url: str, timeout: float = 5.0, *, key: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as response:  # loopback
        return json.loads(response.read())


class Appliance:
    """The app (`python -m app`) against a set of card agents, restartable."""

    def __init__(
        self,
        cards: CardProcesses | None,
        data_dir: Path,
        log_dir: Path,
        models_dir: Path,
        *,
        settings: dict[str, str] | None = None,
    ) -> None:
        """`cards` None: no card agents (an upstream backend); `settings`: QUARTET_* variables of its own."""
        self.cards = cards
        self.settings = settings or {}
        self.models_dir = models_dir
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def card_agents(self) -> CardProcesses:
        assert self.cards is not None, "this appliance runs without card agents"
        return self.cards

    @property
    def endpoints(self) -> list[str]:
        return self.cards.endpoints if self.cards else []

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "QUARTET_WEB__PORT": str(self.port),
            "QUARTET_DATA_DIR": str(self.data_dir),
            "QUARTET_ENGINE__CARDS": json.dumps(self.endpoints),
            "QUARTET_TELEMETRY__POLL_S": "0.5",
            "QUARTET_ENGINE__STEP_TIMEOUT_S": str(STEP_TIMEOUT_S),
            "QUARTET_ENGINE__MAX_TOKENS": "40",
            # /v1 answers whose request names no max_tokens: 40 too, as before (the product's default, the context
            # left, would let the demo model ramble to 4,096 tokens); tests/test_api_max_tokens.py runs that default
            "QUARTET_WEB__API_DEFAULT_MAX_TOKENS": "40",
            # Read it all: every part's notes and the answer at their caps (tests/test_documents.py holds the
            # answer to it); the appliance's 160 and 400 made one 8-page PDF's reading ~2 minutes of the run
            "QUARTET_KNOWLEDGE__SUMMARY_NOTES_TOKENS": "48",
            "QUARTET_KNOWLEDGE__SUMMARY_ANSWER_TOKENS": "96",
            "QUARTET_EXTRACTION__TIMEOUT_S": "300",  # a table's answer on a shared, busy machine (tests lower it)
            "QUARTET_ENGINE__TEMPERATURE": "0",
            # document answers and read it all greedy too: their words no longer vary from run to run (at the
            # appliance's 0.2 one run in ten of test_documents' read-it-all got a blank answer: issue 27)
            "QUARTET_KNOWLEDGE__TEMPERATURE": "0",
            # host KV cache: ample for the demo model (a 1,500-token conversation is 12.5 MB), and bounded on a
            # machine that runs several suites; QUARTET_ENGINE__KV_CACHE_MB=0 shows what the tests lose without it
            "QUARTET_ENGINE__KV_CACHE_MB": os.environ.get("QUARTET_ENGINE__KV_CACHE_MB", "512"),
            "QUARTET_WEB__API_KEYS": json.dumps([API_KEY]),
            "QUARTET_WEB__ADMIN_PASSWORD_HASH": hash_password(ADMIN_PASSWORD, iterations=1000),
            "QUARTET_ENGINE__MODELS_DIR": str(self.models_dir),
            "QUARTET_KNOWLEDGE__DIR": str(self.data_dir.parent / "kb"),
            "QUARTET_ENGINE__CATALOG_PATH": str(self.models_dir / "catalog.toml"),
            "QUARTET_ENGINE__MODEL_PATH": str(self.models_dir / "demo.gguf"),
            **self.settings,
        }

    def start(self, timeout: float = 180.0, *, engine: bool = True) -> None:
        """Start the app and wait for its engine ready (`engine` False: for its web app to answer)."""
        self.starts += 1
        log = open(self.log_dir / f"app-{self.starts}.log", "wb")  # noqa: SIM115
        command = [sys.executable, "-m", "app", "--die-with-parent"]  # a test run that dies takes its app along
        self.proc = subprocess.Popen(command, env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            self.wait_ready(timeout, engine=engine)
        except BaseException:  # one that never got ready must not outlive the test that started it
            self.stop()
            raise

    def wait_ready(self, timeout: float = 120.0, *, engine: bool = True) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the app exited with {self.proc.returncode}; see {self.log_dir}")
            try:
                last = get_json(f"{self.url}/health", timeout=2)
                if last.get("engine") == "ready" or not engine:
                    return dict(last)
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the app was not ready within {timeout:.0f} s (last health: {last})")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


def wait_until(check: Any, timeout: float, every: float = 0.05, *, what: str = "condition") -> Any:
    """`check()`'s first truthy value within `timeout` s; else a TimeoutError naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"{what} not met within {timeout} s; last saw {value!r}")


def rk_board(root: Path, *, zones: dict[str, int], npu_load: str | None) -> Path:
    for i, (name, millideg) in enumerate(zones.items()):
        zone = root / "sys/class/thermal" / f"thermal_zone{i}"
        zone.mkdir(parents=True)
        (zone / "type").write_text(f"{name}\n")
        (zone / "temp").write_text(f"{millideg}\n")
    if npu_load is not None:
        load = root / "sys/kernel/debug/rknpu/load"
        load.parent.mkdir(parents=True)
        load.write_text(npu_load)
    return root


def models_folder(folder: Path) -> Path:
    """A models folder for the tests: the demo GGUF twice over (linked, not copied, where possible), a
    truncated copy, and a catalog whose entries exercise every refusal."""
    folder.mkdir(parents=True, exist_ok=True)
    demo = folder / "demo.gguf"
    if not demo.exists():
        try:
            os.link(DEMO_MODEL, demo)
        except OSError:
            shutil.copyfile(DEMO_MODEL, demo)
    with open(DEMO_MODEL, "rb") as whole, open(folder / "truncated.gguf", "wb") as part:
        part.write(whole.read(50_000_000))
    (folder / "catalog.toml").write_text(
        """
[[models]]
id = "demo"
name = "Gemma 3 270M (demo)"
path = "demo.gguf"
n_ctx = {n_ctx}

[[models]]
id = "demo-small"
name = "Demo, 2k context, q8_0 cache"
path = "demo.gguf"
n_ctx = 2048
kv_type = "q8_0"

[[models]]
id = "missing"
name = "Absent 27B"
path = "absent-27b.gguf"

[[models]]
id = "corrupt"
name = "Truncated copy"
path = "truncated.gguf"

[[models]]
id = "huge"
name = "Demo with a ten-million-token context"
path = "demo.gguf"
n_ctx = 10000000

[[models]]
id = "outside"
name = "Outside the models folder"
path = "/etc/hostname"

[[models]]
id = "upstream-demo"
name = "Demo from llama-cpp-python's server"
upstream_url = "http://127.0.0.1:{upstream}/v1"
n_ctx = 2048

[[models]]
id = "broken-template"
name = "Demo with a template that is not there"
path = "demo.gguf"
chat_template = "no-such-template.jinja"
""".replace("{upstream}", str(UPSTREAM_PORT)).replace("{n_ctx}", str(N_CTX)),  # the demo at the shipped context
        encoding="utf-8",
    )
    return folder


def metric(appliance: Appliance, name: str) -> float:
    """One unlabelled line of the appliance's /metrics (with the tests' API key)."""
    ask = urllib.request.Request(f"{appliance.url}/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(ask, timeout=5) as response:  # loopback only
        text = response.read().decode()
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return float(value)
    raise AssertionError(f"{name} not in /metrics")


# Controlled input for tests that compare answers made together with answers made alone: sequences the demo
# model continues with a wide margin. Over the 48 tokens of each answer alone at temperature 0, its best token
# led the runner-up by at least 0.76 in log-probability (1.30, 1.25, 0.96, 0.76 in order), where open prompts
# ("List five uses of copper.") had leads of 0.00-0.23, which batched arithmetic can flip.
COUNTED = (
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
    "A B C D E F G H I J K L M",
    "one two three four five six seven eight nine ten",
    "一 二 三 四 五 六 七 八 九 十",
)


def shared_words(a: str, b: str) -> int:
    """How many words two answers share from their start (how long a batched answer stays its solo one)."""
    pairs = zip(a.split(), b.split(), strict=False)
    return sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], pairs))


def api_client(url: str, *, client_id: str = CLIENT_ID) -> Any:
    """A gradio_client Client that keeps `client_id` as its identity (the X-Quartet-Client header)."""
    from tests.gradio_api import Client

    return Client(url, verbose=False, headers={"X-Quartet-Client": client_id})
