"""The composition root's one start/stop list: everything it starts, leaving the ExitStack stops."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest

from app.__main__ import build_context
from app.knowledge.loaders.types import Page
from app.knowledge.store import FileState, KnowledgeStore
from app.lifecycle import Background, start_all
from app.settings import Settings
from tests.harness import PORT_OFFSET, wait_until

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


@pytest.mark.slow
def test_a_run_waiting_for_the_engine_ends_when_the_app_stops_and_the_next_start_marks_it(tmp_path: Path) -> None:
    """Stopping the app while an extraction run waited for an engine that was not there held the stop for the
    worker's whole 10 s join, and the worker then wrote into the closed database (a traceback, the run's
    end lost). Now the run hears the app is closing before the engine stops: the stop is prompt, nothing
    is written after it, and the next start marks the run as cut short."""
    settings = unused_cards(tmp_path, 30870)
    ctx = build_context(settings)
    store = KnowledgeStore(ctx.database, model="made here")  # an indexed document without MiniLM
    doc_id = store.add(str(tmp_path / "kb" / "invoice.txt"), name="invoice.txt", collection="")
    page = Page(1, "INVOICE\nInvoice number: INV-7781\nTotal: 5.00 EUR")
    store.replace_content(
        doc_id, FileState("0" * 64, 50, 0.0), pages=[page], chunks=[], vectors=np.zeros((0, 384)), note=None
    )
    document = ctx.knowledge.document(doc_id)
    assert document is not None and document.status == "ok"
    schema = {"type": "object", "properties": {"invoice_number": {"type": "string"}}}
    with ExitStack() as running:
        ctx.start(running)
        run_id = ctx.extraction.start_run([document], template="invoice", schema=schema, owner="user:ada")
        wait_until(lambda: ctx.extraction.run(run_id, owner="user:ada").status == "running", 10, what="run started")
        # the worker now waits for a model to count the document's tokens (up to a minute)
        leaving = time.monotonic()
    stopped_after = time.monotonic() - leaving
    assert stopped_after < 5, f"the stop took {stopped_after:.1f} s (the worker's join is 10 s)"
    assert not [t for t in threading.enumerate() if t.name == "extraction" and t.is_alive()]
    again = build_context(settings)
    with ExitStack() as running:
        again.start(running)
        run = again.extraction.run(run_id, owner="user:ada")
    assert (run.status, run.error) == ("error", "the appliance restarted during this run; start it again")
