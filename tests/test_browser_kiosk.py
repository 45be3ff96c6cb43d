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
    if (!text || !el || el.closest('script, style, noscript, [aria-hidden="true"], .sr-only')) continue;  // not seen
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


# The box of the "This chat" arrow (turned while closed) and whether it lies within its row.
ARROW = """() => {
  const label = document.querySelector('#chat-manage .label-wrap'), icon = label?.querySelector('.icon');
  if (!icon) return null;
  const r = icon.getBoundingClientRect(), p = label.getBoundingClientRect();
  return {w: r.width, h: r.height,
    inside: r.top >= p.top - 1 && r.bottom <= p.bottom + 1 && r.left >= p.left - 1 && r.right <= p.right + 1};
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
        wrong = [
            f"{what} is {min(sizes or [0])} px (28 px or more)"
            for selector, what in [
                ("#chatbot [data-testid='user'], #chatbot [data-testid='bot']", "a message"),
                ("#q-header .q-model, #q-header .q-state", "the model name or its state"),
            ]
            if not (sizes := sizes_in(page, selector)) or min(sizes) < 28
        ]
        wrong += [f"{t['text']!r} in {t['where']} is {t['px']} px" for t in page.evaluate(TEXTS) if t["px"] < 20]
        assert not wrong, "at 1920×1080, on the kiosk:\n" + "\n".join(wrong)

        for state in ("closed", "open"):  # "This chat": its arrow drawn whole, not squeezed to a dot
            whole = f"() => {{ const a = ({ARROW})(); return a && Math.min(a.w, a.h) >= 16 && a.inside; }}"
            try:  # waited for: it turns as the box opens
                page.wait_for_function(whole, timeout=5_000)
            except Exception as error:
                raise AssertionError(f"This chat's arrow, {state}: {page.evaluate(ARROW)}") from error
            page.locator("#chat-manage .label-wrap").click()


@pytest.mark.parametrize(("width", "height"), [(390, 844), (360, 640)])
def test_a_phone_sized_kiosk_shows_send_whole(
    browser: Any, appliance: Any, artifacts: Any, width: int, height: int
) -> None:
    """After an answer the page above the composer is taller than the screen: Send was cut at the bottom."""
    with browser_context(browser, width, height, is_mobile=True, has_touch=True) as context:
        page = goto(context.new_page(), appliance.url + "/kiosk")
        send(page, f"Phone kiosk {secrets.token_hex(2)}: say hi.")
        page.screenshot(path=str(artifacts / f"kiosk-{width}x{height}.png"))
        box = page.locator("#send").bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, f"Send {box}, the screen {height} px"
        assert box["height"] <= 80, f"Send is {box['height']} px high: the composer is more than one line"
        covered = page.evaluate(
            """() => { const r = document.querySelector('#send').getBoundingClientRect();
              const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
              return document.querySelector('#send').contains(top) ? null : top?.outerHTML.slice(0, 80); }"""
        )
        assert covered is None, f"Send is under {covered}"
