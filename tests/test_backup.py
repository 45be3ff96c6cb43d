"""Backups from the admin page: taken while chats are written, restored at the next start, tampered
archives refused with nothing replaced, scheduled backups keeping the last N; the admin logs endpoint."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import tarfile
import tempfile
from pathlib import Path

import httpx
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from app import backup
from tests.gradio_api import Client
from tests.harness import API_KEY, Appliance, wait_until
from tests.test_admin import login
from tests.test_restore_checks import ROOMY, quartet_database


@pytest.fixture
def admin(appliance: Appliance) -> tuple[Client, str]:
    """A fresh admin session for each test: a restart ends the sessions."""
    c = Client(appliance.url, verbose=False)
    return c, login(c)


def integrity(db: Path) -> list[tuple[str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()


def chats(db: Path) -> dict[str, int]:
    """Each conversation's id → how many of its messages are written."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("select conversation_id, count(*) from messages group by conversation_id").fetchall()
    finally:
        conn.close()
    return dict(rows)


def fetched(appliance: Appliance, token: str, path: str, into: Path) -> Path:
    """The backup offered at `path` (what `/backup` returns), fetched once with the admin session's token."""
    response = httpx.get(appliance.url + path, headers={"X-Quartet-Admin": token}, timeout=60)
    assert response.status_code == 200, response.text[:300]
    name = response.headers["content-disposition"].rsplit("''", 1)[1]
    (archive := into / name).write_bytes(response.content)
    return archive


def test_a_backup_goes_once_to_the_admin_session_that_took_it_and_never_through_gradio(
    admin: tuple[Client, str], appliance: Appliance, tmp_path: Path
) -> None:
    """Issue 47, item 5: a backup was 0644 in /tmp under a predictable name, copied into Gradio's file cache,
    and a plain user fetched it by its /gradio_api/file= URL (every password hash, key digest and chat)."""
    c, token = admin
    other = login(Client(appliance.url, verbose=False))  # another admin session, still not the one that took it
    path = c.predict(token, api_name="/backup")
    assert path.startswith("/admin/downloads/") and len(path) > 50, path
    folder = appliance.data_dir / "downloads"
    waiting = list(folder.iterdir())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and len(waiting) == 1, waiting
    assert stat.S_IMODE(waiting[0].stat().st_mode) == 0o600
    name = waiting[0].name
    strangers: list[dict[str, str]] = [
        {},
        {"Authorization": f"Bearer {API_KEY}"},
        {"X-Quartet-Admin": "forged"},
        {"X-Quartet-Admin": other},
        {"Cookie": "quartet-admin-upload=forged"},
    ]
    for headers in strangers:
        for tried in (path, path.removeprefix("/admin")):
            refused = httpx.get(appliance.url + tried, headers=headers, timeout=10)
            assert refused.status_code == 404 and "fetched once" in refused.json()["detail"], (headers, refused.text)
    assert waiting[0].exists()  # a stranger's try does not use it up
    archive = fetched(appliance, token, path, tmp_path)
    with tarfile.open(archive) as tar:
        assert "database/quartet.db" in tar.getnames()
    assert archive.name == name and not list(folder.iterdir())  # gone from the disk once fetched
    again = httpx.get(appliance.url + path, headers={"X-Quartet-Admin": token}, timeout=10)
    assert again.status_code == 404  # once
    gradio_cache = Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")
    assert not list(gradio_cache.rglob(name)), "the backup went through Gradio's file cache"


def test_backup_and_restore_need_the_admin_session(appliance: Appliance, tmp_path: Path) -> None:
    c = Client(appliance.url, verbose=False)
    with pytest.raises(AppError, match="admin session"):
        c.predict("forged", api_name="/backup")
    archive = tmp_path / "x.tar.gz"
    archive.write_bytes(b"not a backup")
    with pytest.raises(AppError, match="admin session"):
        c.predict(handle_file(str(archive)), "", api_name="/restore")
    with pytest.raises(AppError, match="admin session"):
        c.predict("forged", api_name="/admin_logs")


def test_the_logs_endpoint_gives_the_app_log_to_the_admin(admin: tuple[Client, str], appliance: Appliance) -> None:
    c, token = admin
    found = c.predict(token, api_name="/admin_logs")
    assert "app" in found, found.keys()
    assert "engine ready: Gemma 3 270M (demo) ready on 4 cards" in found["app"]
    assert (appliance.data_dir / "logs" / "app.log").is_file()


