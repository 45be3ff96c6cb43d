from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from app.gradio_import import skip_stub_writer
from launcher.cluster import CardProcesses
from tests.engine_host import EngineHost
from tests.file_order import load_table, longest_first
from tests.harness import API_KEY, ARTIFACTS, CORPUS, PORT_OFFSET, Appliance, card_settings, models_folder, rk_board
from tests.ledger import Ledger, engine_counters
from tests.warm_browser import WarmBrowser

os.environ.setdefault("HF_HUB_OFFLINE", "1")
skip_stub_writer()  # as the app does: Gradio's stub writer is ~2.3 s of CPU in every process that imports it
# The card agents and the app inherit this. llama.cpp's CPU threads (OpenMP) spin after each graph by default:
# with two workers' appliances on two cores the spinning took the other worker's core (six files, two
# workers: 241 s wall and 355 s user CPU spinning, 188-204 s and 240-260 s passive; docs/development.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Every httpx client (gradio_client makes several a call, an OpenAI SDK client one) loads a CA bundle into a new
# SSL context: 26 ms of CPU for certifi's ~150 certificates, 0.5 ms for one. The suite speaks plain HTTP to
# loopback alone, so its processes (and the apps and servers they start) trust one public root: a gradio_client
# call cost the test 95 ms of CPU and now 8, a new Client 150 ms and now 20 (docs/development.md).
os.environ["SSL_CERT_FILE"] = str(Path(__file__).parent / "data" / "one-ca.pem")

APPLIANCE_CARDS_PORT = 30252 + PORT_OFFSET  # four cards for the shared appliance
ENGINE_CARDS_PORT = 30262 + PORT_OFFSET  # two cards for in-process engine tests (a card serves one host at a time)

# Markers follow from the fixtures a test uses, so `make test-fast` (-m "not cards and not appliance and not
# browser") needs no list of files. Tests that start cards or the appliance themselves carry the marker by hand.
MARKERS_BY_FIXTURE = {
    "appliance": ("cards", "appliance"),
    "appliance_cards": ("cards",),
    "engine_cards": ("cards",),
    "embedder": ("embedder",),
    "browser": ("browser",),
    "corpus": ("corpus",),
    "llama_server": ("appliance",),  # tests/test_upstream.py: an app in front of llama_cpp.server
    "guarded": ("slow",),  # tests/test_security.py: an app process of its own, with logins
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            for marker in MARKERS_BY_FIXTURE.get(fixture, ()):
                item.add_marker(marker)
    # The longest files first, so that two workers end together (tests/file_order.py; make test passes
    # --no-loadscope-reorder, else xdist orders the files by their number of tests).
    items[:] = longest_first(items, load_table())


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The optional real-world corpus beside the checkout; its tests are skipped, saying so, when it is absent."""
    if not (CORPUS / "pdf").is_dir():
        pytest.skip(f"real-world corpus layer: no corpus folder at {CORPUS} (../shared/corpus beside the checkout)")
    return CORPUS


CHROMIUM = "/usr/bin/chromium"  # Debian's; Playwright cannot download its own here
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[WarmBrowser]:
    """One real Chromium for every browser test, its contexts used again emptied (tests/warm_browser.py)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield WarmBrowser(chromium)
        chromium.close()


@pytest.fixture(autouse=True)
def no_page_left_open(request: pytest.FixtureRequest) -> Iterator[None]:
    """A browser context a test opened and left open is given back (emptied) when the test ends: an open chat
    page idles at 0.14 of a core (its timers and the app's answers to them) for the rest of the run. Contexts
    that a module's fixture holds for its tests were handed out before this one starts, and are left to it."""
    if "browser" not in request.fixturenames:
        yield
        return
    chromium = cast("WarmBrowser", request.getfixturevalue("browser"))
    before = chromium.checked_out()
    yield
    for context in chromium.checked_out():
        if context not in before:
            context.close()
    # Carried on the report, so that under pytest-xdist the controller's summary has each worker's counts.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    request.node.user_properties.append(("browser_contexts", (worker, chromium.report())))


LEDGER = Ledger()
BROWSER_CONTEXTS: dict[str, str] = {}  # the last count each worker reported


@pytest.fixture(autouse=True)
def engine_ledger(request: pytest.FixtureRequest) -> Iterator[None]:
    """The shared appliance's answers and generated tokens while the test ran (tests/ledger.py)."""
    if "appliance" not in request.fixturenames:
        yield
        return
    url = request.getfixturevalue("appliance").url
    before = engine_counters(url, API_KEY)
    yield
    # Carried on the test's report, so that under pytest-xdist the counts reach the controller's summary.
    request.node.user_properties.append(("engine_ledger", (before, engine_counters(url, API_KEY))))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":
        for key, value in report.user_properties:
            if key == "engine_ledger":
                before, after = cast("tuple[dict[str, int], dict[str, int]]", value)
                LEDGER.note(report.nodeid, before, after)
            elif key == "browser_contexts":
                worker, line = cast("tuple[str, str]", value)
                BROWSER_CONTEXTS[worker] = line


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = LEDGER.report()
    if lines:
        terminalreporter.section("generated tokens (tests/ledger.py)")
        for line in lines:
            terminalreporter.write_line(line)
    for worker, line in sorted(BROWSER_CONTEXTS.items()):
        terminalreporter.write_line(f"{worker or 'the run'}: {line} (tests/warm_browser.py)")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("quartet")


@pytest.fixture(scope="session")
def appliance_cards(work_dir: Path) -> Iterator[CardProcesses]:
    logs = work_dir / "logs"
    logs.mkdir(exist_ok=True)
    boards = work_dir / "boards"
    for index in range(4):  # each card reads a sysfs tree laid out like an RK board; tests heat them up
        rk_board(boards / f"card{index}", zones={"soc-thermal": 41000, "npu-thermal": 45000}, npu_load=None)
    settings = card_settings(APPLIANCE_CARDS_PORT, 4, work_dir / "rpc-cache", sysfs_root=boards / "card{card}")
    cards = CardProcesses(settings, log_dir=logs)
    cards.start_all()
    yield cards
    cards.stop_all()


@pytest.fixture(scope="session")
def appliance(appliance_cards: CardProcesses, work_dir: Path) -> Iterator[Appliance]:
    """One running appliance shared by the tests that go through the web app."""
    app = Appliance(appliance_cards, work_dir / "var", work_dir / "logs", models_folder(work_dir / "models"))
    app.start()
    yield app
    app.stop()


@pytest.fixture(scope="session")
def engine_cards(work_dir: Path) -> Iterator[CardProcesses]:
    logs = work_dir / "engine-logs"
    logs.mkdir(exist_ok=True)
    cards = CardProcesses(card_settings(ENGINE_CARDS_PORT, 2, work_dir / "rpc-cache-engine"), log_dir=logs)
    cards.start_all()
    yield cards
    cards.stop_all()


# -- engines on the two engine cards (tests/test_engine*.py) ------------------------------------------------


@pytest.fixture(scope="session")
def engine_host(engine_cards: CardProcesses) -> Iterator[EngineHost]:
    """The engine the test_engine* module at hand asks for, on the engine cards (tests/engine_host.py)."""
    host = EngineHost(engine_cards)
    yield host
    host.close()
