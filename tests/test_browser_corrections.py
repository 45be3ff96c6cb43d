"""Issue 22, item 6: a correction that does not fit its field's type. "next tuesday" in a date cell showed
in the grid, was gone after a reload, and nothing was said; "abc" in a number cell got a doubled toast
("Error (2)", "total: total: …") and stayed in the cell. Refused on the page now, once, naming the type,
and the cell shows the stored value again."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import TOAST, browser_context, extract_with, forget, goto, ingest
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser

INVOICE = "INVOICE\nInvoice number: INV-7702\nInvoice date: 2025-06-03\nSeller: Quartet Labs GmbH\nTotal: 120.00 EUR\n"


@pytest.fixture(scope="module")
def invoice_page(browser: Any, appliance: Appliance, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A page that ran the Invoice template over a small invoice itself (a run is its starter's alone), and
    shows that run's results."""
    doc = tmp_path_factory.mktemp("corrections") / f"invoice-fit-{secrets.token_hex(3)}.txt"
    doc.write_text(INVOICE, encoding="utf-8")
    doc_id = ingest(appliance, doc)
    with browser_context(browser, 1280, 800) as context:
        page = context.new_page()
        goto(page, appliance.url)  # the tab once the page is ready (Send on)
        page.get_by_role("tab", name="Extraction").click()
        extract_with(page, "Invoice", doc.name, timeout_s=300)
        page.wait_for_function(
            "n => (document.querySelector('#extract-results')?.innerText ?? '').includes(n)",
            arg=doc.name,
            timeout=20_000,
        )
        yield page
    forget(appliance, doc_id)


def cell_of(page: Any, field: str) -> Any:
    table = page.locator("#extract-results")
    column = [h.inner_text().strip() for h in table.locator("th").all()].index(field)
    return table.locator(f"[data-testid='cell-0-{column}']")


def text_of(cell: Any) -> str:
    return str(cell.locator("span.text").first.inner_text()).strip()


@pytest.mark.parametrize(
    ("field", "typed", "kind"), [("total", "abc", "number"), ("invoice_date", "next tuesday", "date")]
)
def test_a_correction_that_does_not_fit_its_type_is_refused_naming_the_type(
    artifacts: Path, invoice_page: Any, field: str, typed: str, kind: str
) -> None:
    page = invoice_page
    wait_until(lambda: page.locator(TOAST).count() == 0, timeout=30, every=0.3)  # the other case's toast has gone
    cell = cell_of(page, field)
    before = text_of(cell)
    cell.dblclick()
    editor = cell.locator("input, textarea").first
    editor.fill(typed)
    editor.press("Enter")
    toast = page.locator(TOAST).filter(has_text=field)
    toast.first.wait_for(timeout=20_000)
    said = toast.first.inner_text()
    assert kind in said and typed in said, f"the refusal does not name the type {kind!r}: {said!r}"
    assert said.count(f"{field}:") <= 1, f"the field is named twice: {said!r}"
    wait_until(lambda: text_of(cell_of(page, field)) == before, timeout=20, every=0.3)  # the cell reverts
    page.wait_for_timeout(1_500)  # a second toast for the same refusal would be up by now
    assert page.locator(TOAST).count() == 1, (
        f"{page.locator(TOAST).count()} toasts: {page.locator(TOAST).all_inner_texts()}"
    )
    page.screenshot(path=str(artifacts / f"extraction-unfit-{kind}-1280x800.png"))


AFTER = "e => getComputedStyle(e, '::after').content"


def test_a_corrected_cell_shows_its_pencil_and_an_empty_one_its_dash(artifacts: Path, invoice_page: Any) -> None:
    """Issue 22 item 19: no ✎ on a corrected cell, no flag on empty cells."""
    page = invoice_page
    cell = cell_of(page, "seller")
    cell.dblclick()
    editor = cell.locator("input, textarea").first
    editor.fill("Quartet Labs AG")
    editor.press("Enter")
    try:
        wait_until(lambda: "✎" in cell_of(page, "seller").locator("span.text").first.evaluate(AFTER), 20, 0.3)
    except TimeoutError:
        shown = cell_of(page, "seller").locator("span.text").first.evaluate(AFTER)
        raise AssertionError(f"the corrected cell's flag is {shown!r}") from None
    spans = page.locator("#extract-results [role=gridcell] span.text")
    empty = [s.evaluate(AFTER) for s in spans.all() if not s.inner_text().strip()]
    page.screenshot(path=str(artifacts / "extraction-flags-1280x800.png"))
    assert all("–" in flag for flag in empty), f"empty cells' flags: {empty}"
