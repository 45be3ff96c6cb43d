"""The composition root's one start/stop list: everything it starts, leaving the ExitStack stops."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from app.__main__ import build_context
from app.lifecycle import Background, start_all
from app.settings import Settings
from tests.harness import PORT_OFFSET

# Threads the background services start, by name (engine-dispatch: the scheduler; the rest by service).
OURS = ("card-monitor", "engine-dispatch", "knowledge-ingest", "knowledge-watcher", "extraction")


class Noted:
    """A service whose stop is written down once it has returned."""

    def __init__(self, service: Background, stopped: list[str]) -> None:
        self.service, self.stopped = service, stopped

    def start(self) -> None:
        self.service.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.service.stop(timeout)
        self.stopped.append(type(self.service).__name__)


def ours() -> set[threading.Thread]:
    """Our services' threads alive now (the objects: another test's service may have left one of a name)."""
    return {t for t in threading.enumerate() if t.is_alive() and t.name.startswith(OURS)}


def names(threads: set[threading.Thread]) -> set[str]:
    return {t.name for t in threads}


def unused_cards(tmp_path: Path, first_port: int) -> Settings:
    """Settings on two cards nobody listens on: the engine waits for them, which is enough to have every
    loop running."""
    cards = [f"127.0.0.1:{first_port + PORT_OFFSET + i}" for i in range(2)]
    return Settings(
        data_dir=tmp_path / "var",
        knowledge={"dir": tmp_path / "kb"},
        engine={"cards": cards},
        telemetry={"poll_s": 0.2},
    )


def test_leaving_the_stack_stops_every_background_service_last_started_first(tmp_path: Path) -> None:
    settings = unused_cards(tmp_path, 30880)
    ctx = build_context(settings)
    order = [type(s).__name__ for s in ctx.background()]
    assert order == ["CardMonitor", "EngineService", "KnowledgeService", "ExtractionService"]
    before = ours()
    stopped: list[str] = []
    with ExitStack() as running:
        start_all(running, [Noted(s, stopped) for s in ctx.background()], timeout=5.0)
        started = names(ours() - before)
        assert {"card-monitor", "engine-dispatch", "knowledge-watcher", "extraction"} <= started, started
    deadline = time.monotonic() + 10
    while ours() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ours() - before, f"still running after the stack closed: {names(ours() - before)}"
    assert stopped == list(reversed(order))


def test_leaving_the_stack_closes_the_database_and_checkpoints_its_wal(tmp_path: Path) -> None:
    settings = unused_cards(tmp_path, 30890)
    ctx = build_context(settings)
    wal = Path(f"{settings.db_path}-wal")
    with ExitStack() as running:
        ctx.start(running)
        cid = ctx.chat.open(None, owner="user:ada")  # a write, and reads from a thread of another's
        reader = threading.Thread(target=lambda: ctx.chat.recent("user:ada"))
        reader.start()
        reader.join()
        assert wal.exists() and wal.stat().st_size > 0, "WAL mode: the commits wait in the -wal file"
    # The last connection closed, SQLite checkpointed the WAL into the file and removed it; the file on
    # its own (immutable: any WAL ignored) holds the conversation.
    assert not wal.exists(), "a connection was left open after stop"
    alone = sqlite3.connect(f"file:{settings.db_path}?mode=ro&immutable=1", uri=True)
    try:
        assert alone.execute("SELECT count(*) FROM conversations WHERE id = ?", (cid,)).fetchone() == (1,)
    finally:
        alone.close()
