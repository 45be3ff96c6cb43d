"""Issue 22, item 5: a custom schema pasted while the Template still named one was silently dropped (three
Contract runs queued), and choosing "Custom schema…" did not open its editor. The choice is explicit and
visible: choosing "Custom schema…" opens the editor, pasting a schema chooses "Custom schema…", the line
by Extract says which one runs, and the pasted schema is the one the run uses."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from app.database import Database
from tests.browser_helpers import browser_context, forget, goto, ingest, said
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser

PASTED = {
    "type": "object",
    "properties": {"colour_of_the_door": {"type": "string", "description": "The colour of the front door."}},
}


def choose_template(page: Any, title: str) -> None:
    page.locator("#extract-template input").click()
    page.get_by_role("option", name=title, exact=True).click()


def test_a_pasted_schema_is_the_one_that_runs(
    browser: Any, appliance: Appliance, artifacts: Path, tmp_path: Path
) -> None:
    doc = tmp_path / f"door-{secrets.token_hex(3)}.txt"
    doc.write_text("The house at 4 Harbour Lane has a green front door.\n", encoding="utf-8")
    doc_id = ingest(appliance, doc)
    try:
        with browser_context(browser, 1280, 800) as context:
            page = context.new_page()
            goto(page, appliance.url)  # the tab once the page is ready (Send on)
            page.get_by_role("tab", name="Extraction").click()
            page.locator("#extract-run").wait_for(timeout=15_000)
            editor = page.locator("#schema-text .cm-content")
            assert not editor.is_visible(), "the schema editor is open before anyone asked for it"

            choose_template(page, "Custom schema…")
            editor.wait_for(state="visible", timeout=5_000)  # choosing it opens its editor
            page.locator("#extract-which").get_by_text("your custom schema").wait_for(timeout=5_000)

            choose_template(page, "Contract key terms")  # the template named again, as people did
            page.locator("#extract-which").get_by_text("Contract key terms").wait_for(timeout=5_000)
            editor.click()
            page.keyboard.insert_text(json.dumps(PASTED))  # pasted: now that is the one that runs
            page.locator("#extract-which").get_by_text("your custom schema").wait_for(timeout=5_000)
            chosen = page.locator("#extract-template input").input_value()
            assert chosen == "Custom schema…", f"the Template still says {chosen!r} with a schema pasted"

            page.locator("#extract-docs input").click()
            page.get_by_role("option", name=doc.name).click()
            page.keyboard.press("Escape")
            before = last_run(appliance)["id"]
            page.locator("#extract-run").click()
            try:
                run = wait_until(lambda: (r := last_run(appliance))["id"] > before and r, timeout=60, every=0.5)
            except TimeoutError as error:
                raise AssertionError(f"no run was started; the page shows {said(page)}") from error
            assert run["schema"]["properties"] == PASTED["properties"], f"the run used {run['template']!r}"
            assert run["template"] in ("custom", ""), run["template"]
            page.screenshot(path=str(artifacts / "extraction-custom-schema-1280x800.png"))
    finally:
        forget(appliance, doc_id)


def last_run(appliance: Appliance) -> dict[str, Any]:
    """The newest extraction run: its id, template and schema (id 0: none yet)."""
    with Database(appliance.data_dir / "quartet.db").read() as db:
        row = db.execute("SELECT id, template, schema FROM extraction_runs ORDER BY id DESC LIMIT 1").fetchone()
    return {"id": row[0], "template": row[1], "schema": json.loads(row[2])} if row else {"id": 0}
