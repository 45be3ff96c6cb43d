"""The Extraction tab in a real Chromium at 1280×800, as its users met it: a field table's error reaches
the page (not a bare "Error"), rows are added, typed from a dropdown and deleted, the result headers stay
on one line, every cell carries its flag, a stopped run says "stopped", a correction shows where its new
value stands, and the JSON export keeps the original beside the correction."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gradio_client import handle_file

from tests.browser_helpers import click_until, goto
from tests.harness import Appliance, api_client, wait_until

pytestmark = pytest.mark.browser

SIZE = {"width": 1280, "height": 800}
INVOICE = (
    "INVOICE\nInvoice number: INV-4410\nInvoice date: 2025-05-02\nSeller: Quartet Labs GmbH\n"
    "Buyer: Harbour Ltd\nOrder reference: PO-5512 (quote this on every payment)\nTotal: 980.00 EUR\n"
)
# How many text lines a header's text takes (a header stacked one letter per line takes many).
LINES = """(th) => {
  const el = th.querySelector('.header') || th;
  const range = document.createRange(); range.selectNodeContents(el);
  return new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
}"""
# What a cell shows: its text and the flag written after it.
SHOWN = """(cell) => {
  const span = cell.querySelector('span.text') || cell;
  const flag = getComputedStyle(span, '::after').content;
  return (span.innerText.trim() + ' ' + (flag && flag !== 'none' ? flag.replace(/^"|"$/g, '') : '')).trim();
}"""


@pytest.fixture(scope="module")
def one_browser(browser: Any) -> Iterator[Any]:
    """One browser (a context: its storage, so its identity) for the module: a run belongs to the browser
    that started it, and only that browser lists it."""
    context = browser.new_context(viewport=SIZE, accept_downloads=True)
    yield context
    context.close()


@pytest.fixture(scope="module")
def finished(appliance: Appliance, one_browser: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """A finished invoice run over one small invoice, started on the page: (run id, document name)."""
    folder = tmp_path_factory.mktemp("browser-extraction")
    doc = folder / "invoice-tab-4410.txt"
    doc.write_text(INVOICE, encoding="utf-8")
    client = api_client(appliance.url)
    client.predict([handle_file(str(doc))], api_name="/ingest")
    indexed = lambda: any(  # noqa: E731
        d["name"] == doc.name and d["status"] == "ok" for d in client.predict(api_name="/documents")
    )
    wait_until(indexed, timeout=180, every=0.5)
    page = open_tab(one_browser, appliance)
    page.locator("#extract-template input").click()
    page.get_by_role("option", name="Invoice", exact=True).click()
    page.locator("#extract-docs input").click()
    page.get_by_role("option", name=doc.name).click()
    page.keyboard.press("Escape")
    page.locator("#extract-run").click()
    over = re.compile(r"1 of 1 documents — (done|error)")
    page.locator("#extract-progress").get_by_text(over).wait_for(timeout=300_000)
    run_id = int(re.match(r"#(\d+) ", page.locator("#extract-runs input").input_value()).group(1))  # type: ignore[union-attr]
    page.close()
    return run_id, doc.name


def open_tab(one_browser: Any, appliance: Appliance) -> Any:
    page = one_browser.new_page()
    goto(page, appliance.url)  # the tab once the page is ready (Send on)
    page.get_by_role("tab", name="Extraction").click()
    page.locator("#extract-run").wait_for(timeout=15_000)
    return page


def show_run(page: Any, run_id: int, name: str) -> None:
    page.locator("#extract-runs input").click()
    page.get_by_role("option", name=re.compile(rf"^#{run_id} ")).click()
    page.wait_for_function(
        "n => (document.querySelector('#extract-results')?.innerText ?? '').includes(n)", arg=name, timeout=20_000
    )


def field_table_of_the_invoice(page: Any) -> None:
    page.locator("#extract-template input").click()
    page.get_by_role("option", name="Invoice", exact=True).click()
    page.locator("#custom-schema").get_by_text("Custom schema").first.click()
    page.locator("#from-template").click()
    page.wait_for_function(
        "() => (document.querySelector('#field-table')?.innerText ?? '').includes('invoice_number')", timeout=15_000
    )


def edit_cell(frame: Any, row: int, column: int, text: str) -> None:
    cell = frame.locator(f"[data-testid='cell-{row}-{column}']")
    cell.dblclick()
    editor = cell.locator("input, textarea").first
    editor.fill(text)
    editor.press("Enter")


def test_a_field_table_error_reaches_the_page(one_browser: Any, appliance: Appliance) -> None:
    page = open_tab(one_browser, appliance)
    field_table_of_the_invoice(page)
    edit_cell(page.locator("#field-table"), 1, 1, "money")
    page.locator("#to-schema").click()
    message = page.get_by_text(re.compile(r"row 2: type 'money' is not one of text, number"))
    message.first.wait_for(timeout=15_000)  # the message itself, not a bare "Error"
    assert message.first.is_visible()
    page.close()


def test_rows_are_added_typed_from_a_dropdown_and_deleted(
    one_browser: Any, appliance: Appliance, artifacts: Path
) -> None:
    page = open_tab(one_browser, appliance)
    field_table_of_the_invoice(page)
    rows = page.locator("#field-table [data-testid^='cell-'][data-testid$='-0']")
    before = rows.count()
    click_until(page.locator("#field-add"), rows.count, before + 1, what="Add a field")
    edit_cell(page.locator("#field-table"), before, 0, "parts")
    page.locator(f"#field-table [data-testid='cell-{before}-2']").click()  # a cell of the new row
    page.locator("#field-type input").click()
    page.get_by_role("option", name="table", exact=True).click()
    page.wait_for_function(
        f"() => (document.querySelector(\"#field-table [data-testid='cell-{before}-1']\")?.innerText ?? '')"
        ".trim() === 'table'",
        timeout=15_000,
    )
    assert page.locator("#column-table").is_visible(), "a table's columns are edited in a second small table"
    page.wait_for_function(
        "() => (document.querySelector('#column-table')?.innerText ?? '').includes('parts')", timeout=15_000
    )  # the new table got a first column row to fill in
    page.locator("#field-table").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "extraction-fields-1280x800.png"))
    click_until(page.locator("#field-delete"), rows.count, before, what="Delete the field clicked")
    assert "parts" not in page.locator("#field-table").inner_text()
    page.close()


def test_headers_stay_on_one_line_and_every_cell_carries_its_flag(
    one_browser: Any, appliance: Appliance, finished: tuple[int, str], artifacts: Path
) -> None:
    run_id, name = finished
    page = open_tab(one_browser, appliance)
    show_run(page, run_id, name)
    table = page.locator("#extract-results")
    headers = table.locator("th")
    texts = [h.inner_text().strip() for h in headers.all()]
    assert "invoice_number" in texts and "payment_terms" in texts, texts  # some of them are empty columns
    for header in headers.all():
        if header.inner_text().strip():
            assert header.evaluate(LINES) == 1, f"header {header.inner_text()!r} takes several lines"
    cells = [c.evaluate(SHOWN) for c in table.locator("[data-testid^='cell-0-']").all()[1:]]
    filled = [c for c in cells if c]
    assert filled and all(c.endswith(("✓", "?", "⚠", "✎", "–")) for c in filled), f"cells without a flag: {cells}"
    page.screenshot(path=str(artifacts / "extraction-1280x800.png"), full_page=False)
    page.close()


def test_a_stopped_run_says_stopped(one_browser: Any, appliance: Appliance, finished: tuple[int, str]) -> None:
    _, name = finished
    page = open_tab(one_browser, appliance)
    page.locator("#extract-docs input").click()
    page.get_by_role("option", name=name).click()
    page.keyboard.press("Escape")
    page.locator("#extract-run").click()
    page.locator("#extract-progress").get_by_text(re.compile("documents — (queued|running)")).wait_for(timeout=30_000)
    page.locator("#extract-stop").click()
    progress = page.locator("#extract-progress")
    progress.get_by_text(re.compile("— stopped")).wait_for(timeout=120_000)
    assert "error" not in progress.inner_text()
    runs = page.locator("#extract-runs input")  # the list's labels follow at the tab's next tick of its choices
    try:
        wait_until(lambda: "stopped" in runs.input_value(), timeout=15, every=0.3)
    except TimeoutError:
        raise AssertionError(f"the run is listed as {runs.input_value()!r} after it stopped") from None
    page.close()


def test_a_correction_shows_its_new_snippet_and_the_json_keeps_the_original(
    one_browser: Any, appliance: Appliance, finished: tuple[int, str]
) -> None:
    run_id, name = finished
    page = open_tab(one_browser, appliance)
    show_run(page, run_id, name)
    table = page.locator("#extract-results")
    column = [h.inner_text().strip() for h in table.locator("th").all()].index("invoice_number")
    before = table.locator(f"[data-testid='cell-0-{column}'] span.text").inner_text().strip()
    edit_cell(table, 0, column, "PO-5512")
    item = page.locator("#extract-review li", has_text="invoice_number")
    item.get_by_text("corrected").wait_for(timeout=20_000)
    assert "Order reference: PO-5512" in item.inner_text(), "the snippet of the new value, on its page"
    assert f"was: {before or '—'}" in item.inner_text()
    cell = table.locator(f"[data-testid='cell-0-{column}']")
    wait_until(lambda: cell.evaluate(SHOWN) == "PO-5512 ✎", timeout=20, every=0.5)  # the cell's flag: corrected
    with page.expect_download(timeout=30_000) as download:
        page.locator("#export-json").click()
    exported = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))[0]
    assert exported["record"]["invoice_number"] == "PO-5512"
    assert exported["original"] == {"invoice_number": before or None}, "the original beside the correction"
    assert "PO-5512" in exported["fields"]["invoice_number"]["correction"]["snippet"]
    page.close()
