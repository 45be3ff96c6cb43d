"""The kb folder watched for real (inotify via watchfiles): the index follows what people do to files."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService
from app.knowledge.watcher import ignored
from tests.test_knowledge_fixtures import eventually

WATCHING = KnowledgeOptions(settle_s=0.4, rescan_s=3600)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.packaged()


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    return (tmp_path / "kb").resolve()


@pytest.fixture
def kb(tmp_path: Path, kb_dir: Path, embedder: Embedder) -> Iterator[KnowledgeService]:
    service = KnowledgeService(Database(tmp_path / "kb.db"), embedder, kb_dir=kb_dir, options=WATCHING)
    service.start()
    yield service
    service.stop()


def indexed_text(kb: KnowledgeService, path: Path) -> str | None:
    """The indexed text of the file at `path`, None while it is not indexed."""
    for doc in kb.documents():
        if doc.path == str(path) and doc.status == "ok":
            return " ".join(c.text for c in kb.document_chunks(doc.id))
    return None


def indexed_paths(kb: KnowledgeService) -> set[str]:
    return {d.path for d in kb.documents() if d.status == "ok"}


def files_in(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*") if p.is_file() and not ignored(p, folder)}


def test_added_changed_and_deleted_files(kb: KnowledgeService, kb_dir: Path) -> None:
    path = kb_dir / "cards.txt"
    path.write_text("Card two runs at 61 degrees.", encoding="utf-8")
    eventually(lambda: "61 degrees" in (indexed_text(kb, path) or ""), timeout=30, message="new file")
    path.write_text("Card two runs at 75 degrees after the update.", encoding="utf-8")
    eventually(lambda: "75 degrees" in (indexed_text(kb, path) or ""), timeout=30, message="changed file")
    path.unlink()
    eventually(lambda: not kb.documents(), timeout=30, message="deleted file")


def test_an_editor_saving_through_a_temporary_file(kb: KnowledgeService, kb_dir: Path) -> None:
    path = kb_dir / "notes.md"
    path.write_text("# Notes\n\nFirst draft.", encoding="utf-8")
    eventually(lambda: "First draft" in (indexed_text(kb, path) or ""), timeout=30)
    temp = kb_dir / ".notes.md.swp"  # write a temp file, rename it over the original
    temp.write_text("# Notes\n\nSecond draft.", encoding="utf-8")
    os.replace(temp, path)
    eventually(lambda: "Second draft" in (indexed_text(kb, path) or ""), timeout=30)
    os.rename(path, kb_dir / "notes.md~")  # keep a backup, write the file anew
    path.write_text("# Notes\n\nThird draft.", encoding="utf-8")
    eventually(lambda: "Third draft" in (indexed_text(kb, path) or ""), timeout=30)
    time.sleep(1)
    assert indexed_paths(kb) == {str(path)}, "a temporary or backup file was indexed"


def test_a_file_still_being_copied_is_indexed_once_complete(kb: KnowledgeService, kb_dir: Path) -> None:
    path = kb_dir / "manual.txt"
    parts = [f"Section {n}: the cards must be cooled, section {n} says why.\n\n".encode() * 40 for n in range(8)]
    with path.open("wb") as out:
        for part in parts:
            out.write(part)
            out.flush()
            time.sleep(0.15)  # slower than a disk, faster than the 0.4 s settle time
    eventually(lambda: indexed_text(kb, path), timeout=30)
    assert kb.wait_idle(30)
    doc = kb.documents()[0]
    assert doc.sha256 == hashlib.sha256(b"".join(parts)).hexdigest()
    runs = [p.state for p in kb.progress().finished if p.name == "manual.txt"]
    assert runs == ["indexed"], f"indexed {len(runs)} times while it was copied: {runs}"


def test_a_bulk_copy_of_300_files(kb: KnowledgeService, kb_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "export"
    source.mkdir()
    for n in range(300):
        (source / f"ticket-{n:03d}.txt").write_text(f"Ticket {n:03d}: card {n % 4} reported code E{n:04d}.")
    started = time.monotonic()
    shutil.copytree(source, kb_dir / "tickets")
    eventually(lambda: indexed_paths(kb) == files_in(kb_dir), timeout=150, message="the index never matched the folder")
    print(f"300 files indexed {time.monotonic() - started:.1f} s after the copy began")
    assert {d.collection for d in kb.documents()} == {"tickets"}
    assert [h.name for h in kb.search("code E0123", k=1)] == ["ticket-123.txt"]
    for n in range(0, 300, 3):
        (kb_dir / "tickets" / f"ticket-{n:03d}.txt").unlink()
    eventually(lambda: indexed_paths(kb) == files_in(kb_dir), timeout=60, message="deletions were missed")
    assert len(kb.documents()) == 200


def test_a_folder_moved_in_and_renamed(kb: KnowledgeService, kb_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "reports"
    outside.mkdir()
    for n in range(5):
        (outside / f"report {n}.md").write_text(f"# Report {n}\n\nAll four cards passed test {n}.")
    os.rename(outside, kb_dir / "reports")
    eventually(lambda: len(indexed_paths(kb)) == 5, timeout=30, message="a folder moved in")
    os.rename(kb_dir / "reports", kb_dir / "reports-2024")
    eventually(lambda: indexed_paths(kb) == files_in(kb_dir), timeout=30, message="a renamed folder")
    assert {d.collection for d in kb.documents()} == {"reports-2024"}


def test_changes_made_while_the_app_was_off_are_found(tmp_path: Path, kb_dir: Path, embedder: Embedder) -> None:
    db = tmp_path / "kb.db"
    kb_dir.mkdir()
    (kb_dir / "a.txt").write_text("Version one of a.")
    (kb_dir / "b.txt").write_text("File b, soon deleted.")
    first = KnowledgeService(Database(db), embedder, kb_dir=kb_dir, options=WATCHING)
    first.start()
    eventually(lambda: len(indexed_paths(first)) == 2, timeout=30)
    first.stop()
    (kb_dir / "a.txt").write_text("Version two of a.")
    (kb_dir / "b.txt").unlink()
    (kb_dir / "c.txt").write_text("File c, added while the app was off.")
    second = KnowledgeService(Database(db), embedder, kb_dir=kb_dir, options=WATCHING)
    second.start()
    try:
        eventually(lambda: indexed_paths(second) == files_in(kb_dir), timeout=30)
        assert "Version two" in (indexed_text(second, kb_dir / "a.txt") or "")
    finally:
        second.stop()
