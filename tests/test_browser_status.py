"""Truthful status in a real Chromium: "reading your question" while the box reads a prompt with nobody
ahead, "⏳ waiting, position N" only while every slot is taken by other answers (issue 12, item 9)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import Streams, open_page
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser

# Every text #chat-status shows, in order, as the page renders it (not only what a poll happens to see).
RECORD = """() => {
  window.__seen = [];
  const el = document.querySelector('#chat-status');
  const note = () => {
    const text = el.innerText.trim();
    if (text && window.__seen[window.__seen.length - 1] !== text) window.__seen.push(text);
  };
  new MutationObserver(note).observe(el, {subtree: true, childList: true, characterData: true});
  note();
}"""
FINISHED = "() => /tok\\/s|⚠|stopped/.test((document.querySelector('#chat-status')?.innerText ?? ''))"


def open_chat(browser: Any, url: str) -> Any:
    page = open_page(browser, url, 1280, 800)
    page.locator("#q-header").get_by_text("ready").wait_for(timeout=15_000)
    return page


def ask_and_record(page: Any, text: str) -> None:
    page.evaluate(RECORD)
    page.locator("#chat-input textarea").fill(text)
    page.locator("#send").click()


def test_a_long_question_with_nobody_ahead_says_reading_never_waiting(browser: Any, appliance: Appliance) -> None:
    page = open_chat(browser, appliance.url)
    # ~2,000 tokens that no slot holds yet: reading them takes seconds here (prefill in 128-token chunks)
    marker = random.randint(10**8, 10**9)
    note = f"Log {marker}. " + "The lighthouse keeper wrote: the lamp is lit and the sea is calm tonight. " * 130
    ask_and_record(page, note + "\nWhat did the keeper write?")
    page.wait_for_function(FINISHED, timeout=120_000)
    seen: list[str] = page.evaluate("window.__seen")
    assert any("reading your question" in text for text in seen), seen
    assert not any("waiting, position" in text for text in seen), f"nobody was ahead, yet the page said {seen}"
    reading = next(i for i, text in enumerate(seen) if "reading your question" in text)
    assert any("tok/s" in text for text in seen[reading:]), seen  # then the answer, with its stats
    page.close()


def test_with_every_slot_taken_the_page_says_waiting_and_its_position(
    browser: Any, appliance: Appliance, artifacts: Path
) -> None:
    page = open_chat(browser, appliance.url)
    streams = Streams(appliance, 8)  # four in the slots (parallel = 4), four waiting behind them
    try:
        wait_until(lambda: streams.generating() >= 4 or streams.errors, timeout=120)
        assert not streams.errors, streams.errors
        ask_and_record(page, "Name a colour.")
        page.locator("#chat-status").get_by_text("waiting, position").wait_for(timeout=30_000)
        page.screenshot(path=str(artifacts / "chat-waiting.png"))
        shown = page.locator("#chat-status").inner_text()
        assert "reading your question" not in shown, shown
    finally:
        streams.close()  # the slots are given back: the chat's answer goes on
    page.wait_for_function(FINISHED, timeout=120_000)
    seen: list[str] = page.evaluate("window.__seen")
    waited = [i for i, text in enumerate(seen) if "⏳ waiting, position" in text]
    assert waited, seen
    assert any("tok/s" in text for text in seen[waited[-1] :]), seen
    assert not any("reading your question" in text for text in seen[: waited[0]]), seen
    page.close()
