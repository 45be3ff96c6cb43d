"""Issue 22, item 4: the kiosk is read from two metres away. At 1920×1080 its messages were 16 px (28 px
or more was asked), the model name and "ready" 15 px, the card states 12–13 px, the status line 14 px;
the "This chat" arrow was clipped to a dot; on a phone-sized kiosk Send was cut at the bottom.

Measured as a person meets it: every text the page shows, by its computed size."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from tests.browser_helpers import browser_context, goto, send

pytestmark = pytest.mark.browser

# Every text shown on the page: its words, its computed font size, and where it is (for a failure).
TEXTS = """() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    const el = node.parentElement;
    if (!text || !el || el.closest('script, style, noscript, [aria-hidden="true"]')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    const style = getComputedStyle(el);
    if (box.width < 2 || box.height < 2 || style.visibility === 'hidden' || Number(style.opacity) === 0) continue;
    const where = [el.id, ...[...el.classList].slice(0, 2)].filter(Boolean).join('.')
      || (el.closest('[id]')?.id ?? el.tagName);
    out.push({text: text.slice(0, 40), px: parseFloat(style.fontSize), where});
  }
  return out;
}"""


def sizes_in(page: Any, selector: str) -> list[float]:
    """The computed font sizes of the texts inside `selector`."""
    return list(
        page.eval_on_selector_all(
            selector,
            """els => els.flatMap(e => [e, ...e.querySelectorAll('*')])
                .filter(e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
                .map(e => parseFloat(getComputedStyle(e).fontSize))""",
        )
    )


def test_every_kiosk_text_is_readable_from_two_metres_at_1920x1080(
    browser: Any, appliance: Any, artifacts: Any
) -> None:
    with browser_context(browser, 1920, 1080) as context:
        page = goto(context.new_page(), appliance.url + "/kiosk")
        send(page, f"Kiosk {secrets.token_hex(2)}: say hello.")
        page.locator("#q-header .q-model").wait_for(timeout=15_000)
        page.screenshot(path=str(artifacts / "kiosk-1920x1080.png"))
        for selector, what in [
            ("#chatbot [data-testid='user'], #chatbot [data-testid='bot']", "a message"),
            ("#q-header .q-model, #q-header .q-state", "the model name or its state"),
        ]:
            sizes = sizes_in(page, selector)
            assert sizes and min(sizes) >= 28, f"{what} is {min(sizes or [0])} px at 1920×1080 (28 px or more)"
        small = [t for t in page.evaluate(TEXTS) if t["px"] < 20]
        assert not small, f"kiosk texts under 20 px at 1920×1080: {small}"

        page.locator("#chat-manage").click()  # "This chat": its arrow is drawn whole, not clipped to a dot
        arrow = page.evaluate(
            """() => {
              const label = document.querySelector('#chat-manage .label-wrap, #chat-manage button');
              const icon = label && [...label.querySelectorAll('*')].find(e => /▼|◀|◂|▾/.test(e.textContent)
                || e.classList.contains('icon'));
              if (!icon) return null;
              const r = icon.getBoundingClientRect(), p = label.getBoundingClientRect();
              return {w: r.width, h: r.height, inside: r.top >= p.top - 1 && r.bottom <= p.bottom + 1
                && r.left >= p.left - 1 && r.right <= p.right + 1};
            }"""
        )
        assert arrow and arrow["w"] >= 12 and arrow["h"] >= 12 and arrow["inside"], f"the arrow of This chat: {arrow}"


def test_a_phone_sized_kiosk_shows_send_whole(browser: Any, appliance: Any, artifacts: Any) -> None:
    with browser_context(browser, 390, 844, is_mobile=True, has_touch=True) as context:
        page = goto(context.new_page(), appliance.url + "/kiosk")
        page.screenshot(path=str(artifacts / "kiosk-390x844.png"))
        box = page.locator("#send").bounding_box()
        height = page.evaluate("() => window.innerHeight")
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, f"Send {box}, the screen {height} px"
        clipped = page.evaluate(
            """() => { const b = document.querySelector('#send'), r = b.getBoundingClientRect();
              for (let e = b.parentElement; e; e = e.parentElement) {
                const s = getComputedStyle(e), p = e.getBoundingClientRect();
                if (s.overflow !== 'visible' && (r.bottom > p.bottom + 1 || r.top < p.top - 1)) return e.id || e.className;
              } return null; }"""
        )
        assert clipped is None, f"Send is cut by {clipped}"
