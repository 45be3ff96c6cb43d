"""The whole app killed (SIGKILL) while it indexes a file from kb/: after a restart the database is
sound, no half document is visible, and the indexing finishes by itself."""

from __future__ import annotations

import signal
import sqlite3
import time

from tests.harness import Appliance, api_client, wait_until
from tests.test_knowledge_crash import check_consistent, version


def state(appliance: Appliance, name: str) -> tuple[str, int, int] | None:
    with sqlite3.connect(appliance.data_dir / "quartet.db", timeout=10) as conn:
        row = conn.execute("SELECT status, pages_done, pages_total FROM documents WHERE name = ?", [name]).fetchone()
    return tuple(row) if row else None  # type: ignore[return-value]


def test_the_app_killed_mid_indexing_restarts_sound_and_resumes(appliance: Appliance) -> None:
    kb = appliance.data_dir.parent / "kb"
    kb.mkdir(exist_ok=True)
    name = "killed-manual.txt"
    (kb / name).write_text(version(3, 240), encoding="utf-8")
    assert appliance.proc is not None
    deadline = time.monotonic() + 180
    while not ((now := state(appliance, name)) and now[0] == "indexing" and 0 < now[1] < now[2]):
        assert time.monotonic() < deadline, f"indexing never got under way ({now})"
        time.sleep(0.05)
    appliance.proc.send_signal(signal.SIGKILL)
    appliance.proc.wait(timeout=10)
    assert appliance.proc.returncode == -signal.SIGKILL

    conn = check_consistent(appliance.data_dir / "quartet.db")
    (doc_id,) = conn.execute("SELECT id FROM documents WHERE name = ?", [name]).fetchone()
    assert conn.execute("SELECT count(*) FROM chunks WHERE document_id = ?", [doc_id]).fetchone()[0] == 0
    conn.close()

    appliance.start()
    c = api_client(appliance.url)

    def finished() -> dict[str, object] | None:
        docs = [d for d in c.predict(api_name="/documents") if d["name"] == name]
        return docs[0] if docs and docs[0]["status"] == "ok" else None

    doc = wait_until(finished, timeout=300, every=1.0)
    assert doc["pages"] == now[2] and doc["chunks"]
    check_consistent(appliance.data_dir / "quartet.db").close()
    (kb / name).unlink()  # leave the shared appliance's library as it was
    wait_until(lambda: not [d for d in c.predict(api_name="/documents") if d["name"] == name], timeout=60, every=1.0)
