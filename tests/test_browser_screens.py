"""Screenshots of every tab at the sizes people use (1280×800, 1366×768, 1920×1080, a 390×844 phone),
light and dark, into tests/artifacts/screens/ for people to look at; each also checked for basic fit:
no sideways scrolling, the tab's primary action on the first screen, card values readable in dark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import CHAT_READY, CONTRAST, admin_login
from tests.harness import Appliance

pytestmark = pytest.mark.browser

SIZES = [(1280, 800), (1366, 768), (1920, 1080), (390, 844)]
# (tab, what must be on the first screen); the extraction tab's layout belongs to its own rewrite, so
# there only the fit across is checked
TABS = [
    ("Chat", "#chat-input, #send, #regenerate"),
    ("Documents", "#ask, #question"),
    ("Extraction", None),
    ("Cards", "#card-panels .q-panel"),
]
# what shows a tab filled with its live state (each tab refreshes when it is shown: no wait for a timer's tick)
FILLED = {
    "Chat": "#chat-input",
    "Documents": "#ingest-progress p",
    "Extraction": "#extract-run",
    "Cards": "#card-panels .q-panel",
}


def fits(page: Any, where: str, primary: str | None, height: int) -> list[str]:
    """What does not fit: sideways scrolling, the primary action below the first screen."""
    wrong = []
    across = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    if across[0] > across[1] + 1:
        wrong.append(f"{where}: scrolls sideways ({across[0]} px of {across[1]})")
    for selector in primary.split(", ") if primary else []:
        box = page.locator(selector).first.bounding_box()
        if box is None or box["y"] < 0 or box["y"] + box["height"] > height:
            wrong.append(f"{where}: {selector} is not on the first screen ({box})")
    return wrong


# the relative luminance of an element's own background (transparent: none, -1)
BACKGROUND = """(el) => {
  const c = (getComputedStyle(el).backgroundColor.match(/[\\d.]+/g) || []).map(Number);
  if (c.length < 3 || (c.length === 4 && c[3] < 0.5)) return -1;
  const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
}"""


def readable(page: Any, where: str, selector: str) -> list[str]:
    wrong = []
    for element in page.locator(selector).all()[:4]:
        ratio = element.evaluate(CONTRAST)
        if ratio < 4.5:
            wrong.append(f"{where}: {selector} {element.inner_text()!r} has contrast {ratio:.2f}")
    return wrong


def dark(page: Any, where: str, selector: str) -> list[str]:
    """In the dark scheme, a pill or panel with a light background stands out as a lamp (and did, for the
    header's card pills: Gradio's scoping broke the list of selectors that made them dark)."""
    wrong = []
    for element in page.locator(selector).all()[:4]:
        luminance = element.evaluate(BACKGROUND)
        if luminance > 0.2:
            wrong.append(f"{where}: {selector} {element.inner_text()!r} is light in dark mode ({luminance:.2f})")
    return wrong


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_tab_fits_and_is_photographed(
    browser: Any, appliance: Appliance, artifacts: Path, size: tuple[int, int], scheme: str
) -> None:
    width, height = size
    folder = artifacts / "screens"
    folder.mkdir(exist_ok=True)
    name = f"{width}x{height}-{scheme}"
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    wrong: list[str] = []
    try:
        page = context.new_page()
        page.goto(appliance.url, wait_until="load")
        page.locator(CHAT_READY).wait_for(timeout=15_000)
        page.locator("#q-header").get_by_text("ready").first.wait_for(timeout=15_000)
        for tab, primary in TABS:
            page.get_by_role("tab", name=tab).click()
            page.locator(FILLED[tab]).first.wait_for(timeout=15_000)
            page.evaluate("() => window.scrollTo(0, 0)")
            page.screenshot(path=str(folder / f"{tab.lower()}-{name}.png"))
            wrong += fits(page, tab, primary, height)
        if scheme == "dark":
            wrong += readable(page, "Cards", "#card-panels .q-panel .q-v")
            wrong += dark(page, "Header", "#q-header .q-card") + dark(page, "Header", "#q-header .q-state")
            wrong += dark(page, "Cards", "#card-panels .q-panel")

        page.goto(appliance.url + "/kiosk", wait_until="load")  # without the slash, as people type it
        page.locator(CHAT_READY).wait_for(timeout=15_000)
        page.locator("#kiosk-cards .q-panel").first.wait_for(timeout=15_000)
        page.screenshot(path=str(folder / f"kiosk-{name}.png"))
        wrong += fits(page, "Kiosk", "#chat-input, #send", height)
        if scheme == "dark":
            wrong += readable(page, "Kiosk", "#kiosk-cards .q-panel .q-v")
            wrong += dark(page, "Kiosk", "#kiosk-cards .q-panel")

        page.goto(appliance.url + "/admin", wait_until="load")
        page.locator("#admin-password input").wait_for(timeout=15_000)
        wrong += fits(page, "Admin login", "#admin-password, #admin-login", height)
        admin_login(page, appliance.url)
        page.locator("#admin-status .q-panel").first.wait_for(timeout=10_000)
        page.screenshot(path=str(folder / f"admin-{name}.png"))
        wrong += fits(page, "Admin", None, height)
        if scheme == "dark":
            wrong += readable(page, "Admin", "#admin-status .q-panel .q-v")
    finally:
        context.close()
    assert not wrong, "\n".join(wrong)
