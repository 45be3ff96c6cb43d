"""An idle page asks the browser for few animation frames (assets/frames.js, app/early_script.py).

Gradio's status tracker counts a pending event's seconds frame by frame, and the page's own loading
tracker stays pending for the page's life: every idle page, the kiosk's too, asked for 60 frames a second
(55-60 in every second; with the tracker's frames every 100 ms, 10-20 once the page's own animations have
settled, some seconds after its load). The count is of the browser's real `requestAnimationFrame`, wrapped
before the page's own scripts run; the test waits, second by second, for one quiet second (10 at most)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser_helpers import CHAT_READY
from tests.harness import Appliance

pytestmark = pytest.mark.browser

COUNT_FRAMES = """(() => {
  window.framesAsked = 0;
  const real = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (callback) => { window.framesAsked += 1; return real(callback); };
})()"""
QUIET = 30  # frames in a second
UNTIL_A_QUIET_SECOND = f"""async () => {{
  const counts = [];
  while (counts.length < 10 && !counts.some((n) => n < {QUIET})) {{
    const before = window.framesAsked;
    await new Promise((done) => setTimeout(done, 1000));
    counts.push(window.framesAsked - before);
  }}
  return counts;
}}"""


@pytest.mark.parametrize(("path", "ready"), [("/", CHAT_READY), ("/kiosk/", "#q-header")])
def test_an_idle_page_asks_for_few_frames(browser: Any, appliance: Appliance, path: str, ready: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(COUNT_FRAMES)  # the pool closes a context given an init script
    page = context.new_page()
    page.goto(appliance.url + path, wait_until="load")
    page.locator(ready).first.wait_for(timeout=15_000)
    counts = page.evaluate(UNTIL_A_QUIET_SECOND)
    assert min(counts) < QUIET, f"{path}: animation frames asked for in each idle second: {counts}"
    context.close()
