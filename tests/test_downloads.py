"""Files handed out once (app/downloads.py, app/api/download_routes.py), in process on real parts: a private
folder, a backup that only its admin session fetches, a chat's export fetched once, and nothing left behind
(issue 47, items 5 and 16: backups and exports were world-readable in /tmp and in Gradio's file cache)."""

from __future__ import annotations

import os
import stat
import tarfile
import time
from pathlib import Path

import fastapi
from fastapi.testclient import TestClient

from app import backup
from app.admin_sessions import AdminSessions
from app.api import download_routes
from app.auth import hash_password
from app.database import Database
from app.downloads import Downloads
from app.guards import UPLOAD_COOKIE
from app.people import PeopleStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def served(downloads: Downloads, sessions: AdminSessions | None = None) -> TestClient:
    api = fastapi.FastAPI()
    holds = sessions.holds if sessions else (lambda _token, _secret: False)
    download_routes.add(api, downloads, holds=holds)
    return TestClient(api)


def sessions_of(tmp_path: Path) -> AdminSessions:
    admin_hash = hash_password("pw", iterations=1000)
    return AdminSessions(PeopleStore(Database(tmp_path / "q.db")), lambda: admin_hash, lambda *a, **k: None)


def test_an_export_is_private_fetched_once_and_gone_from_the_disk(tmp_path: Path) -> None:
    downloads = Downloads(tmp_path / "downloads")
    offer = downloads.offer_text("# Budget\n\n**You:** hi", name="Budget-2026-12-02.md", media_type="text/markdown")
    assert offer.url.startswith("/downloads/") and len(offer.url) > 50 and offer.size == 21
    folder = downloads.folder()
    [written] = list(folder.iterdir())
    assert mode(folder) == 0o700 and mode(written) == 0o600
    client = served(downloads)
    got = client.get(offer.url)
    assert got.status_code == 200 and got.text == "# Budget\n\n**You:** hi"
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''Budget-2026-12-02.md"
    assert got.headers["cache-control"] == "no-store" and got.headers["content-type"].startswith("text/markdown")
    assert not list(folder.iterdir())  # unlinked as it was opened: on no disk after
    assert client.get(offer.url).status_code == 404  # once
    assert client.get(offer.url.replace("/downloads/", "/admin/downloads/")).status_code == 404


def test_a_backup_goes_only_to_the_admin_session_that_took_it(tmp_path: Path) -> None:
    sessions = sessions_of(tmp_path)
    mine, theirs = (sessions.login("pw", who="test", client=f"10.0.0.{n}") for n in (1, 2))
    downloads = Downloads(tmp_path / "downloads")
    archive = downloads.folder() / "quartet-backup-x.tar.gz"
    archive.write_bytes(b"the whole appliance")
    offer = downloads.offer(archive, name=archive.name, media_type="application/gzip", admin_session=mine)
    assert offer.url.startswith("/admin/downloads/") and mode(archive) == 0o600
    client = served(downloads, sessions)
    for headers in ({}, {"X-Quartet-Admin": theirs}, {"X-Quartet-Admin": "forged"}, {"Cookie": f"{UPLOAD_COOKIE}=x"}):
        refused = client.get(offer.url, headers=headers)
        assert refused.status_code == 404 and "fetched once" in refused.json()["detail"], headers
    assert archive.exists()  # a stranger's try does not use it up
    ticket = sessions.check(mine).ticket  # what the admin page's browser sends, as a cookie under /admin
    got = client.get(offer.url, headers={"Cookie": f"{UPLOAD_COOKIE}={ticket}"})
    assert got.status_code == 200 and got.content == b"the whole appliance" and not archive.exists()


def test_a_backup_is_written_private_from_its_first_byte(tmp_path: Path) -> None:
    data = tmp_path / "var"
    Database(data / "quartet.db").close()
    (tmp_path / "kb").mkdir()
    places = backup.Places(data, data / "quartet.db", tmp_path / "kb", data / "admin-settings.toml")
    usual = os.umask(0o022)  # the usual umask, which made the old archives 0644
    try:
        made = backup.take(places, tmp_path / "usb")
    finally:
        os.umask(usual)
    assert mode(made) == 0o600 and mode(tmp_path / "usb") == 0o700
    with tarfile.open(made) as tar:
        assert "manifest.json" in tar.getnames()


def test_what_nobody_fetched_is_removed_in_its_time_and_at_the_stop(tmp_path: Path) -> None:
    clock = Clock()
    downloads = Downloads(tmp_path / "downloads", ttl_s=600, clock=clock)
    first = downloads.offer_text("a", name="a.md", media_type="text/markdown")
    leftover = downloads.folder() / "quartet-backup-killed.tar.partial"  # an app killed mid-backup left it
    leftover.write_bytes(b"half")
    long_ago = time.time() - 3600
    os.utime(leftover, (long_ago, long_ago))
    clock.now += 601
    second = downloads.offer_text("b", name="b.md", media_type="text/markdown")
    assert len(list(downloads.folder().iterdir())) == 1  # the expired offer's file and the leftover are gone
    client = served(downloads)
    assert client.get(first.url).status_code == 404 and client.get(second.url).text == "b"
    downloads.offer_text("c", name="c.md", media_type="text/markdown")
    downloads.close()
    assert not (tmp_path / "downloads").exists()
