"""Long actions run in the background, one at a time, with a status anyone holding the id can read.

The admin page starts a model switch (a minute or more on real cards) and returns at once; it then
reads the job's status on its timer, as a service would be polled — no thread or sleep in the page."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from app.errors import QuartetError

log = logging.getLogger(__name__)
JobState = Literal["running", "done", "failed"]


@dataclass(frozen=True)
class Job:
    id: str
    name: str
    state: JobState
    text: str  # the outcome for people once it is over ("" while running)
    started_at: float
    ended_at: float | None = None


class JobBusy(QuartetError, RuntimeError):
    """Another job is still running (kind `busy`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="busy")


class Jobs:
    def __init__(self, *, keep: int = 20) -> None:
        self.keep = keep
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, name: str, work: Callable[[], str], *, failed: Callable[[Exception], str]) -> Job:
        """Run `work` (it returns the outcome's text) in a thread; `failed` words an exception for people."""
        with self._lock:
            running = next((j for j in self._jobs.values() if j.state == "running"), None)
            if running is not None:
                raise JobBusy(f"{name} was not started: {running.name} is still running; try again once it has ended")
            job = Job(uuid.uuid4().hex[:12], name, "running", "", time.time())
            self._jobs[job.id] = job
            for old in sorted(self._jobs.values(), key=lambda j: j.started_at)[: -self.keep]:
                del self._jobs[old.id]
        threading.Thread(target=self._run, args=(job, work, failed), name=f"job-{job.id}", daemon=True).start()
        return job

    def get(self, job_id: str | None) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id or "")

    def _run(self, job: Job, work: Callable[[], str], failed: Callable[[Exception], str]) -> None:
        """Whatever `work` does — returns, raises, or ends its thread — the job ends with a text for people,
        so the page never waits on it and the next action is not refused as "still running"."""
        ended = replace(job, state="failed", text=f"⚠ {job.name} stopped without a result")
        try:
            ended = replace(job, state="done", text=str(work()))
        except Exception as err:  # every failure ends the job with words for people, never a dead thread
            log.warning("job %s (%s) failed: %s", job.id, job.name, err, exc_info=True)
            ended = replace(job, state="failed", text=_worded(failed, err, job.name))
        finally:
            with self._lock:
                self._jobs[job.id] = replace(ended, ended_at=time.time())


def _worded(failed: Callable[[Exception], str], err: Exception, name: str) -> str:
    """`failed(err)`, or a plain sentence when the wording itself fails."""
    try:
        return failed(err)
    except Exception:  # the wording must not lose the outcome
        log.exception("job %s: its failure could not be worded", name)
        return f"⚠ {name} failed unexpectedly: {type(err).__name__}: {err}"
