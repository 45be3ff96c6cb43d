"""Issue 22, items (a regression) and 7: Copy on a chat message.

Answers are rendered by the server (app/ui/rendering.py), so Gradio's Copy copied the bubble's HTML
(`<div class="q-md"><p>…<strong>bold</strong>`); it must give the answer's Markdown, as Open WebUI does,
and a person's own words as typed (their bubble holds them escaped: `&lt;`, `&#91;`). A stopped answer
said "stopped" in a collapsible box (a chevron) that Copy copied with the answer; it is a plain line now,
outside what Copy copies. Checked on both of Gradio's ways of copying: the Clipboard API (a page on
localhost or https) and the selected textarea it falls back to on a page served over plain http."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from app.chat.store import ChatStore
from app.database import Database
from tests.browser_helpers import ANSWER_OVER, browser_context, goto, said, send
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser

COPY = "#chatbot .message-buttons button[aria-label='Copy message']"
# the page served over plain http has no Clipboard API: Gradio copies through a textarea then
WITHOUT_CLIPBOARD_API = (
    "window.__readClipboard = navigator.clipboard.readText.bind(navigator.clipboard);"
    " delete Navigator.prototype.clipboard;"
)


def copied(page: Any, button: Any, *, fallback: bool) -> str:
    page.evaluate("navigator.clipboard ? navigator.clipboard.writeText('') : null")
    button.click()
    read = "window.__readClipboard()" if fallback else "navigator.clipboard.readText()"
    try:
        return str(wait_until(lambda: page.evaluate(read) or None, timeout=5, every=0.1))
    except TimeoutError as error:
        raise AssertionError(f"Copy put nothing on the clipboard; the page shows {said(page)}") from error


def stored(appliance: Appliance, question: str) -> list[Any]:
    """The stored messages of the conversation that asked `question`."""
    database = Database(appliance.data_dir / "quartet.db")
    with database.read() as db:
        found = "SELECT conversation_id FROM messages WHERE role = 'user' AND content = ?"
        cid = db.execute(found, [question]).fetchone()[0]
    return ChatStore(database).messages(cid)


@pytest.mark.parametrize("fallback", [False, True], ids=["clipboard-api", "plain-http"])
def test_copy_gives_the_answers_markdown_and_the_persons_words(
    browser: Any, appliance: Appliance, fallback: bool
) -> None:
    word = f"gannet{secrets.token_hex(3)}"
    question = f"Repeat **{word}**, `code` & <b>tags</b> [a link](http://example.org)."
    with browser_context(browser, 1280, 800) as context:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=appliance.url)
        if fallback:
            context.add_init_script(WITHOUT_CLIPBOARD_API)
        page = goto(context.new_page(), appliance.url)
        assert page.evaluate("'clipboard' in navigator") is not fallback
        send(page, question)
        answer = stored(appliance, question)[-1]
        assert answer.role == "assistant" and answer.content.strip(), answer

        mine = copied(page, page.locator(COPY).nth(0), fallback=fallback)
        assert mine == question, f"Copy on the question gave {mine!r}"
        theirs = copied(page, page.locator(COPY).nth(1), fallback=fallback)
        assert "<div" not in theirs and "<p>" not in theirs and "&#10;" not in theirs, f"Copy gave HTML: {theirs!r}"
        assert theirs == answer.content, f"Copy gave {theirs!r}, the answer is {answer.content!r}"


def test_a_stopped_answer_says_so_on_a_plain_line_that_copy_leaves_out(
    browser: Any, appliance: Appliance, artifacts: Any
) -> None:
    question = f"Tell me a long story about a lighthouse, {secrets.token_hex(3)}."
    with browser_context(browser, 1280, 800) as context:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=appliance.url)
        page = goto(context.new_page(), appliance.url)
        page.locator("#chat-input textarea").fill(question)
        page.locator("#send").click()
        page.wait_for_function(  # its first words are in, and more are coming
            "() => /generating/.test(document.querySelector('#chat-status')?.innerText ?? '')"
            " && (document.querySelector(\"#chatbot [data-testid='bot']\")?.innerText ?? '…').trim() !== '…'",
            timeout=60_000,
        )
        page.locator("#stop").click()
        page.wait_for_function(ANSWER_OVER, timeout=30_000)
        note = page.locator("#chatbot [data-testid='bot'] .q-answer-note")
        note.wait_for(timeout=15_000)
        page.screenshot(path=str(artifacts / "chat-stopped-answer.png"))
        assert note.inner_text().strip() == "stopped", said(page)
        assert page.locator("#chatbot .thought-group").count() == 0, "'stopped' is in a collapsible box"
        answer = wait_until(lambda: (last := stored(appliance, question)[-1]).status == "stopped" and last, 10)
        assert answer.status == "stopped" and answer.content, answer
        text = copied(page, page.locator(COPY).nth(1), fallback=False)
        assert text == answer.content and "stopped" not in text, f"Copy gave {text!r}"
