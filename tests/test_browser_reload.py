"""Issue 22, item 8: reloading the page while an answer streamed stopped the answer (Gradio closed the
page's step, and with it the answer). The answer goes on, saved as it streams, and the reloaded page
picks it up: it shows it growing and then finished, with its stats."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from app.chat.store import ChatStore
from app.database import Database
from tests.browser_helpers import ANSWER_OVER, browser_context, goto, said
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser


def test_a_reload_mid_answer_lets_it_finish_and_shows_it(browser: Any, appliance: Appliance) -> None:
    question = f"Tell me a long story about a lighthouse keeper, {secrets.token_hex(3)}."
    database = Database(appliance.data_dir / "quartet.db")
    store = ChatStore(database)

    def answer() -> Any:
        with database.read() as db:
            row = db.execute("SELECT conversation_id FROM messages WHERE content = ?", [question]).fetchone()
        messages = store.messages(row[0]) if row else []
        return messages[-1] if messages and messages[-1].role == "assistant" else None

    with browser_context(browser, 1280, 800) as context:
        page = goto(context.new_page(), appliance.url)
        page.locator("#chat-input textarea").fill(question)
        page.locator("#send").click()
        streaming = wait_until(lambda: (a := answer()) is not None and a.status == "streaming" and a, timeout=90)
        page.reload(wait_until="load")  # mid-answer
        page.locator("#chatbot [data-testid='user']").get_by_text(question).wait_for(timeout=30_000)
        done = wait_until(lambda: (a := answer()) is not None and a.status != "streaming" and a, timeout=120)
        assert done.status == "ok", f"the answer ended {done.status!r} after the reload (it was {streaming.content!r})"
        assert len(done.content) > len(streaming.content)
        try:
            page.wait_for_function(ANSWER_OVER, timeout=30_000)  # the page followed it to its end
            page.locator("#chatbot [data-testid='bot']").last.get_by_text(done.content.split()[-1]).last.wait_for(
                timeout=10_000
            )
        except Exception as error:
            raise AssertionError(f"the reloaded page did not show the finished answer: {said(page)}") from error
        assert "tok/s" in page.locator("#chat-status").inner_text()
