"""The ingestion queue: worker threads by size class, progress a UI can poll.

Jobs are keyed by path (or document): a file queued twice runs once; a file changed while it is
being indexed is queued again and runs after. Each job goes to a lane — small files, or large files
and re-embeddings (`lane_of`) — and each lane indexes one file at a time, so a small file dropped
after a big one does not wait for it (embedding is CPU heavy: two lanes at most). A small file that
turns out to be a long document is handed on to the large lane (outcome "moved"). The large lane takes
its smallest waiting file first: a 5 MB file dropped beside a 30 MB one (17 minutes of embedding on a
busy box) does not wait for all of it. `progress()` is a
snapshot — the files being worked on with their pages done/total, the files waiting, and the last
files finished. When the last file of a burst is done and nothing waits, the queue calls `on_idle` (the
service gives the C heap's free memory back then: app/heap.py).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal

from app.knowledge.indexer import Cancelled, Job, Report, Result

log = logging.getLogger(__name__)

Runner = Callable[..., Result]  # Indexer.run(job, *, report, cancelled, small_lane)
Lane = Literal["small", "large"]
LANES: tuple[Lane, ...] = ("small", "large")
_RECENT = 50
_LISTED_QUEUED = 100


@dataclass(frozen=True)
class FileProgress:
    path: str
    name: str
    # queued | reading | ocr (pages_done: the page read by OCR) | embedding | saving
    # | indexed | unchanged | duplicate | removed | reembedded | error | cancelled
    state: str
    pages_done: int = 0
    pages_total: int = 0
    message: str | None = None


@dataclass(frozen=True)
class IngestProgress:
    running: list[FileProgress]  # one per lane at most: small files first
    queued: list[FileProgress]  # the first 100 waiting, small files first
    queued_count: int
    finished: list[FileProgress]  # the last 50, newest first

    @property
    def active(self) -> FileProgress | None:
        return self.running[0] if self.running else None

    @property
    def idle(self) -> bool:
        return not self.running and self.queued_count == 0


class IngestQueue:
    def __init__(
        self,
        run: Runner,
        *,
        lane_of: Callable[[Job], Lane] = lambda job: "small",
        on_idle: Callable[[], object] = lambda: None,
    ) -> None:
        self._run = run
        self._lane_of = lane_of
        self._on_idle = on_idle
        self._pending: dict[Lane, OrderedDict[str, Job]] = {lane: OrderedDict() for lane in LANES}
        self._sizes: dict[str, int] = {}  # bytes of each waiting file (a re-embedding: 0), for the large lane
        self._active: dict[Lane, FileProgress] = {}
        self._active_keys: dict[Lane, str] = {}
        self._finished: deque[FileProgress] = deque(maxlen=_RECENT)
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        with self._cond:
            if self._threads:
                return
            self._stopping.clear()
            for lane in LANES:
                thread = threading.Thread(target=self._work, args=(lane,), name=f"knowledge-ingest-{lane}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def stop(self, timeout: float = 30.0) -> None:
        """Finish at the next safe point; an interrupted document stays queued for the next start."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout)

    def submit(self, jobs: Iterable[Job]) -> None:
        lanes = [(job, self._lane_of(job)) for job in jobs]  # before taking the lock: it may stat files
        sizes = {job.key: _size(job) for job, lane in lanes if lane == "large"}
        with self._cond:
            for job, lane in lanes:
                for pending in self._pending.values():  # one run, with the strongest wishes of both requests
                    earlier = pending.pop(job.key, None)
                    if earlier is not None:
                        job = replace(
                            job, force=job.force or earlier.force, password=job.password or earlier.password,
                            large=job.large or earlier.large,
                        )  # fmt: skip
                self._pending[lane][job.key] = job
            self._sizes.update(sizes)
            self._cond.notify_all()

    def progress(self) -> IngestProgress:
        with self._cond:
            waiting = (job for lane in LANES for job in self._pending[lane].values())
            queued = [_queued(job) for job, _ in zip(waiting, range(_LISTED_QUEUED), strict=False)]
            running = [self._active[lane] for lane in LANES if lane in self._active]
            return IngestProgress(running, queued, self._queued_count(), list(reversed(self._finished)))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """True once nothing is queued or running (False if `timeout` passed first)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queued_count() and not self._active, timeout)

    def _queued_count(self) -> int:
        return sum(len(pending) for pending in self._pending.values())

    def _work(self, lane: Lane) -> None:
        while not self._stopping.is_set():
            with self._cond:
                self._cond.wait_for(lambda: self._next(lane) is not None or self._stopping.is_set(), timeout=1.0)
                job = self._next(lane)
                if self._stopping.is_set() or job is None:
                    continue
                del self._pending[lane][job.key]
                self._sizes.pop(job.key, None)
                self._active[lane] = _queued(job)
                self._active_keys[lane] = job.key
            self._execute(lane, job)

    def _next(self, lane: Lane) -> Job | None:
        """The lane's first job (the large lane's smallest) whose file is not being indexed in the other lane
        right now."""
        busy = set(self._active_keys.values())
        free = (job for key, job in self._pending[lane].items() if key not in busy)
        if lane == "large":
            return min(free, key=lambda job: self._sizes.get(job.key, 0), default=None)
        return next(free, None)

    def _execute(self, lane: Lane, job: Job) -> None:
        report: Report = lambda phase, done, total: self._set_active(lane, job, phase, done, total)  # noqa: E731
        try:
            result = self._run(job, report=report, cancelled=self._stopping.is_set, small_lane=lane == "small")
            final: FileProgress | None = FileProgress(
                str(job.path or ""), job.name, result.outcome, message=result.message
            )
            if result.outcome == "moved":  # bigger than its file looked: it waits in the other lane
                final = None
            self.submit(result.follow_up)
        except Cancelled:
            final = FileProgress(
                str(job.path or ""), job.name, "cancelled", message="Stopped; resumes at the next start."
            )
        except Exception as err:  # the worker must survive any one file
            log.exception("indexing %s failed", job.name)
            final = FileProgress(str(job.path or ""), job.name, "error", message=f"Indexing failed: {err}")
        with self._cond:
            if final is not None:
                self._finished.append(final)
            del self._active[lane], self._active_keys[lane]
            idle = not self._active and not self._queued_count()
            self._cond.notify_all()
        if idle:  # the burst is over: outside the lock, a file submitted meanwhile starts at once
            self._on_idle()

    def _set_active(self, lane: Lane, job: Job, phase: str, done: int, total: int) -> None:
        with self._cond:
            self._active[lane] = FileProgress(str(job.path or ""), job.name, phase, done, total)


def _size(job: Job) -> int:
    try:
        return os.stat(job.path).st_size if job.path is not None else 0
    except OSError:
        return 0


def _queued(job: Job) -> FileProgress:
    return FileProgress(str(job.path or ""), job.name, "queued")
