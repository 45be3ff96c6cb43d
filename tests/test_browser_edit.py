"""Issue 22, item 2: editing a question (the pencil on it, new text, ✓) replaces it and its answer.

The edit's handler ran in a `.then()` step, which gets no event data: every edit ended in "Error —
'NoneType' object is not subscriptable", with Error badges over the transcript, status and composer, and
the edit was never applied."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from app.chat.store import ChatStore, StoredMessage
from app.database import Database
from tests.browser_helpers import TOAST, browser_context, goto, said, send
from tests.harness import Appliance, wait_until

pytestmark = pytest.mark.browser

USER = "#chatbot [data-testid='user']"
BOT = "#chatbot [data-testid='bot']"


def conversation_asking(appliance: Appliance, question: str) -> str:
    with Database(appliance.data_dir / "quartet.db").read() as db:
        return str(db.execute("SELECT id FROM conversations WHERE title = ?", [question]).fetchone()[0])


def texts(page: Any, selector: str) -> list[str]:
    return [" ".join(t.split()) for t in page.locator(selector).all_inner_texts()]


def test_an_edited_question_replaces_the_question_and_its_answer(
    browser: Any, appliance: Appliance, artifacts: Any
) -> None:
    word = f"heron{secrets.token_hex(3)}"
    asked, edited = f"Name a colour, {word}.", f"Name a fruit instead, {word}."
    with browser_context(browser, 1280, 800) as context:
        page = goto(context.new_page(), appliance.url)
        send(page, asked)
        store = ChatStore(Database(appliance.data_dir / "quartet.db"))
        cid = conversation_asking(appliance, asked)
        old_answer = store.messages(cid)[-1]
        page.locator(USER).filter(has_text=asked).hover()
        page.locator("#chatbot button[aria-label='Edit']").first.click()
        page.locator("#chatbot textarea.edit-textarea").fill(edited)
        page.locator("#chatbot button[aria-label='Submit']").first.click()

        def replaced() -> list[StoredMessage] | None:
            now = store.messages(cid)
            done = len(now) == 2 and now[-1].role == "assistant" and now[-1].status == "ok"
            return now if done and now[0].content == edited and now[-1].id > old_answer.id else None

        try:
            answer = wait_until(replaced, timeout=90, every=0.2)[-1]
        except TimeoutError as error:
            raise AssertionError(
                f"the edit was not applied: stored {[(m.role, m.content[:30], m.status) for m in store.messages(cid)]};"
                f" the page shows {said(page)}"
            ) from error
        try:  # the page shows the new question and the new answer, and nothing of the old ones
            wait_until(lambda: texts(page, USER) == [edited] and len(texts(page, BOT)) == 1, timeout=30, every=0.2)
            page.locator("#send").wait_for(state="visible", timeout=10_000)
        except TimeoutError as error:
            raise AssertionError(f"the page does not show the edit: {said(page)}") from error
        words = [w.strip("*_`#") for w in answer.content.split()][:1]
        assert all(w in texts(page, BOT)[0] for w in words), (answer.content, texts(page, BOT))
        errors = page.locator("#chat-main").get_by_text("Error", exact=True)
        assert errors.count() == 0 and page.locator(TOAST).count() == 0, f"an error is shown: {said(page)}"
        page.screenshot(path=str(artifacts / "chat-edited-1280x800.png"))

        goto(page, appliance.url)  # a reload: the page opens on the edited chat, as edited
        page.locator(USER).get_by_text(edited).wait_for(timeout=15_000)
        assert texts(page, USER) == [edited], texts(page, USER)
        assert len(texts(page, BOT)) == 1, texts(page, BOT)
