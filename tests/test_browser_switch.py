"""Issue 22, item 3: another chat picked while an answer streams (seen at 1280×800 light and 1366×768 dark).

The other chat was shown while the list still highlighted the streaming one, the status stayed
"generating…" with Stop in place of Send (and clicking the streaming chat did nothing); or Error badges
over transcript, status and composer ("Error / stopped"). The picked chat is shown, its list entry is
the highlighted one, the status is that chat's, Send is back, and no Error is shown anywhere."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import pytest

from tests.browser_helpers import TOAST, Streams, browser_context, goto, said, send
from tests.harness import wait_until

pytestmark = pytest.mark.browser

USER = "#chatbot [data-testid='user']"
# what the page shows right now, for the assertions and a failure's message
SEEN = """() => ({
  checked: [...document.querySelectorAll('#conversations label')].filter(l => l.querySelector('input')?.checked)
    .map(l => l.innerText.trim()),
  status: document.querySelector('#chat-status')?.innerText ?? '',
  users: [...document.querySelectorAll("#chatbot [data-testid='user']")].map(e => e.innerText.trim()),
  send: !!document.querySelector('#send')?.offsetParent,
  stop: !!document.querySelector('#stop')?.offsetParent,
  errors: [...document.querySelectorAll('#chat-main *, #chat-list *')]
    .filter(e => e.children.length === 0 && /^\\s*Error\\b/.test(e.textContent ?? '') && e.offsetParent)
    .map(e => e.textContent.trim()),
  toasts: [...document.querySelectorAll('.toast-body')].map(e => e.innerText),
})"""

# Polled at every frame until the status says `state`: whether anything lay over the other chat's list
# entry meanwhile (Gradio's progress overlay did: a click there went to it, and nothing was picked).
COVERED_UNTIL = """([question, state]) => {
  const label = [...document.querySelectorAll('#conversations label')].find(l => l.innerText.includes(question));
  if (label) {
    const r = label.getBoundingClientRect(), top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    if (top && !label.contains(top)) window.__covered = top.outerHTML.slice(0, 80);
  }
  return (document.querySelector('#chat-status')?.innerText ?? '').includes(state);
}"""


def settled_on(page: Any, question: str, status: str) -> dict[str, Any]:
    """Wait until the page shows the chat that asked `question` as a person would see it once switched:
    only its messages, its list entry the one highlighted, Send back, a status matching `status`."""
    check = (
        "([question, status]) => { const s = (" + SEEN + ")();"
        " return s.users.length > 0 && s.users.every(u => u.includes(question)) && s.checked.length === 1"
        " && s.checked[0].includes(question) && s.send && !s.stop && new RegExp(status).test(s.status); }"
    )
    try:
        page.wait_for_function(check, arg=[question, status], timeout=30_000)
    except Exception as error:
        raise AssertionError(f"after the switch to {question!r} the page shows {page.evaluate(SEEN)}") from error
    page.wait_for_timeout(1_500)  # the old answer's last frames, had any been on their way, have landed now
    return dict(page.evaluate(SEEN))


@pytest.mark.parametrize(
    ("width", "height", "scheme", "busy"), [(1280, 800, "light", False), (1366, 768, "dark", True)]
)
def test_a_chat_picked_while_another_streams_is_shown_highlighted_with_its_own_status(
    browser: Any, appliance: Any, artifacts: Any, width: int, height: int, scheme: str, busy: bool
) -> None:
    """`busy`: every slot is taken, so the answer left is still waiting for one (Gradio's progress overlay
    then lay over the list, and a click on another chat did nothing)."""
    tag = secrets.token_hex(3)
    quiet, streaming = f"Quiet chat {tag}: say yes.", f"Streaming chat {tag}: tell me a long story about the sea."
    state = "waiting" if busy else "generating"
    with browser_context(browser, width, height, color_scheme=scheme) as context, contextlib.ExitStack() as stack:
        page = goto(context.new_page(), appliance.url)
        send(page, quiet)
        if busy:
            streams = Streams(appliance, 4)  # more than the slots: the streaming chat waits behind them
            stack.callback(streams.close)
            wait_until(lambda: streams.generating() >= 1, timeout=120, every=0.2)
        page.locator("#new-chat").click()
        page.locator("#chat-input textarea").fill(streaming)
        page.locator("#send").click()
        page.locator("#stop").wait_for(state="visible", timeout=10_000)
        page.wait_for_function(COVERED_UNTIL, arg=[quiet, state], timeout=60_000, polling="raf")
        assert not page.evaluate("window.__covered"), (
            f"the list was covered as the answer started: {page.evaluate('window.__covered')}"
        )
        page.locator("#conversations label", has_text=quiet).click()
        seen = settled_on(page, quiet, "tok/s")  # its own answer's stats, not "generating…"
        page.screenshot(path=str(artifacts / f"chat-switched-while-streaming-{width}x{height}-{scheme}.png"))
        assert not seen["errors"] and not seen["toasts"], f"an error is shown: {seen}"
        assert "tok/s" in seen["status"] and seen["checked"][0].startswith("Quiet"), f"not the quiet chat's: {seen}"

        page.locator("#conversations label", has_text=streaming).click()  # and back: the stopped one shows
        seen = settled_on(page, streaming, "stopped")  # left mid-answer: it says so
        assert not seen["errors"] and not seen["toasts"], f"an error is shown: {seen}"
        assert page.locator(TOAST).count() == 0, said(page)
