"""A 40-page scanned PDF dropped in the Documents tab of a real Chromium: the progress line says which
page OCR reads ("page k of 40 by OCR") and moves forward, a chat on the same page answers meanwhile, and
the document ends indexed with its 40 pages. The pages are small (one line, about 600 × 100 pixels, at
300 dpi pixel for pixel): the 40 pages' OCR is 35 CPU seconds in all (measured with `load`, children's
CPU time; wall time here depends on the machine's load)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import answered, forget, open_tab, said
from tests.harness import Appliance, api_client
from tests.scans import image_pdf, scan

pytestmark = pytest.mark.browser

PAGES = 40
NAME = "scan-40-pages.pdf"
# Every text the progress line shows, with when it showed it (ms since the page opened).
RECORD = """() => {
  window.__progress = [];
  const note = () => {
    const line = (document.querySelector('#ingest-progress') || {}).innerText || '';
    const last = window.__progress[window.__progress.length - 1];
    if (line && (!last || last[1] !== line)) window.__progress.push([performance.now(), line]);
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
  note();
}"""
OCR_PAGE = re.compile(rf"{re.escape(NAME)}\W*: page (\d+) of {PAGES} by OCR")


def forty_pages() -> bytes:
    pages = [scan([f"Page {n}: the fan filter of rack {n} is cleaned."], width=640, size=26, noise=0, blur=0,
                  skew=0) for n in range(1, PAGES + 1)]  # fmt: skip
    return image_pdf(pages, dpi=300)


def test_a_40_page_scan_shows_its_ocr_page_by_page_while_the_page_stays_usable(
    browser: Any, appliance: Appliance, artifacts: Path, tmp_path: Path
) -> None:
    path = tmp_path / NAME
    path.write_bytes(forty_pages())
    page = open_tab(browser, appliance.url, "Documents", 1280, 800)
    client = api_client(appliance.url)
    try:
        page.locator("#documents").wait_for(timeout=15_000)
        page.evaluate(RECORD)
        page.locator("#upload input[type=file]").set_input_files(str(path))
        try:
            page.locator("#ingest-progress").get_by_text(re.compile(rf"page \d+ of {PAGES} by OCR")).wait_for(
                timeout=120_000
            )
        except Exception as error:
            shown = page.locator("#ingest-progress").inner_text()
            raise AssertionError(f"no OCR progress was shown in 120 s; the line says {shown!r}") from error
        asked_at = page.evaluate("performance.now()")
        page.get_by_role("tab", name="Chat").click()
        started = time.monotonic()
        try:
            answered(page, "Say hello in three words.")
        except Exception as error:
            raise AssertionError(f"the chat did not answer while the scan was read: {said(page)}") from error
        answered_in = time.monotonic() - started
        page.get_by_role("tab", name="Documents").click()
        page.wait_for_function(
            "n => new RegExp(n.replace(/\\./g, '\\\\.') + '[^\\\\n]*indexed').test("
            "(document.querySelector('#upload-status') || {}).innerText || '')",
            arg=NAME,
            timeout=300_000,
        )
        page.screenshot(path=str(artifacts / "documents-ocr-40-pages.png"))
        progress: list[list[Any]] = page.evaluate("window.__progress")
    finally:
        page.close()
        docs = client.predict(api_name="/documents")
        mine = [d for d in docs if d["name"] == NAME]
        forget(appliance, *[d["id"] for d in mine])
    [doc] = mine
    assert (doc["status"], doc["pages"]) == ("ok", PAGES), doc
    seen = [(at, int(m.group(1))) for at, line in progress if (m := OCR_PAGE.search(line))]
    numbers = [n for _, n in seen]
    last_run = numbers[max((i for i in range(1, len(numbers)) if numbers[i] < numbers[i - 1]), default=0) :]
    print(f"pages shown being read: {numbers}; the chat answered in {answered_in:.1f} s")
    # The small files' lane reads the first pages, then hands the scan to the large lane, which starts over:
    # within that last run the page only moves forward, and shows many steps of the 40.
    assert last_run == sorted(last_run) and len(set(last_run)) >= 5, numbers
    assert max(numbers) >= PAGES / 2, f"the progress never passed page {max(numbers)}: {numbers}"
    assert any(at > asked_at for at, _ in seen), "OCR showed no progress after the chat was asked"
