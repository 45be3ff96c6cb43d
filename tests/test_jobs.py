"""Long admin actions as jobs: whatever the action does, the job ends with words for people, and the
next action may start (issue 16: an unexpected error in the admin runner failed on a missing "text"
key and left the page waiting)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.admin import AdminDenied, AdminService
from app.auth import hash_password
from app.database import Database
from app.downloads import Downloads
from app.engine.engine_config import EngineConfig
from app.engine.kinds import backend_kind
from app.engine.service import EngineService
from app.jobs import Job, JobBusy, Jobs
from app.people import PeopleStore
from app.settings import DEMO_MODEL, Settings
from app.telemetry.monitor import CardMonitor
from app.telemetry.service import Telemetry
from tests.harness import wait_until


def ended(jobs: Jobs, job: Job) -> Job:
    done: Job = wait_until(lambda: (now := jobs.get(job.id)) and now.state != "running" and now, timeout=5)
    return done


def missing_text() -> str:
    outcome: dict[str, str] = {}
    return outcome["text"]  # the old runner's own failure: an outcome without its text


def test_an_unexpected_error_ends_the_job_with_words_for_people() -> None:
    jobs = Jobs()
    job = ended(jobs, jobs.start("engine restart", missing_text, failed=lambda err: f"⚠ restart failed: {err!r}"))
    assert (job.state, job.text) == ("failed", "⚠ restart failed: KeyError('text')")
    assert job.ended_at is not None
    assert ended(jobs, jobs.start("again", lambda: "✅ done", failed=str)).text == "✅ done"  # the next one runs


def test_a_failure_that_cannot_be_worded_still_ends_the_job() -> None:
    jobs = Jobs()
    job = ended(jobs, jobs.start("switch", missing_text, failed=lambda err: dict[str, str]()["text"]))
    assert job.state == "failed" and job.text == "⚠ switch failed unexpectedly: KeyError: 'text'"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_action_that_ends_its_thread_does_not_leave_the_job_running() -> None:
    def leaves() -> str:
        raise SystemExit  # not an Exception: it ends the thread

    jobs = Jobs()
    job = ended(jobs, jobs.start("card change", leaves, failed=str))
    assert job.state == "failed" and "card change stopped without a result" in job.text
    assert ended(jobs, jobs.start("next", lambda: "ok", failed=str)).state == "done"


def _admin(tmp_path: Path) -> AdminService:
    """The admin service with a real engine service, not started (nothing loads)."""
    settings = Settings(
        web={"admin_password_hash": hash_password("pw", iterations=1000)}, engine={"cards": ["127.0.0.1:1"]}
    )
    engine = EngineService(
        EngineConfig(model_path=DEMO_MODEL, model_name="demo", cards=("127.0.0.1:1",)), kinds=backend_kind
    )
    monitor = CardMonitor(lambda: ["127.0.0.1:1"], settings.health_url, every_s=1.0, timeout_s=0.1)
    telemetry = Telemetry(engine=engine, monitor=monitor, warning_c=80.0, critical_c=95.0, every_s=1.0)
    database = Database(tmp_path / "q.db")
    people = PeopleStore(database)
    downloads = Downloads(tmp_path / "downloads")
    return AdminService(
        database=database, engine=engine, telemetry=telemetry, settings=settings, people=people, downloads=downloads
    )


def test_the_admin_runner_words_an_unexpected_error(tmp_path: Path) -> None:
    """The job says what failed and how."""
    admin = _admin(tmp_path)
    token = admin.login("pw", who="test", client="127.0.0.1")

    def broken() -> object:
        missing_text()
        return None

    job = admin.start(token, "engine restart", broken)  # type: ignore[arg-type]
    wait_until(lambda: admin.job(token, job.id).state != "running", timeout=5)  # type: ignore[union-attr]
    done = admin.job(token, job.id)
    assert done is not None and done.state == "failed"
    assert done.text == "⚠ engine restart failed unexpectedly (KeyError: 'text'); the app's log has the details"
    with pytest.raises(AdminDenied):
        admin.job("forged", job.id)


def test_a_second_action_while_one_runs_is_refused_as_busy() -> None:
    jobs = Jobs()
    release = threading.Event()
    first = jobs.start("switch", lambda: "✅ done" if release.wait(5) else "late", failed=str)
    with pytest.raises(JobBusy) as caught:
        jobs.start("restart", lambda: "never", failed=str)
    assert caught.value.kind == "busy"
    assert caught.value.message == "restart was not started: switch is still running; try again once it has ended"
    release.set()
    assert ended(jobs, first).text == "✅ done"


def test_the_admin_log_has_one_row_per_password_checked(tmp_path: Path) -> None:
    """Tries refused by the throttle are not checked, so not logged (before: 49 rows for 9 guesses)."""
    admin = _admin(tmp_path)
    checked = 0
    for guess in range(20):
        with pytest.raises(AdminDenied) as refused:
            admin.login(f"guess-{guess}", who="web 10.0.0.9", client="@10.0.0.9")
        checked += "wrong admin password" in refused.value.message
    with pytest.raises(AdminDenied, match="too many wrong passwords"):
        admin.login("pw", who="web 10.0.0.9", client="@10.0.0.9")
    token = admin.login("pw", who="web 10.0.0.10", client="@10.0.0.10")  # another address is not held up
    rows = [r for r in admin.log(token, limit=100) if r["who"] == "admin (web 10.0.0.9)"]
    assert checked == 1 and len(rows) == checked, rows


def test_an_action_asked_while_another_runs_is_refused_in_the_admin_log(tmp_path: Path) -> None:
    """Issue 22 item 15: a switch asked while a reload ran left no trace in the admin log."""
    admin = _admin(tmp_path)
    token = admin.login("pw", who="web 10.0.0.1", client="@10.0.0.1")
    release = threading.Event()
    admin._jobs.start("engine restart", lambda: "✅" if release.wait(5) else "late", failed=str)
    with pytest.raises(JobBusy, match="engine restart is still running"):
        admin.start(token, "switch to demo", lambda: None, who="web 10.0.0.1")  # type: ignore[arg-type, return-value]
    release.set()
    refusal = admin.log(token)[0]
    assert (refusal["who"], refusal["action"], refusal["ok"]) == ("web 10.0.0.1", "switch to demo", 0)
    assert "engine restart is still running" in refusal["detail"]
