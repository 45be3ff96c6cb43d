"""Issue 22, item 12, in the browser: a search with no match said nothing (an empty list), titles kept
Markdown leftovers ("Here is bold , inline code ,"), and the export's box read ".json 794 B": the file's
name, the chat's title, was cut away in the narrow list."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from tests.browser_helpers import browser_context, goto, send
from tests.harness import Appliance

pytestmark = pytest.mark.browser


def test_search_titles_and_the_export_read_as_a_person_expects(
    browser: Any, appliance: Appliance, artifacts: Any
) -> None:
    word = f"osprey{secrets.token_hex(3)}"
    with browser_context(browser, 1280, 800) as context:
        page = goto(context.new_page(), appliance.url)
        send(page, f"Here is **bold**, `inline code`, and {word}.")
        listing = page.locator("#conversations")
        title = f"Here is bold, inline code, and {word}."
        listing.get_by_text(title).wait_for(timeout=10_000)

        search = page.locator("#chat-search input, #chat-search textarea").first
        search.fill(f"nothing says {word}zz")
        listing.get_by_text(f"No chat matches “nothing says {word}zz”").wait_for(timeout=10_000)
        assert listing.locator("label").count() == 0
        search.fill("")
        listing.get_by_text(title).wait_for(timeout=10_000)

        page.locator("#chat-manage").click()
        page.locator("#export-chat-json").click()
        name = page.locator("#chat-export .filename")
        name.wait_for(timeout=15_000)
        page.locator("#chat-export").screenshot(path=str(artifacts / "chat-export-1280x800.png"))
        shown = name.inner_text().replace("\n", "")
        assert shown.startswith("Here-is-bold-inline-code-and-") and shown.endswith(".json"), shown
        stem = page.locator("#chat-export .filename .stem")
        cut = stem.evaluate("e => [e.scrollWidth > e.clientWidth + 1, e.getBoundingClientRect().width]")
        assert not cut[0] and cut[1] > 40, f"the file's name is cut in its box: {cut}, {shown!r}"