def test_a_backup_taken_while_chats_are_written_restores_with_the_chats(
    admin: tuple[Client, str], appliance: Appliance, tmp_path: Path
) -> None:
    c, token = admin
    user = Client(appliance.url, verbose=False)
    done = [user.predict(f"Say hello number {n}.", "", "", 8, api_name="/chat")[1] for n in range(2)]
    streaming = [user.submit(f"Tell a long story {n}.", "", "", 120, api_name="/chat") for n in range(3)]
    wait_until(lambda: all(job.outputs() and job.outputs()[-1][0] for job in streaming), timeout=90)
    archive = fetched(appliance, token, c.predict(token, api_name="/backup"), tmp_path)  # while answers stream
    assert any(not job.done() for job in streaming), "the answers ended before the backup: nothing was written"
    written = [job.result(timeout=180)[1] for job in streaming]
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert manifest["format"] == "quartet-backup" and manifest["version"] == 1
    assert {f["path"] for f in manifest["files"]} == set(names) - {"manifest.json"}
    assert "database/quartet.db" in names and "settings/browser-secret" in names
    with tarfile.open(archive) as tar:  # no password hash or key outside the database (which pages never show)
        others = [tar.extractfile(n).read() for n in names if n.startswith(("settings/", "documents/"))]  # type: ignore[union-attr]
    assert others and not [o for o in others if b"pbkdf2_sha256$" in o or API_KEY.encode() in o]
    said = c.predict(handle_file(str(archive)), token, api_name="/restore")
    assert "restart Quartet" in said
    assert (appliance.data_dir / backup.PENDING / "database" / "quartet.db").is_file()
    before = set(appliance.data_dir.glob("before-restore-*"))
    appliance.restart()
    assert not (appliance.data_dir / backup.PENDING).exists()
    kept = set(appliance.data_dir.glob("before-restore-*")) - before
    assert len(kept) == 1 and (next(iter(kept)) / "quartet.db").is_file()  # the replaced state, moved aside
    db = appliance.data_dir / "quartet.db"
    assert integrity(db) == [("ok",)]
    restored = chats(db)
    assert all(restored.get(cid) == 2 for cid in done), (done, restored)  # the question and its answer
    assert all(restored.get(cid) == 2 for cid in written), (written, restored)  # the answer as far as it had come
    conn = sqlite3.connect(db)
    logged = conn.execute("select who, detail from admin_log where action = 'restore' order by id desc").fetchone()
    conn.close()
    assert logged[0] == "app start" and logged[1].startswith("a backup was restored"), logged
    _answer, _cid, progress = user.predict("Still there?", "", "", 6, api_name="/chat")
    assert progress["stats"]["generated_tokens"] > 0


def rewritten(source: Path, target: Path, change: str) -> Path:
    """A copy of the archive `source`, tampered with as `change` says."""
    with tarfile.open(source) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else b"") for m in tar.getmembers()]  # type: ignore[union-attr]
    with tarfile.open(target, "w:gz") as out:
        for member, data in members:
            if change == "hash" and member.name == "database/quartet.db":
                data = data[:-1] + bytes([data[-1] ^ 1])
            out.addfile(member, io.BytesIO(data))
        if change in {"dotdot", "symlink"}:
            name = "documents/../../escaped.txt" if change == "dotdot" else "documents/link.txt"
            info = tarfile.TarInfo(name)
            if change == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                out.addfile(info)
            else:
                info.size = 4
                out.addfile(info, io.BytesIO(b"evil"))
    return target


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("hash", r"database/quartet\.db is damaged: its sha256 differs"),
        ("dotdot", r"a path outside its folders: 'documents/\.\./\.\./escaped\.txt'"),
        ("symlink", r"a link or special file: 'documents/link\.txt'"),
    ],
)
def test_a_tampered_archive_is_refused_and_nothing_is_replaced(
    admin: tuple[Client, str], appliance: Appliance, tmp_path: Path, change: str, reason: str
) -> None:
    c, token = admin
    good = fetched(appliance, token, c.predict(token, api_name="/backup"), tmp_path)
    bad = rewritten(good, tmp_path / f"{change}.tar.gz", change)
    db = appliance.data_dir / "quartet.db"
    live = chats(db)
    with pytest.raises(AppError, match=reason):
        c.predict(handle_file(str(bad)), token, api_name="/restore")
    assert not (appliance.data_dir / backup.PENDING).exists()
    assert not list(appliance.data_dir.glob(f"{backup.PENDING}*"))  # the partial unpacking is gone too
    assert not any((folder / "escaped.txt").exists() for folder in (appliance.data_dir, appliance.data_dir.parent))
    assert chats(db) == live and integrity(db) == [("ok",)]
    conn = sqlite3.connect(db)
    refused = conn.execute("select detail from admin_log where action = 'restore' order by id desc").fetchone()
    conn.close()
    assert refused and refused[0].startswith("refused:")


