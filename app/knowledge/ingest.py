"""The ingestion queue: one worker thread (embedding is CPU heavy), progress a UI can poll.

Jobs are keyed by path (or document): a file queued twice runs once; a file changed while it is
being indexed is queued again and runs after. `progress()` is a snapshot — the file being worked
on with its pages done/total, the files waiting, and the last files finished.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from app.knowledge.indexer import Cancelled, Job, Report, Result

log = logging.getLogger(__name__)

Runner = Callable[..., Result]  # Indexer.run(job, *, report, cancelled)
_RECENT = 50
_LISTED_QUEUED = 100


@dataclass(frozen=True)
class FileProgress:
    path: str
    name: str
    # queued | reading | embedding | saving | indexed | unchanged | duplicate | removed | reembedded | error | cancelled
    state: str
    pages_done: int = 0
    pages_total: int = 0
    message: str | None = None


@dataclass(frozen=True)
class IngestProgress:
    active: FileProgress | None
    queued: list[FileProgress]  # the first 100 waiting, in order
    queued_count: int
    finished: list[FileProgress]  # the last 50, newest first

    @property
    def idle(self) -> bool:
        return self.active is None and self.queued_count == 0


class IngestQueue:
    def __init__(self, run: Runner) -> None:
        self._run = run
        self._pending: OrderedDict[str, Job] = OrderedDict()
        self._active: FileProgress | None = None
        self._finished: deque[FileProgress] = deque(maxlen=_RECENT)
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._stopping.clear()
            self._thread = threading.Thread(target=self._work, name="knowledge-ingest", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish at the next safe point; an interrupted document stays queued for the next start."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def submit(self, jobs: Iterable[Job]) -> None:
        jobs = list(jobs)  # built before taking the lock: making a job may read the store
        with self._cond:
            for job in jobs:
                earlier = self._pending.pop(job.key, None)
                if earlier is not None:  # one run, with the strongest wishes of both requests
                    job = replace(job, force=job.force or earlier.force, password=job.password or earlier.password)
                self._pending[job.key] = job
            self._cond.notify_all()

    def progress(self) -> IngestProgress:
        with self._cond:
            queued = [_queued(job) for job, _ in zip(self._pending.values(), range(_LISTED_QUEUED), strict=False)]
            return IngestProgress(self._active, queued, len(self._pending), list(reversed(self._finished)))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """True once nothing is queued or running (False if `timeout` passed first)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and self._active is None, timeout)

    def _work(self) -> None:
        while not self._stopping.is_set():
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._stopping.is_set(), timeout=1.0)
                if self._stopping.is_set() or not self._pending:
                    continue
                _, job = self._pending.popitem(last=False)
                self._active = _queued(job)
            self._execute(job)

    def _execute(self, job: Job) -> None:
        report: Report = lambda phase, done, total: self._set_active(job, phase, done, total)  # noqa: E731
        try:
            result = self._run(job, report=report, cancelled=self._stopping.is_set)
            final = FileProgress(str(job.path or ""), job.name, result.outcome, message=result.message)
            self.submit(result.follow_up)
        except Cancelled:
            final = FileProgress(
                str(job.path or ""), job.name, "cancelled", message="Stopped; resumes at the next start."
            )
        except Exception as err:  # the worker must survive any one file
            log.exception("indexing %s failed", job.name)
            final = FileProgress(str(job.path or ""), job.name, "error", message=f"Indexing failed: {err}")
        with self._cond:
            self._finished.append(final)
            self._active = None
            self._cond.notify_all()

    def _set_active(self, job: Job, phase: str, done: int, total: int) -> None:
        with self._cond:
            self._active = FileProgress(str(job.path or ""), job.name, phase, done, total)


def _queued(job: Job) -> FileProgress:
    return FileProgress(str(job.path or ""), job.name, "queued")
