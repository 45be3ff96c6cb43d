"""A process killed (SIGKILL) in the middle of indexing leaves a sound database, never half a document."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = KnowledgeOptions(watch=False, page_chars=600, embed_batch=4)
CHILD = """
import sys
from pathlib import Path

import pytest
from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService

options = KnowledgeOptions(watch=False, page_chars=600, embed_batch=4)
kb = KnowledgeService(Database(Path(sys.argv[1])), Embedder.packaged(), kb_dir=None, options=options)
kb.start()
kb.ingest_paths([Path(sys.argv[2])])
kb.wait_idle()
print("finished", flush=True)
"""


def version(n: int, pages: int) -> str:
    sentence = "Version {n}, page {p}: card {c} holds layers {a} to {b} and stays below {t} degrees. "
    return "\n\n".join(
        "".join(sentence.format(n=n, p=p, c=p % 4, a=p * 8, b=p * 8 + 7, t=60 + p % 20) for _ in range(6))
        for p in range(1, pages + 1)
    )


def snapshot(db: Path, path: Path) -> tuple[str, int, int] | None:
    with sqlite3.connect(db, timeout=10) as conn:
        row = conn.execute(
            "SELECT status, pages_done, pages_total FROM documents WHERE path = ?", [str(path)]
        ).fetchone()
    return tuple(row) if row else None  # type: ignore[return-value]


def check_consistent(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")  # raises if the index is off
    for sql in (
        "SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk_id FROM vectors)",
        "SELECT count(*) FROM vectors WHERE chunk_id NOT IN (SELECT id FROM chunks)",
        "SELECT count(*) FROM documents d WHERE chunk_count != (SELECT count(*) FROM chunks WHERE document_id = d.id)",
        "SELECT count(*) FROM chunks c WHERE page NOT IN (SELECT number FROM pages WHERE document_id = c.document_id)",
    ):
        assert conn.execute(sql).fetchone()[0] == 0, sql
    return conn


@pytest.mark.embedder
def test_killed_mid_indexing_keeps_the_old_version_whole_and_resumes(tmp_path: Path) -> None:
    db, path = tmp_path / "kb.db", tmp_path / "manual.txt"
    path.write_text(version(1, 2), encoding="utf-8")
    embedder = Embedder.packaged()
    first = KnowledgeService(Database(db), embedder, kb_dir=None, options=OPTIONS)
    first.start()
    first.ingest_paths([path])
    assert first.wait_idle(60)
    first.stop()

    path.write_text(version(2, 80), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(path)], cwd=ROOT, env=env)
    deadline = time.monotonic() + 120
    try:
        while True:
            state = snapshot(db, path)
            assert child.poll() is None, "the indexing process finished before it could be killed"
            if state and state[0] == "indexing" and 0 < state[1] < state[2]:
                break
            assert time.monotonic() < deadline, "indexing never got under way"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL

    conn = check_consistent(db)
    doc_id, status = conn.execute("SELECT id, status FROM documents").fetchone()
    assert status == "indexing", "the row shows the interrupted indexing"
    texts = [row[0] for row in conn.execute("SELECT text FROM chunks WHERE document_id = ?", [doc_id])]
    assert texts and all(t.startswith("Version 1") for t in texts), "half of the new version got in"
    assert conn.execute("SELECT count(*) FROM pages").fetchone()[0] == 2
    conn.close()

    again = KnowledgeService(Database(db), embedder, kb_dir=None, options=OPTIONS)
    again.start()
    try:
        assert again.wait_idle(120)
        (doc,) = again.documents()
        assert (doc.status, doc.pages_total) == ("ok", 80)
        assert all(c.text.startswith("Version 2") for c in again.document_chunks(doc.id))
        assert "Version 2, page 77:" in (again.page_text(doc.id, 77) or "")
        assert again.search("layers 616 to 623", k=3)[0].page == 77
    finally:
        again.stop()
    check_consistent(db).close()
