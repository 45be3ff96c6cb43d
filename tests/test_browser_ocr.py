"""A 40-page scanned PDF dropped in the Documents tab of a real Chromium: the progress line says which
page OCR reads ("page k of 40 by OCR") and moves forward; a small text file dropped through the same
upload while the scan's first pages are read is indexed while the scan is still read (the small files'
lane hands the long scan on to the large one after `small_lane_ocr_pages`); a chat on the same page
answers meanwhile, and the scan ends indexed with its 40 pages. The pages are small (one line, about
600 × 100 pixels, at 300 dpi pixel for pixel): the 40 pages' OCR is 35 CPU seconds in all (measured with
`load`, children's CPU time; wall time here depends on the machine's load)."""

from __future__ import annotations

import json
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
SMALL = "note-dropped-while-scanning.txt"
# Every text the progress line and the upload report show, with when (ms since the page opened).
RECORD = """() => {
  window.__progress = [];
  const text = id => (document.querySelector(id) || {}).innerText || '';
  const note = () => {
    const line = text('#ingest-progress'), report = text('#upload-status');
    const last = window.__progress[window.__progress.length - 1];
    if (line && (!last || last[1] !== line || last[2] !== report))
      window.__progress.push([performance.now(), line, report]);
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
  note();
}"""
OCR_PAGE = re.compile(rf"{re.escape(NAME)}\W*: page (\d+) of {PAGES} by OCR")


def forty_pages() -> bytes:
    pages = [scan([f"Page {n}: the fan filter of rack {n} is cleaned."], width=640, size=26, noise=0, blur=0,
                  skew=0) for n in range(1, PAGES + 1)]  # fmt: skip
    return image_pdf(pages, dpi=300)


def indexed(name: str) -> str:
    """A page function: true once the upload report says `name` is indexed."""
    return (
        "() => new RegExp(" + json.dumps(re.escape(name) + r"[^\n]*indexed") + ").test("
        "(document.querySelector('#upload-status') || {}).innerText || '')"
    )


def test_a_40_page_scan_shows_its_ocr_page_by_page_while_a_small_file_and_a_chat_go_first(
    browser: Any, appliance: Appliance, artifacts: Path, tmp_path: Path
) -> None:
    path = tmp_path / NAME
    path.write_bytes(forty_pages())
    small = tmp_path / SMALL
    small.write_text("The spare fan of rack 7 sits in drawer 3 of the blue cabinet.\n", encoding="utf-8")
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
        dropped_at = page.evaluate("performance.now()")
        page.locator("#upload input[type=file]").set_input_files(str(small))
        try:
            page.wait_for_function(indexed(SMALL), timeout=120_000)
        except Exception as error:
            shown = page.locator("#ingest-progress").inner_text(), page.locator("#upload-status").inner_text()
            raise AssertionError(f"{SMALL} was not indexed in 120 s; the page says {shown!r}") from error
        small_in = (page.evaluate("performance.now()") - dropped_at) / 1000
        asked_at = page.evaluate("performance.now()")
        page.get_by_role("tab", name="Chat").click()
        started = time.monotonic()
        try:
            answered(page, "Say hello in three words.")
        except Exception as error:
            raise AssertionError(f"the chat did not answer while the scan was read: {said(page)}") from error
        answered_in = time.monotonic() - started
        page.get_by_role("tab", name="Documents").click()
        try:
            page.wait_for_function(indexed(NAME), timeout=300_000)
        except Exception as error:
            shown = page.locator("#ingest-progress").inner_text(), page.locator("#upload-status").inner_text()
            raise AssertionError(f"the scan was not indexed in 300 s; the page says {shown!r}") from error
        page.screenshot(path=str(artifacts / "documents-ocr-40-pages.png"))
        progress: list[list[Any]] = page.evaluate("window.__progress")
        report = page.locator("#upload-status").inner_text()
    finally:
        page.close()
        docs = client.predict(api_name="/documents")
        mine = [d for d in docs if d["name"] == NAME]
        notes = [d for d in docs if d["name"] == SMALL]
        forget(appliance, *[d["id"] for d in docs if d["name"].startswith((path.stem, small.stem))])
    [doc], [note] = mine, notes
    # The second drop saved and queued the small file alone (Gradio sends the first drop's scan again with it).
    assert report.count(NAME) == 1 and report.count(SMALL) == 1, report
    assert (doc["status"], doc["pages"]) == ("ok", PAGES), doc
    assert note["status"] == "ok", note
    # The first time the report said the small file was indexed, the scan was still being read by OCR.
    first = next((r[1:] for r in progress if re.search(re.escape(SMALL) + ".*indexed", r[2])), None)
    assert first, f"the page never showed {SMALL} indexed: {progress[-3:]}"
    # The scan was still on its way then: the line named it being read by OCR before its last page, or queued
    # (the small files' lane had just handed it on to the large one: a whole run saw that line), and the report
    # still showed it indexing.
    reading = OCR_PAGE.search(first[0])
    assert NAME in first[0] and (reading is None or int(reading.group(1)) < PAGES), f"the page said {first}"
    assert re.search(re.escape(NAME) + r"[^\n]*⏳", first[1]), f"the scan was not shown still indexing: {first}"
    assert not re.search(re.escape(NAME) + ".*indexed", first[1]), f"the scan was indexed first: {first}"
    seen = [(at, int(m.group(1))) for at, line, _ in progress if (m := OCR_PAGE.search(line))]
    numbers = [n for _, n in seen]
    last_run = numbers[max((i for i in range(1, len(numbers)) if numbers[i] < numbers[i - 1]), default=0) :]
    print(
        f"pages shown being read: {numbers}; {SMALL} indexed {small_in:.1f} s after its drop, while the line said "
        f"{first[0].split(chr(10))[-1]!r}; the chat answered in {answered_in:.1f} s"
    )
    # The small files' lane reads the first pages, then hands the scan to the large lane, which starts over:
    # within that last run the page only moves forward, and shows many steps of the 40.
    assert last_run == sorted(last_run) and len(set(last_run)) >= 5, numbers
    assert max(numbers) >= PAGES / 2, f"the progress never passed page {max(numbers)}: {numbers}"
    assert any(at > asked_at for at, _ in seen), "OCR showed no progress after the chat was asked"
