"""Issue 22, item 20: the offline banner at 1280×800 pushed the page 40 px down and cut the composer's
buttons; on a 390×844 phone the header's pills took three lines (110 px); a long answer scrolled the
whole page 25 px, cutting the header. The page itself never scrolls on the chat: only the transcript does.

The banner is what the page's own script shows when the appliance stops answering (the `q-offline` class
on the body; tests/test_browser_ui.py checks that it comes within five seconds): set here directly."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from app.chat.store import ChatStore
from app.database import Database
from tests.browser_helpers import browser_context, goto, send
from tests.harness import Appliance

pytestmark = pytest.mark.browser

# where things are: the page's scroll height, the header's height, Send's box, the transcript's scroll, and
# the model's name in the header (how wide it is drawn, how wide its text is, where it starts)
LAYOUT = """() => {
  const box = (s) => { const r = document.querySelector(s).getBoundingClientRect(); return [r.top, r.bottom]; };
  const scroller = [...document.querySelectorAll('#chatbot *')].find(e => e.scrollHeight > e.clientHeight + 20
    && /auto|scroll/.test(getComputedStyle(e).overflowY));
  const name = document.querySelector('#q-header .q-model'), drawn = name?.getBoundingClientRect();
  return {page: document.scrollingElement.scrollHeight, window: innerHeight, header: box('#q-header'),
          send: box('#send'), input: box('#chat-input'), transcript: scroller ? scroller.scrollHeight : 0,
          model: name && {shown: drawn.width, whole: name.scrollWidth, left: drawn.left}};  // none before the load
}"""


def long_answer(page: Any, appliance: Appliance) -> None:
    """A conversation of the page's browser whose answer is 120 lines long, shown."""
    question = f"Tell me everything, {secrets.token_hex(3)}."
    send(page, question)
    database = Database(appliance.data_dir / "quartet.db")
    with database.read() as db:
        found = "SELECT conversation_id FROM messages WHERE role = 'user' AND content = ?"
        cid = db.execute(found, [question]).fetchone()[0]
    store = ChatStore(database)
    store.add(cid, "user", "And the rest?")
    store.add(cid, "assistant", "\n\n".join(f"Line {n} of a long answer." for n in range(120)))
    goto(page, appliance.url)  # the page opens on the chat it showed
    page.locator("#chatbot").get_by_text("Line 119 of a long answer.").wait_for(state="attached", timeout=15_000)


@pytest.mark.parametrize("size", [(1280, 800), (1366, 768), (390, 844)])
def test_the_page_fits_its_window_offline_and_with_a_long_answer(
    browser: Any, appliance: Appliance, artifacts: Any, size: tuple[int, int]
) -> None:
    width, height = size
    with browser_context(browser, width, height) as context:
        page = goto(context.new_page(), appliance.url)
        page.locator("#q-header .q-state").first.wait_for(timeout=15_000)
        before = page.evaluate(LAYOUT)
        assert page.get_by_role("tab", name="My API keys").count() == 0  # no logins here: no keys of one's own
        assert before["page"] <= height + 1, f"the page scrolls at {size}: {before}"
        if width < 768:
            header = before["header"][1] - before["header"][0]
            assert header <= 48, f"the phone's header is {header:.0f} px high (more than one line of pills)"
            name = before["model"]  # it shrank to 0 px beside the pills: a phone did not say which model
            assert name["left"] >= 0 and name["shown"] >= min(name["whole"], 0.4 * width) - 1, f"model name {name}"

        page.evaluate("() => document.body.classList.add('q-offline')")
        page.wait_for_function("() => getComputedStyle(document.querySelector('#q-header'), '::before').content"
                               " .includes('offline')")  # fmt: skip
        offline = page.evaluate(LAYOUT)
        page.screenshot(path=str(artifacts / f"chat-offline-{width}x{height}.png"))
        assert offline["send"] == before["send"], f"the banner moved the composer: {before} -> {offline}"
        assert offline["page"] <= height + 1 and offline["send"][1] <= height, f"offline at {size}: {offline}"
        page.evaluate("() => document.body.classList.remove('q-offline')")

        long_answer(page, appliance)
        shown = page.evaluate(LAYOUT)
        page.screenshot(path=str(artifacts / f"chat-long-answer-{width}x{height}.png"))
        assert shown["page"] <= height + 1, f"a long answer scrolls the whole page at {size}: {shown}"
        assert shown["transcript"] > 0, "the transcript does not scroll the long answer itself"
        assert shown["header"][0] >= 0 and shown["input"][1] <= height, f"header or composer cut: {shown}"
