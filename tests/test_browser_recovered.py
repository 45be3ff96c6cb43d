"""Issue 22, item 10: an answer lost when a card stopped answering left "⚠ card 2 … stopped answering …;
the engine restarts by itself once every card answers again" in the chat's status line after the engine
was ready again (and a reload brought it back). The answer's own note keeps what happened; the status
line says the engine is back, by itself, and on a reload."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import pytest

from app.ui.display import RECOVERED
from tests.browser_helpers import browser_context, goto, said
from tests.harness import Appliance, get_json, wait_until

pytestmark = pytest.mark.browser

STATUS = "() => document.querySelector('#chat-status')?.innerText ?? ''"


def status_says(page: Any, text: str, timeout_s: float) -> None:
    try:
        page.wait_for_function(f"() => ({STATUS})().includes({text!r})", timeout=timeout_s * 1000)
    except Exception as error:
        raise AssertionError(f"the status line never said {text!r}; the page shows {said(page)}") from error


def restarted(cards: Any, index: int) -> None:
    if cards.procs[index].poll() is not None:
        cards.start(index)
        cards.wait_healthy(index)


def test_the_status_line_says_the_engine_is_back_once_it_is(browser: Any, appliance: Appliance) -> None:
    cards, victim = appliance.card_agents, 2
    with browser_context(browser, 1280, 800) as context, contextlib.ExitStack() as stack:
        page = goto(context.new_page(), appliance.url)
        page.locator("#chat-input textarea").fill(f"Tell me a long story about the sea, {secrets.token_hex(3)}.")
        page.locator("#send").click()
        page.wait_for_function(f"() => /generating/.test(({STATUS})())", timeout=60_000)
        cards.kill(victim)
        stack.callback(restarted, cards, victim)  # back for the next test, whatever happens here
        status_says(page, f"card {victim}", 30)
        page.locator("#chatbot .q-answer-note").filter(has_text=f"card {victim}").wait_for(timeout=10_000)
        cards.start(victim)
        cards.wait_healthy(victim)
        wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)
        status_says(page, RECOVERED, 15)  # without a click or a reload
        assert f"card {victim}" not in page.evaluate(STATUS)
        page.reload(wait_until="load")
        status_says(page, RECOVERED, 15)
        # what happened stays with the answer
        assert page.locator("#chatbot .q-answer-note").filter(has_text=f"card {victim}").count() == 1
