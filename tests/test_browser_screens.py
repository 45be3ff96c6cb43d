"""Screenshots of every tab at the sizes people use (1280×800, 1366×768, 1920×1080, a 390×844 phone),
light and dark, into tests/artifacts/screens/ for people to look at; each also checked for basic fit:
no sideways scrolling, the tab's primary action on the first screen, card values readable in dark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import CONTRAST, admin_login, browser_context, goto
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
# what shows a tab filled with its live state (each tab refreshes when it is shown)
FILLED = {
    "Chat": "#chat-input",
    "Documents": "#documents tbody tr, #ingest-progress p",
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


def darkness(page: Any, where: str, selector: str) -> list[str]:
    """In the dark scheme, a pill or panel with a light background stands out as a lamp (and did, for the
    header's card pills: Gradio's scoping broke the list of selectors that made them dark)."""
    wrong = []
    for element in page.locator(selector).all()[:4]:
        luminance = element.evaluate(BACKGROUND)
        if luminance > 0.2:
            wrong.append(f"{where}: {selector} {element.inner_text()!r} is light in dark mode ({luminance:.2f})")
    return wrong


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_tab_fits_and_is_photographed(browser: Any, appliance: Appliance, artifacts: Path, scheme: str) -> None:
    """Every tab, the kiosk and the admin page at every size: each page is loaded once per colour scheme
    and resized (one load per page, not per size and page; the tabs show their live state when
    selected, so no wait for a timer's tick)."""
    folder = artifacts / "screens"
    folder.mkdir(exist_ok=True)
    wrong: list[str] = []
    with browser_context(browser, *SIZES[0], color_scheme=scheme) as context:
        main = goto(context.new_page(), appliance.url)
        main.locator("#q-header").get_by_text("ready").first.wait_for(timeout=15_000)
        kiosk = goto(context.new_page(), appliance.url + "/kiosk")  # without the slash, as people type it
        kiosk.locator("#kiosk-cards .q-panel").first.wait_for(timeout=15_000)
        admin = goto(context.new_page(), appliance.url + "/admin", "#admin-password input")
        for width, height in SIZES:
            admin.set_viewport_size({"width": width, "height": height})
            wrong += fits(admin, f"Admin login {width}x{height}", "#admin-password, #admin-login", height)
        admin_login(admin, appliance.url)
        admin.locator("#admin-status .q-panel").first.wait_for(timeout=10_000)
        for width, height in SIZES:
            name = f"{width}x{height}-{scheme}"
            wrong += _photographed(main, kiosk, admin, folder, name, (width, height), dark=scheme == "dark")
    assert not wrong, "\n".join(wrong)


def _photographed(
    main: Any, kiosk: Any, admin: Any, folder: Path, name: str, size: tuple[int, int], *, dark: bool
) -> list[str]:
    width, height = size
    wrong: list[str] = []
    main.set_viewport_size({"width": width, "height": height})
    for tab, primary in TABS:
        main.get_by_role("tab", name=tab).click()
        main.locator(FILLED[tab]).first.wait_for(timeout=15_000)
        main.evaluate("() => window.scrollTo(0, 0)")
        main.wait_for_timeout(150)  # the layout of the new size and tab
        main.screenshot(path=str(folder / f"{tab.lower()}-{name}.png"))
        wrong += fits(main, f"{tab} {width}x{height}", primary, height)
    if dark:
        wrong += readable(main, "Cards", "#card-panels .q-panel .q-v")
        wrong += darkness(main, "Header", "#q-header .q-card") + darkness(main, "Header", "#q-header .q-state")
        wrong += darkness(main, "Cards", "#card-panels .q-panel")
    kiosk.set_viewport_size({"width": width, "height": height})
    kiosk.wait_for_timeout(150)
    kiosk.screenshot(path=str(folder / f"kiosk-{name}.png"))
    wrong += fits(kiosk, f"Kiosk {width}x{height}", "#chat-input, #send", height)
    if dark:
        wrong += readable(kiosk, "Kiosk", "#kiosk-cards .q-panel .q-v")
        wrong += darkness(kiosk, "Kiosk", "#kiosk-cards .q-panel")
    admin.set_viewport_size({"width": width, "height": height})
    admin.evaluate("() => window.scrollTo(0, 0)")
    admin.wait_for_timeout(150)
    admin.screenshot(path=str(folder / f"admin-{name}.png"))
    wrong += fits(admin, f"Admin {width}x{height}", None, height)
    if dark:
        wrong += readable(admin, "Admin", "#admin-status .q-panel .q-v")
    return wrong
