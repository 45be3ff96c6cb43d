"""Issue 22, item 1: a browser's chats survive a restart of the appliance and a crash (kill -9).

Each browser keeps a random id in its localStorage, sealed by Gradio with a key; a key drawn anew at every
start (no fixed `secret`) could not unseal it after a restart, every browser got a new id, and every chat
list (the kiosk's too) came up empty while the database still held the conversations. One browser profile
(one Playwright context) is kept across both restarts, as a person's browser is."""

from __future__ import annotations

import secrets
import signal
from typing import Any

import pytest

from tests.browser_helpers import browser_context, goto, said, send
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser


def crash(appliance: Appliance) -> None:
    """The app killed with SIGKILL (no shutdown at all), then started again."""
    assert appliance.proc is not None
    appliance.proc.send_signal(signal.SIGKILL)
    appliance.proc.wait(timeout=10)
    assert appliance.proc.returncode == -signal.SIGKILL
    appliance.start()


def marked(*pages: Any) -> None:
    """Each page gets a mark that lives only as long as the document: gone once the page has reloaded."""
    for page in pages:
        page.evaluate("() => { window.__quartetBefore = true; }")


def reconnected(page: Any, after: str) -> None:
    """The page reloads by itself once the appliance answers again (assets/kiosk.js polls /health every 2 s),
    as a person's open tab does; the test waits for that reload and the page drawn, never navigates over it
    (a goto raced the page's own reload: "interrupted by another navigation", a clean clone's run 2026-12-03)."""
    seen: list[str] = []

    def back() -> bool:
        try:
            state = page.evaluate(
                "() => [window.__quartetBefore === true, !!document.querySelector('#send:not([disabled])')]"
            )
        except Exception as error:  # the document is being replaced: its context is gone for a moment
            seen[:] = [f"navigating ({type(error).__name__})"]
            return False
        seen[:] = [f"old document {state[0]}, Send on {state[1]}"]
        return not state[0] and state[1]

    try:
        wait_until(back, timeout=90, every=0.25, what=f"the page to reload by itself after {after}")
    except TimeoutError as error:
        raise AssertionError(f"after {after}, the page did not reconnect by itself; last seen: {seen}") from error


def lists_and_opens(page: Any, shown: str, others: list[str], after: str) -> None:
    """The page, back after `after`, shows the chat it showed last (`shown`), lists `others` too, and opens each."""
    reconnected(page, after)
    listing = page.locator("#conversations")
    for question in [shown, *others]:
        try:
            listing.locator("label", has_text=question).wait_for(timeout=15_000)
        except Exception as error:
            raise AssertionError(
                f"after {after}, {question!r} is not in the chat list: {listing.inner_text()!r}"
            ) from error
    user = page.locator("#chatbot [data-testid='user']")
    user.get_by_text(shown).wait_for(timeout=15_000)  # the chat shown before: shown again
    for question in others:
        listing.locator("label", has_text=question).click()
        try:
            user.get_by_text(question).wait_for(timeout=15_000)
        except Exception as error:
            raise AssertionError(f"after {after}, {question!r} did not open; the page shows {said(page)}") from error
        assert page.locator("#chatbot [data-testid='bot']").count() >= 1, f"after {after}, its answer is gone"


def test_a_browser_finds_its_chats_after_a_restart_and_after_a_kill(browser: Any, appliance: Appliance) -> None:
    word = f"kestrel{secrets.token_hex(3)}"
    first, second, at_kiosk = (f"{what} about the {word} nest" for what in ("First chat", "Second chat", "Kiosk"))
    kiosk_url = appliance.url + "/kiosk/"
    with browser_context(browser, 1280, 800) as context:
        page = goto(context.new_page(), appliance.url)
        send(page, first)
        page.locator("#new-chat").click()
        page.wait_for_function("() => !document.querySelector('#chatbot').innerText.trim()", timeout=10_000)
        send(page, second)
        kiosk = goto(context.new_page(), kiosk_url)
        send(kiosk, at_kiosk)
        try:
            marked(page, kiosk)
            appliance.restart()  # Ctrl-C's SIGTERM and a start
            lists_and_opens(page, second, [first], "a restart")
            lists_and_opens(kiosk, at_kiosk, [], "a restart (kiosk)")
            marked(page, kiosk)
            crash(appliance)
            lists_and_opens(page, first, [second], "a kill -9")  # first was the last one shown
            lists_and_opens(kiosk, at_kiosk, [], "a kill -9 (kiosk)")
        finally:
            if appliance.proc is None or appliance.proc.poll() is not None:
                appliance.start()  # the tests after this one need the shared appliance
            appliance.wait_ready()
