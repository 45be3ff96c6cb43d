"""Uploads land in the kb folder under safe, unique names — never outside it, never half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService
from app.knowledge.uploads import UploadError, safe_name, save_upload
from app.knowledge.watcher import ignored


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\报告 2024.pdf", "报告 2024.pdf"),
        ("..", "upload"),
        ("", "upload"),
        (".bashrc", "bashrc"),
        ("tab\tand\x00nul\x1b.txt", "tabandnul.txt"),
        ('what<>:"|?*.md', "what_______.md"),
        ("  spaced out  .md", "spaced out.md"),
        ("name.", "name"),
        ("Ünïcödé résumé.docx", "Ünïcödé résumé.docx"),
    ],
)
def test_names_are_made_safe(given: str, expected: str) -> None:
    assert safe_name(given) == expected


def test_long_names_keep_their_extension_within_200_bytes() -> None:
    name = safe_name("很长的文件名" * 60 + ".pdf")
    assert name.endswith(".pdf") and len(name.encode()) <= 200 and name.startswith("很长的文件名")


def test_uploads_never_overwrite_and_never_leave_the_folder(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    first = save_upload(kb, "../notes.txt", b"one", max_bytes=1000)
    second = save_upload(kb, "notes.txt", b"two", max_bytes=1000)
    third = save_upload(kb, "/abs/path/notes.txt", b"three", max_bytes=1000)
    assert [p.name for p in (first, second, third)] == ["notes.txt", "notes (2).txt", "notes (3).txt"]
    assert [p.read_bytes() for p in (first, second, third)] == [b"one", b"two", b"three"]
    assert all(p.parent == kb.resolve() for p in (first, second, third))
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["notes (2).txt", "notes (3).txt", "notes.txt"]


def test_the_same_file_uploaded_again_is_not_stored_a_second_time(tmp_path: Path) -> None:
    """It was stored as "name (2).pdf" although recognised as a duplicate (issue 22, item 17)."""
    kb = tmp_path / "kb"
    first = save_upload(kb, "invoice.txt", b"INV-1", max_bytes=1000)
    again = save_upload(kb, "invoice.txt", b"INV-1", max_bytes=1000)
    other = save_upload(kb, "invoice.txt", b"INV-2", max_bytes=1000)
    once_more = save_upload(kb, "invoice.txt", b"INV-2", max_bytes=1000)  # the same as "invoice (2).txt"
    assert (again, once_more) == (first, other) and other.name == "invoice (2).txt"
    assert sorted(p.name for p in kb.iterdir()) == ["invoice (2).txt", "invoice.txt"]


def test_a_fresh_clone_ships_an_empty_library() -> None:
    """A newcomer's library started with a test invoice and two "duplicate" rows (issue 22, item 17)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "kb"], cwd=root, capture_output=True, text=True, check=True)
    assert tracked.stdout.split() == ["kb/.gitkeep"], f"kb/ ships {tracked.stdout.split()}"


def test_an_upload_from_a_file_and_the_size_limit(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    source = tmp_path / "browser-temp-123"
    source.write_bytes(b"x" * 5000)
    saved = save_upload(kb, "手册.pdf", source, max_bytes=5000)
    assert saved.read_bytes() == source.read_bytes() and saved.name == "手册.pdf"
    with pytest.raises(UploadError, match="larger than"):
        save_upload(kb, "big.pdf", b"x" * 5001, max_bytes=5000)
    with pytest.raises(UploadError, match="larger than"):
        save_upload(kb, "big.pdf", source, max_bytes=4096)
    assert [p.name for p in kb.iterdir()] == ["手册.pdf"], "a refused upload left a file behind"


def test_temporary_and_hidden_files_are_not_documents(tmp_path: Path) -> None:
    root = tmp_path
    for name in (".upload-x.part", "a.txt~", "~$report.docx", "x.crdownload", ".git/config", "kb.db-wal", "#a.txt#"):
        assert ignored(root / name, root), name
    for name in ("report.docx", "sub/报告.pdf", "notes.md"):
        assert not ignored(root / name, root), name
    assert ignored(tmp_path.parent / "elsewhere.txt", root)


def test_only_regular_files_are_copied_in(tmp_path: Path) -> None:
    """A symlink, a device or a FIFO handed as the upload is refused at once; nothing lands in kb/."""
    import os
    import time

    kb = tmp_path / "kb"
    target = tmp_path / "secret.txt"
    target.write_text("not yours", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for source in (link, Path("/dev/zero"), fifo, tmp_path):
        started = time.monotonic()
        with pytest.raises(UploadError, match=r"not a regular file|cannot be read as a file"):
            save_upload(kb, source.name, source, max_bytes=1 << 20)
        assert time.monotonic() - started < 2, f"{source} held the upload"
    assert [p.name for p in kb.iterdir()] == []
    assert save_upload(kb, "fine.txt", target, max_bytes=1 << 20).read_text(encoding="utf-8") == "not yours"


def test_the_watcher_ignores_symlinks_and_what_lies_outside(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("x", encoding="utf-8")
    (kb / "link.md").symlink_to(outside)
    (kb / "linked-folder").symlink_to(tmp_path)
    (kb / "sub" / "real.md").write_text("y", encoding="utf-8")
    assert ignored(kb / "link.md", kb)
    assert ignored(kb / "linked-folder" / "outside.md", kb)
    assert not ignored(kb / "sub" / "real.md", kb)


def test_a_batch_with_bad_files_reports_every_file_and_saves_the_good_ones(tmp_path: Path) -> None:
    """Issue 16: a refused upload (an UploadError, once a ValueError the Documents tab caught by that
    name) must cost only its own line of the batch's report, never the report of the whole drop."""
    sent = tmp_path / "sent"
    sent.mkdir()
    (sent / "first.txt").write_text("the first file", encoding="utf-8")
    (sent / "big.txt").write_bytes(b"x" * 300_000)  # over the 0.1 MB limit below
    (sent / "link.txt").symlink_to(sent / "first.txt")  # not a regular file
    (sent / "last.txt").write_text("the last file", encoding="utf-8")
    kb = KnowledgeService(
        Database(tmp_path / "kb.db"),
        Embedder.packaged(),  # loaded only to embed, which nothing here does (the service is not started)
        kb_dir=tmp_path / "kb",
        options=KnowledgeOptions(max_file_mb=0.1, watch=False),
    )
    report = kb.upload_all([sent / name for name in ("first.txt", "big.txt", "link.txt", "last.txt")])
    assert [(u.file, u.saved_as) for u in report] == [
        ("first.txt", "first.txt"),
        ("big.txt", None),
        ("link.txt", None),
        ("last.txt", "last.txt"),
    ]
    assert "larger than" in (report[1].reason or "") and "cannot be read as a file" in (report[2].reason or "")
    assert sorted(p.name for p in (tmp_path / "kb").iterdir()) == ["first.txt", "last.txt"]
