"""The admin page in Chromium: where each engine value comes from, a backup to download, a foreign
archive refused, and the app's recent log."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

from tests.browser_helpers import admin_login
from tests.harness import Appliance


def test_the_admin_page_backs_up_refuses_a_foreign_archive_and_shows_the_log(
    browser: Any, appliance: Appliance, tmp_path: Path, artifacts: Path
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    admin_login(page, appliance.url)
    page.get_by_text("Engine settings").first.click()
    page.locator("#settings-origins").get_by_text("the environment (QUARTET_ENGINE__CARDS)").wait_for(timeout=10_000)
    page.get_by_text("Backups").first.click()
    page.locator("#take-backup").click()
    page.locator("#backup-file").get_by_text("quartet-backup-").first.wait_for(timeout=60_000)
    with page.expect_download(timeout=30_000) as download:  # this admin session's upload ticket cookie fetches it
        page.locator("#backup-file a").first.click()
    with tarfile.open(download.value.path(), "r:gz") as archive:
        assert "manifest.json" in archive.getnames()
    assert download.value.suggested_filename.startswith("quartet-backup-")
    foreign = tmp_path / "holiday-photos.tar.gz"
    foreign.write_bytes(b"\x1f\x8b not really gzip")
    page.locator("#restore-file input[type=file]").set_input_files(str(foreign))
    page.locator("#restore-file").get_by_text("holiday-photos").first.wait_for(timeout=15_000)
    page.locator("#restore-backup").click()
    page.get_by_text("this is not a Quartet backup: it is not a readable .tar.gz archive").first.wait_for(
        timeout=15_000
    )
    page.get_by_text("Logs", exact=True).first.click()
    page.locator("#show-log").click()
    text = page.locator("#log-text textarea")
    page.wait_for_function("el => el.value.includes('engine ready')", arg=text.element_handle(), timeout=15_000)
    page.locator("#log-file").get_by_text(".log").first.wait_for(timeout=15_000)
    page.screenshot(path=str(artifacts / "admin-tools.png"), full_page=True)
    page.close()
