"""Ingestion yields the cores to answers: the ingest queue's lanes (chunking, embedding) run at a lower CPU
priority than the engine's host work and the web server (app/knowledge/ingest.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from app.knowledge.indexer import Job, Result
from app.knowledge.ingest import INGEST_NICE, IngestQueue


def test_each_lane_indexes_at_a_lower_priority_than_the_app() -> None:
    seen: dict[str, int] = {}
    done = threading.Event()

    def run(job: Job, **_: Any) -> Result:
        seen[threading.current_thread().name] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        if len(seen) == 2:
            done.set()
        return Result("indexed")

    queue = IngestQueue(run, lane_of=lambda job: "large" if job.large else "small")
    queue.start()
    try:
        queue.submit([Job("index", path=Path("/kb/a.txt")), Job("index", path=Path("/kb/b.pdf"), large=True)])
        assert done.wait(10), seen
    finally:
        queue.stop()
    app_nice = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen == {"knowledge-ingest-small": app_nice + INGEST_NICE, "knowledge-ingest-large": app_nice + INGEST_NICE}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == app_nice  # the caller's thread is untouched
