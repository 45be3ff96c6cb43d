"""The knowledge service on small files: idempotency, changes, deletions, hostile input, resume."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.database import Database
from app.errors import QuartetError
from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService
from app.knowledge.store import DocumentInfo
from tests.documents import all_chinese, encrypted, long_text
from tests.library import PASSWORD, handbook
from tests.test_knowledge_fixtures import eventually, slow_pdf

FAST = KnowledgeOptions(watch=False, read_timeout_s=20)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.packaged()


@pytest.fixture
def service(tmp_path: Path, embedder: Embedder) -> Iterator[KnowledgeService]:
    kb = KnowledgeService(Database(tmp_path / "kb.db"), embedder, kb_dir=tmp_path / "kb", options=FAST)
    kb.start()
    yield kb
    kb.stop()


def ingest(kb: KnowledgeService, *paths: Path) -> dict[str, DocumentInfo]:
    kb.ingest_paths(list(paths))
    assert kb.wait_idle(120)
    return {d.name: d for d in kb.documents()}


def count(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_the_same_content_is_indexed_once(service: KnowledgeService, tmp_path: Path) -> None:
    original = tmp_path / "cards.txt"
    original.write_text("The third card overheats when the fan stops. Replace the fan.", encoding="utf-8")
    first = ingest(service, original)["cards.txt"]
    again = ingest(service, original)["cards.txt"]
    assert (again.id, again.indexed_at, again.chunk_count) == (first.id, first.indexed_at, first.chunk_count)
    copy = tmp_path / "copy of cards.txt"
    shutil.copyfile(original, copy)
    duplicate = ingest(service, copy)["copy of cards.txt"]
    assert duplicate.status == "duplicate" and duplicate.duplicate_of == first.id
    assert duplicate.error and "cards.txt" in duplicate.error
    assert {h.name for h in service.search("card overheats fan", k=5)} == {"cards.txt"}
    original.unlink()
    service.rescan()
    assert eventually(
        lambda: service.wait_idle(1) and "cards.txt" not in {d.name for d in service.documents()}, timeout=30
    )
    promoted = {d.name: d for d in service.documents()}["copy of cards.txt"]
    assert promoted.status == "ok" and {h.name for h in service.search("card overheats", k=5)} == {"copy of cards.txt"}


def test_remove_failed_keeps_good_and_password_protected_documents(service: KnowledgeService, tmp_path: Path) -> None:
    from tests.documents import encrypted
    from tests.library import handbook

    locked = tmp_path / "locked.pdf"
    locked.write_bytes(encrypted(handbook(), "secret-1"))
    good = tmp_path / "good.txt"
    good.write_text("The fan of the second card is replaced every year.", encoding="utf-8")
    copy = tmp_path / "copy.txt"
    shutil.copyfile(good, copy)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    docs = ingest(service, good, copy, empty, locked)
    assert {docs["copy.txt"].status, docs["empty.txt"].status} == {"duplicate", "error"}
    assert docs["locked.pdf"].error_kind == "encrypted"
    assert service.remove_failed() == 2
    assert sorted(d.name for d in service.documents()) == ["good.txt", "locked.pdf"]
    assert service.remove_failed() == 0


def test_a_changed_file_is_indexed_again(service: KnowledgeService, tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Cooling\n\nThe heatsink is made of copper.\n", encoding="utf-8")
    before = ingest(service, path)["notes.md"]
    path.write_text("# Cooling\n\nThe heatsink is made of aluminium now.\n", encoding="utf-8")
    after = ingest(service, path)["notes.md"]
    assert after.id == before.id and after.sha256 != before.sha256
    texts = " ".join(c.text for c in service.document_chunks(after.id))
    assert "aluminium" in texts and "copper" not in texts
    assert not [h for h in service.search("copper", k=5) if "copper" in h.text]


def test_a_deleted_file_leaves_the_index(service: KnowledgeService, tmp_path: Path) -> None:
    path = tmp_path / "gone.txt"
    path.write_text("This file will be deleted soon.", encoding="utf-8")
    doc = ingest(service, path)["gone.txt"]
    path.unlink()
    service.rescan()
    eventually(lambda: service.document(doc.id) is None, timeout=30, message="the deleted file stayed indexed")
    db = tmp_path / "kb.db"
    assert count(db, f"SELECT count(*) FROM chunks WHERE document_id = {doc.id}") == 0
    assert count(db, "SELECT count(*) FROM vectors WHERE chunk_id NOT IN (SELECT id FROM chunks)") == 0


def test_hostile_files_get_clear_statuses_and_the_queue_carries_on(tmp_path: Path, embedder: Embedder) -> None:
    files = tmp_path / "incoming"
    files.mkdir()
    chinese = all_chinese()[:1500]
    four_pages = handbook()
    samples = {
        "zero.pdf": b"",
        "half.pdf": four_pages[: len(four_pages) // 3],
        "picture.txt": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,
        "gbk 中文.txt": chinese.encode("gbk"),
        "报告 2024 (final).md": "# 报告\n\n四张卡的温度都正常。".encode(),
        "-rf ünïcödé 'quoted'.html": b"<p>Odd names are fine.</p>",
        "slow.pdf": slow_pdf(),
    }
    for name, data in samples.items():
        (files / name).write_bytes(data)
    options = KnowledgeOptions(watch=False, read_timeout_s=1.5)
    kb = KnowledgeService(Database(tmp_path / "kb.db"), embedder, kb_dir=None, options=options)
    kb.start()
    try:
        docs = ingest(kb, files)
        assert (docs["zero.pdf"].status, docs["zero.pdf"].error_kind) == ("error", "empty")
        assert docs["half.pdf"].status == "ok" or docs["half.pdf"].error_kind == "corrupt"
        assert (docs["picture.txt"].error_kind, docs["slow.pdf"].error_kind) == ("unsupported", "timeout")
        for name in ("gbk 中文.txt", "报告 2024 (final).md", "-rf ünïcödé 'quoted'.html"):
            assert docs[name].status == "ok", (name, docs[name].error)
        assert "层切分的代价是串行" in " ".join(c.text for c in kb.document_chunks(docs["gbk 中文.txt"].id))
        assert [h.name for h in kb.search("四张卡的温度", k=1)] == ["报告 2024 (final).md"]
        assert all(d.error and d.name in d.error for d in docs.values() if d.status == "error")
    finally:
        kb.stop()


def test_an_encrypted_pdf_is_indexed_once_its_password_is_given(service: KnowledgeService, tmp_path: Path) -> None:
    path = tmp_path / "locked.pdf"
    path.write_bytes(encrypted(handbook(), PASSWORD))
    locked = ingest(service, path)["locked.pdf"]
    assert (locked.status, locked.error_kind) == ("error", "encrypted")
    service.unlock(locked.id, "not the password")
    assert service.wait_idle(60)
    still = service.document(locked.id)
    assert still is not None and (still.status, still.error_kind) == ("error", "encrypted")
    service.unlock(locked.id, PASSWORD)
    assert service.wait_idle(60)
    opened = service.document(locked.id)
    assert opened is not None and opened.status == "ok" and (opened.pages_total, opened.chunk_count > 0) == (4, True)
    assert {h.name for h in service.search("power supply 450 watts", k=3)} == {"locked.pdf"}


def test_a_real_encrypted_pdf_is_indexed_once_its_password_is_given(service: KnowledgeService, corpus: Path) -> None:
    locked = ingest(service, corpus / "pdf" / "libreoffice-writer-password.pdf")["libreoffice-writer-password.pdf"]
    assert (locked.status, locked.error_kind) == ("error", "encrypted")
    service.unlock(locked.id, "openpassword")
    assert service.wait_idle(60)
    opened = service.document(locked.id)
    assert opened is not None and opened.status == "ok" and opened.chunk_count > 0


def test_progress_shows_pages_while_indexing(service: KnowledgeService, tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text(long_text(7), encoding="utf-8")
    service.ingest_paths([tmp_path / "long.txt"])
    seen = eventually(lambda: (p := service.progress().active) and p.state == "embedding" and p, timeout=60)
    assert seen.pages_total == 7 and seen.name == "long.txt"
    assert service.wait_idle(60)
    doc = service.documents()[0]
    assert (doc.pages_done, doc.pages_total) == (7, 7)
    assert service.progress().finished[0].state == "indexed" and service.progress().idle


def test_stop_interrupts_and_the_next_start_resumes(tmp_path: Path, embedder: Embedder) -> None:
    db = tmp_path / "kb.db"
    small_batches = KnowledgeOptions(watch=False, embed_batch=2)  # many safe points to stop at
    first = KnowledgeService(Database(db), embedder, kb_dir=None, options=small_batches)
    first.start()
    (tmp_path / "long.txt").write_text(long_text(7), encoding="utf-8")
    first.ingest_paths([tmp_path / "long.txt"])
    eventually(lambda: (p := first.progress().active) and p.state == "embedding", timeout=60)
    first.stop()
    assert first.progress().finished[0].state == "cancelled"
    assert [d.status for d in first.documents()] == ["indexing"]
    again = KnowledgeService(Database(db), embedder, kb_dir=None, options=FAST)
    again.start()
    try:
        assert again.wait_idle(60)
        assert [(d.status, d.pages_total) for d in again.documents()] == [("ok", 7)]
    finally:
        again.stop()


def test_a_new_embedder_re_embeds_what_is_indexed(tmp_path: Path, embedder: Embedder) -> None:
    db = tmp_path / "kb.db"
    path = tmp_path / "fans.txt"
    path.write_text("Each card has a small fan. The fans are loud at full load.", encoding="utf-8")
    old = KnowledgeService(Database(db), embedder, kb_dir=None, options=FAST)
    old.start()
    ingest(old, path)
    old.stop()
    renamed = Embedder(embedder.model_dir, name="all-MiniLM-L6-v2, re-exported")
    new = KnowledgeService(Database(db), renamed, kb_dir=None, options=FAST)
    new.start()
    try:
        assert new.wait_idle(60)
        assert [d.model for d in new.documents()] == ["all-MiniLM-L6-v2, re-exported"]
        assert count(db, "SELECT count(*) FROM vectors WHERE model != 'all-MiniLM-L6-v2, re-exported'") == 0
        assert [h.name for h in new.search("noisy fans", k=1)] == ["fans.txt"]
        assert new.progress().finished[0].state == "reembedded"
    finally:
        new.stop()


def test_delete_removes_the_document_and_its_kb_file(service: KnowledgeService, tmp_path: Path) -> None:
    """Its uploader may delete it (someone else may not: that needs the admin, `by=None`)."""
    saved = service.upload("../../报告.txt", "风扇坏了就换一个新的风扇。".encode(), collection="维修", owner="user:ada")
    assert saved.parent == (tmp_path / "kb" / "维修").resolve() and saved.name == "报告.txt"
    assert service.wait_idle(60)
    doc = service.documents()[0]
    assert (doc.collection, doc.status) == ("维修", "ok")
    assert service.search("风扇", k=3, collection="维修")
    for other in ("user:bob", "", "session:x"):
        with pytest.raises(QuartetError, match="not uploaded by you") as refused:
            service.delete(doc.id, by=other)
        assert refused.value.kind == "denied" and saved.exists()
    assert service.delete(doc.id, by="user:ada") and not saved.exists() and service.documents() == []
    assert not service.delete(doc.id, by=None)
    found = service.upload("found.txt", b"Put here by the admin.")
    assert service.wait_idle(60)
    with pytest.raises(QuartetError, match="not uploaded by you"):
        service.delete(service.documents()[0].id, by="user:ada")
    assert service.delete(service.documents()[0].id, by=None) and not found.exists()
    assert count(tmp_path / "kb.db", "SELECT count(*) FROM chunks") == 0


def test_a_hard_link_in_kb_is_not_indexed(service: KnowledgeService, tmp_path: Path) -> None:
    """kb/hl-secret.txt linked to a file outside the folder (before: its text was served to anyone)."""
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("root:x:0:0:the secret pass phrase is marmalade\n", encoding="utf-8")
    kb_dir = tmp_path / "kb"
    kb_dir.mkdir(exist_ok=True)
    os.link(secret, kb_dir / "hl-secret.txt")
    docs = ingest(service, kb_dir)
    assert docs["hl-secret.txt"].status == "error" and "hard link" in (docs["hl-secret.txt"].error or "")
    assert not service.search("marmalade pass phrase", k=3)


def test_kb_names_lose_newlines_and_rtl_overrides(service: KnowledgeService, tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb"
    kb_dir.mkdir(exist_ok=True)
    (kb_dir / "invoice\u202etxt.exe\n.txt").write_text("The fan runs at 3000 rpm.\n", encoding="utf-8")
    docs = ingest(service, kb_dir)
    assert list(docs) == ["invoicetxt.exe.txt"] and docs["invoicetxt.exe.txt"].status == "ok"