def test_scheduled_backups_keep_the_last_n(tmp_path: Path) -> None:
    data = tmp_path / "var"
    database = quartet_database(data / "quartet.db")
    with database.atomic() as db:
        db.table("notes").insert({"text": "kept in every backup"})
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "policy.txt").write_text("Holidays: 25 days.")
    places = backup.Places(data, data / "quartet.db", tmp_path / "kb", data / "admin-settings.toml")
    folder = tmp_path / "usb"
    schedule = backup.Schedule(places, folder, every_h=0.2 / 3600, keep=2)
    schedule.start()
    try:
        wait_until(lambda: schedule.taken >= 4, timeout=60)
    finally:
        schedule.stop()
        database.close()
    archives = sorted(folder.glob("quartet-backup-*.tar.gz"))
    assert len(archives) == 2, (archives, schedule.last)
    for n, archive in enumerate(archives):
        manifest = backup.check(archive, tmp_path / f"check{n}", reference=places.db_path, room=ROOMY)
        assert {f.path for f in manifest.files} == {"database/quartet.db", "documents/policy.txt"}
        assert integrity(tmp_path / f"check{n}" / "database" / "quartet.db") == [("ok",)]


_KILLED_AFTER = """
import os, shutil, signal, sys
from pathlib import Path
from app import backup

real, done = shutil.move, [0]
def move(source, target):
    real(source, target)
    done[0] += 1
    if done[0] == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)  # as a power cut or kill -9 would, between two moves
shutil.move = move
root = Path(sys.argv[1])
backup.apply_pending(backup.Places(root / "var", root / "var" / "quartet.db", root / "kb", root / "var" / "s.toml"))
"""


def state(root: Path, note: str) -> None:
    """A data folder and documents folder whose every part says `note`."""
    database = quartet_database(root / "var" / "quartet.db")
    with database.atomic() as db:
        db.table("notes").insert({"text": note})
    database.close()
    (root / "kb").mkdir(exist_ok=True)
    (root / "kb" / f"{note}.txt").write_text(note)
    (root / "var" / "s.toml").write_text(f"# {note}\n")
    (root / "var" / "browser-secret").write_text(note)


@pytest.mark.slow
def test_a_restore_killed_half_way_at_start_is_finished_at_the_next_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    kills = 0
    for after in range(1, 20):
        root = tmp_path / f"run{after}"
        state(root / "old-box", "backed-up")
        places = backup.Places(
            root / "old-box" / "var",
            root / "old-box" / "var" / "quartet.db",
            root / "old-box" / "kb",
            root / "old-box" / "var" / "s.toml",
        )
        archive = backup.take(places, root / "usb")
        state(root, "live")
        backup.stage(archive, backup.Places(root / "var", root / "var" / "quartet.db", root / "kb", root / "s"), ROOMY)
        run = subprocess.run([sys.executable, "-c", _KILLED_AFTER, str(root), str(after)], timeout=60)
        if run.returncode == 0:
            break  # every move done before the count: the whole sequence has been cut at each point
        assert run.returncode == -9, run
        kills += 1
        said = backup.apply_pending(
            backup.Places(root / "var", root / "var" / "quartet.db", root / "kb", root / "var" / "s.toml")
        )
        assert said and "before-restore-" in said
        conn = sqlite3.connect(root / "var" / "quartet.db")
        assert conn.execute("select text from notes").fetchall() == [("backed-up",)]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
        assert sorted(p.name for p in (root / "kb").iterdir()) == ["backed-up.txt"]
        assert (root / "var" / "browser-secret").read_text() == "backed-up"
        aside = next((root / "var").glob("before-restore-*"))
        assert (aside / "documents" / "live.txt").is_file() and (aside / "browser-secret").read_text() == "live"
        kept = sqlite3.connect(aside / "quartet.db")
        assert kept.execute("select text from notes").fetchall() == [("live",)]
        kept.close()
        assert not (root / "var" / backup.PENDING).exists()
    assert kills >= 6, f"only {kills} points to cut at"
