"""Issue 22, item 6: a correction that does not fit its field's type. "next tuesday" in a date cell showed
in the grid, was gone after a reload, and nothing was said; "abc" in a number cell got a doubled toast
("Error (2)", "total: total: …") and stayed in the cell. Refused on the page now, once, naming the type,
and the cell shows the stored value again."""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

import pytest
from gradio_client import Client

from tests.browser_helpers import TOAST, browser_context, forget, ingest
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser

INVOICE = "INVOICE\nInvoice number: INV-7702\nInvoice date: 2025-06-03\nSeller: Quartet Labs GmbH\nTotal: 120.00 EUR\n"


@pytest.fixture(scope="module")
def invoice_run(appliance: Appliance, tmp_path_factory: pytest.TempPathFactory) -> Any:
    doc = tmp_path_factory.mktemp("corrections") / f"invoice-fit-{secrets.token_hex(3)}.txt"
    doc.write_text(INVOICE, encoding="utf-8")
    doc_id = ingest(appliance, doc)
    client = Client(appliance.url, verbose=False)
    run_id = client.predict([doc.name], "", "invoice", api_name="/extraction_run")
    wait_until(
        lambda: client.predict(run_id, api_name="/extraction_results")["status"] in ("done", "error"),
        timeout=300,
        every=1.0,
    )
    yield run_id, doc.name
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
    browser: Any, appliance: Appliance, artifacts: Path, invoice_run: Any, field: str, typed: str, kind: str
) -> None:
    run_id, name = invoice_run
    with browser_context(browser, 1280, 800) as context:
        page = context.new_page()
        page.goto(appliance.url, wait_until="load")
        page.get_by_role("tab", name="Extraction").click()
        page.locator("#extract-runs input").click()
        page.get_by_role("option", name=re.compile(rf"^#{run_id} ")).click()
        page.wait_for_function(
            "n => (document.querySelector('#extract-results')?.innerText ?? '').includes(n)", arg=name, timeout=20_000
        )
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
