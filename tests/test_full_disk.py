"""A full data disk (issue 47, item 8), made real without mounting anything: SQLite's `max_page_count` keeps
the database file from growing by a page, and the pages it has are filled, so every write fails as on a full
disk ("database or disk is full", SQLITE_FULL). The admin still logs in (to make room), and chat says what
is wrong instead of "Something went wrong on our side (OperationalError …)"."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from app.admin import AdminService
from app.api.errors import body, status
from app.chat.service import ChatService
from app.chat.store import ChatStore
from app.database import Database, DiskFull
from app.downloads import Downloads
from app.ui.errors import for_person
from tests.test_jobs import _admin


def fill(database: Database, write: Callable[[int], None]) -> None:
    """The disk full for `database`: its file may not grow, and `write(size)` (a row of about `size` bytes
    to the table that must take the next write) is repeated, smaller and smaller, until not even a byte fits."""
    with database.atomic() as db:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
    for size in (2000, 400, 80, 16, 1):
        while True:
            try:
                write(size)
            except DiskFull:
                break


def make_room(database: Database) -> None:
    with database.atomic() as db:
        db.execute("PRAGMA max_page_count = 1073741823")


def test_the_admin_logs_in_on_a_full_disk_and_the_app_log_says_what_was_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    admin: AdminService = _admin(tmp_path)
    database = admin._database

    def log_row(size: int) -> None:
        with database.atomic() as db:
            db.table("admin_log").insert({"at": "", "who": "filler", "action": "", "detail": "x" * size, "ok": 1})

    fill(database, log_row)
    with pytest.raises(DiskFull):
        log_row(1)  # the disk is full for the admin log: its row cannot be written
    with caplog.at_level(logging.ERROR, logger="app.admin"):
        token = admin.login("pw", who="test", client="127.0.0.1")  # before: "database or disk is full"
    admin.check(token)  # a live session: the admin can go and make room
    assert "admin session opened" in caplog.text and "the data disk is full" in caplog.text, caplog.text
    make_room(database)
    admin.record("test", "login", "after room was made")
    rows = admin.log(token, limit=1)
    assert rows[0]["detail"] == "after room was made"  # the writer was left clean by the failed write


def test_chat_on_a_full_disk_says_the_data_disk_is_full(tmp_path: Path) -> None:
    database = Database(tmp_path / "q.db")
    downloads = Downloads(tmp_path / "downloads")
    engine = None  # nothing reaches the engine: the question cannot be saved
    chat = ChatService(ChatStore(database), engine, max_tokens=8, temperature=0, system_prompt="", downloads=downloads)  # type: ignore[arg-type]
    cid = chat.open(None, owner="browser:a")

    def message(size: int) -> None:
        chat.store.add(cid, "user", "x" * size)

    fill(database, message)
    before = chat.history(cid, owner="browser:a")
    with pytest.raises(DiskFull) as full:
        chat.send(cid, "Is there room?", owner="browser:a", session="s")
    err = full.value
    assert err.kind == "disk_full" and err.message.startswith(f"the data disk is full: {tmp_path} has no room")
    assert chat.history(cid, owner="browser:a") == before  # nothing half-written
    shown = for_person(err)  # what the page (and a gradio_client caller) is told
    assert shown.title == "The data disk is full" and "OperationalError" not in str(shown.message)
    assert status(err) == 507 and body(err)["error"]["code"] == "disk_full"  # and a /v1 caller
    make_room(database)
    assert chat.store.add(cid, "user", "room again") > 0
