"""Issue 22, item 9: a new chat is in the list as soon as its first message is sent, not once its answer
has ended (minutes on a busy box)."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from tests.browser_helpers import ANSWER_OVER, browser_context, goto, said

pytestmark = pytest.mark.browser

# Polled at every frame: true once the chat is listed, noting whether its answer was still running then.
LISTED = """(question) => {
  const listed = [...document.querySelectorAll('#conversations label')].some(e => e.innerText.includes(question));
  if (listed) {
    const stop = document.querySelector('#stop');
    window.__streaming = !!stop && stop.offsetParent !== null;
  }
  return listed;
}"""


def test_a_new_chat_is_listed_while_its_first_answer_is_written(browser: Any, appliance: Any) -> None:
    question = f"Tell me a long story about the {secrets.token_hex(3)} lighthouse."
    with browser_context(browser, 1280, 800) as context:
        page = goto(context.new_page(), appliance.url)
        page.locator("#chat-input textarea").fill(question)
        page.locator("#send").click()
        try:
            page.wait_for_function(LISTED, arg=question, timeout=90_000, polling="raf")
        except Exception as error:
            raise AssertionError(f"the new chat was never listed; the page shows {said(page)}") from error
        assert page.evaluate("window.__streaming"), "the new chat was listed only once its answer had ended"
        chosen = page.locator("#conversations label", has_text=question).locator("input")
        assert chosen.is_checked(), "the new chat is listed but not the one chosen"
        page.wait_for_function(ANSWER_OVER, timeout=90_000)
        page.locator("#conversations label", has_text=question).wait_for(timeout=10_000)  # and stays there
