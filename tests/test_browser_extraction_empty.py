"""Issue 22, item 19 (in part): before any result the Extraction tab showed an empty "Table" dropdown and a
large empty "Tables as CSV" box; they appear once a result has tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import browser_context, goto
from tests.harness import Appliance

pytestmark = pytest.mark.browser


def test_no_empty_table_controls_before_any_result(browser: Any, appliance: Appliance, artifacts: Path) -> None:
    with browser_context(browser, 1280, 800) as context:
        page = context.new_page()
        goto(page, appliance.url)  # the tab once the page is ready (Send on)
        page.get_by_role("tab", name="Extraction").click()
        page.locator("#extract-empty").wait_for(timeout=15_000)
        shown = [s for s in ("#extract-table-name", "#export-tables") if page.locator(s).is_visible()]
        page.screenshot(path=str(artifacts / "extraction-before-any-result-1280x800.png"))
        assert not shown, f"shown before any result: {shown}"
