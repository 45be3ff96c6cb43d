"""The app gives the C heap's free memory back when ingestion goes idle (issue 47 item 9: glibc kept what a
burst of uploads freed; bench/app_memory.py, docs/benchmarks.md)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from app import heap
from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.indexer import Job, Result
from app.knowledge.ingest import IngestQueue
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService


def test_the_queue_calls_on_idle_once_its_last_file_is_done_and_not_before() -> None:
    gate = threading.Event()
    idle_seen: list[bool] = []
    called = threading.Event()
    queue: IngestQueue

    def run(job: Job, **_: Any) -> Result:
        assert gate.wait(10)
        return Result("indexed")

    def on_idle() -> None:
        idle_seen.append(queue.progress().idle)
        called.set()

    queue = IngestQueue(run, lane_of=lambda job: "large" if job.large else "small", on_idle=on_idle)
    queue.start()
    try:
        queue.submit([Job("index", path=Path(f"/kb/{n}.txt")) for n in range(3)])
        queue.submit([Job("index", path=Path("/kb/big.pdf"), large=True)])
        assert not called.wait(0.2)  # four files held at the gate: nothing is given back while they run
        gate.set()
        assert queue.wait_idle(10)
        assert called.wait(10)
    finally:
        queue.stop()
    assert idle_seen and all(idle_seen), idle_seen  # called only when nothing ran or waited, once per burst
    assert len(idle_seen) <= 2, idle_seen  # the two lanes may each end a burst; never once per file


def test_the_heap_is_given_back_through_glibc_here() -> None:
    assert heap.give_back() is True  # this machine's libc (glibc) has malloc_trim, and the call works


def test_the_knowledge_service_gives_the_heap_back_after_an_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given_back = threading.Event()
    monkeypatch.setattr(heap, "give_back", given_back.set)  # a spy: malloc_trim's effect is not observable here
    service = KnowledgeService(
        Database(tmp_path / "q.db"), Embedder.packaged(), kb_dir=tmp_path / "kb", options=KnowledgeOptions(watch=False)
    )
    service.start()
    try:
        service.upload("inventory.json", b'{"cards": 4}')  # refused as unsupported: no embedder, no reader
        assert given_back.wait(30)
        assert service.progress().idle
    finally:
        service.stop()
