"""The key that seals each browser's stored id: made once in the data folder, owner-only, read back after."""

from __future__ import annotations

import stat
from pathlib import Path

from app.browser_secret import FILE_NAME, browser_secret


def test_the_key_is_made_once_and_read_back_at_every_start(tmp_path: Path) -> None:
    data = tmp_path / "var"  # not there yet: the first start makes it
    first = browser_secret(data)
    assert len(first) >= 32
    assert browser_secret(data) == first
    assert (data / FILE_NAME).read_text().strip() == first
    assert [p.name for p in data.iterdir()] == [FILE_NAME], "a temporary file was left behind"


def test_only_the_owner_may_read_the_key(tmp_path: Path) -> None:
    browser_secret(tmp_path)
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600


def test_a_key_restored_with_wider_rights_is_kept_and_closed_again(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    path.write_text("restored-from-a-backup\n")
    path.chmod(0o644)
    assert browser_secret(tmp_path) == "restored-from-a-backup"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_empty_key_file_is_replaced_by_a_new_key(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text("")
    made = browser_secret(tmp_path)
    assert made and browser_secret(tmp_path) == made


def test_each_data_folder_has_a_key_of_its_own(tmp_path: Path) -> None:
    assert browser_secret(tmp_path / "a") != browser_secret(tmp_path / "b")
