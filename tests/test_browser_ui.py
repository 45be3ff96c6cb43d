"""The UI people live in, in a real Chromium at the sizes where it was tried: the chat fits the window,
a phone gets a drawer, Send turns into Stop, each browser has its own conversations, dark mode is
readable, the kiosk is large, and a page says "offline" when the appliance stops answering."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser_helpers import (
    CONTRAST,
    admin_login,
    admin_token,
    browser_context,
    engine_idle,
    goto,
    open_chat,
    open_tab,
    send,
    stopped,
)
from tests.harness import Appliance, api_client, free_port, wait_until

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", [(1280, 800), (1366, 768), (1920, 1080)])
def test_the_transcript_fills_the_window_and_the_composer_is_in_view(
    browser: Any, appliance: Appliance, artifacts: Path, size: tuple[int, int]
) -> None:
    width, height = size
    page = open_chat(browser, appliance.url, width, height)
    composer = page.locator("#chat-input").bounding_box()
    transcript = page.locator("#chatbot").bounding_box()
    page.screenshot(path=str(artifacts / f"chat-{width}x{height}.png"))
    assert composer["y"] + composer["height"] <= height, f"the message box is cut off at {size}: {composer}"
    assert transcript["height"] >= 0.45 * height, f"the transcript is {transcript['height']} px of {height}"
    page.close()


def test_on_a_phone_the_conversations_are_a_drawer(browser: Any, appliance: Appliance, artifacts: Path) -> None:
    page = open_chat(browser, appliance.url, 390, 844)
    box = page.locator("#chat-input").bounding_box()
    assert box["y"] + box["height"] <= 844, f"the message box is below the first screen: {box}"
    assert not page.locator("#conversations").is_visible()
    page.screenshot(path=str(artifacts / "chat-phone.png"))
    page.locator("#chat-drawer").click()
    page.locator("#conversations").wait_for(state="visible", timeout=5_000)
    page.screenshot(path=str(artifacts / "chat-phone-drawer.png"))
    page.locator("#chat-drawer").click()
    page.locator("#conversations").wait_for(state="hidden", timeout=5_000)
    page.close()


def test_send_turns_into_stop_and_regenerate_waits_for_an_answer(browser: Any, appliance: Appliance) -> None:
    page = open_chat(browser, appliance.url, 1366, 768)
    page.locator("#new-chat").click()
    assert page.locator("#regenerate").is_disabled(), "Regenerate is active in an empty chat"
    page.locator("#chat-input textarea").fill("Tell me a long story about the sea.")
    page.locator("#send").click()
    page.locator("#stop").wait_for(state="visible", timeout=10_000)
    swapped = page.evaluate(
        "() => [document.querySelector('#send'), document.querySelector('#stop')].map(e => !!(e && e.offsetParent))"
    )
    assert swapped == [False, True], f"while streaming (send, stop) visible: {swapped}"
    with contextlib.suppress(Exception):  # a short answer may be over before the click
        page.locator("#stop").click(timeout=2_000)
    page.locator("#send").wait_for(state="visible", timeout=15_000)
    assert not page.locator("#stop").is_visible()
    assert page.locator("#regenerate").is_enabled()
    bubbles = page.locator("#chatbot").inner_html()
    assert "q-stats" not in bubbles, "the answer's text carries markup that Copy would copy"
    page.close()


def test_each_browser_has_its_own_conversations(browser: Any, appliance: Appliance) -> None:
    with browser_context(browser, 1366, 768) as first, browser_context(browser, 1366, 768) as second:
        a = goto(first.new_page(), appliance.url)
        send(a, "Private note from colleague A about the budget.")
        a.locator("#conversations").get_by_text("Private note from colleague A").wait_for(timeout=10_000)
        b = goto(second.new_page(), appliance.url)
        b.wait_for_timeout(1_000)
        assert b.locator("#conversations").get_by_text("Private note from colleague A").count() == 0
        assert "Private note" not in b.locator("#chatbot").inner_text()
        a.reload(wait_until="load")  # A keeps its own after a reload
        a.locator("#conversations").get_by_text("Private note from colleague A").wait_for(timeout=15_000)


def test_conversations_can_be_searched_renamed_and_deleted(browser: Any, appliance: Appliance) -> None:
    page = open_chat(browser, appliance.url, 1366, 768)
    page.locator("#new-chat").click()
    send(page, "**Lighthouse** maintenance schedule?")
    listing = page.locator("#conversations")
    listing.get_by_text("Lighthouse maintenance schedule?").wait_for(timeout=10_000)  # the title has no Markdown
    page.locator("#chat-manage").click()
    page.locator("#chat-title textarea, #chat-title input").first.fill("Beacon upkeep")
    page.locator("#rename-chat").click()
    listing.get_by_text("Beacon upkeep").wait_for(timeout=10_000)
    search = page.locator("#chat-search input, #chat-search textarea").first
    search.fill("no chat says this")
    listing.get_by_text("Beacon upkeep").wait_for(state="detached", timeout=10_000)  # the search is applied
    search.fill("maintenance")
    listing.get_by_text("Beacon upkeep").wait_for(timeout=10_000)  # found by what was said in it
    search.fill("")
    listing.get_by_text("Beacon upkeep").wait_for(timeout=10_000)
    page.locator("#delete-chat").click()
    page.locator("#delete-chat-confirm").click()
    listing.get_by_text("Beacon upkeep").wait_for(state="detached", timeout=10_000)
    chat = page.locator("#chatbot")  # Gradio's "processing | 0.2s" shows there until the delete's step ends
    wait_until(lambda: chat.inner_text().strip() == "", timeout=10, every=0.2, what="an empty chat after the delete")
    page.close()


def test_dark_mode_card_panels_are_readable(browser: Any, appliance: Appliance, artifacts: Path) -> None:
    page = open_tab(browser, appliance.url, "Cards", 1366, 900, color_scheme="dark")
    page.locator("#card-panels .q-panel .q-v").first.wait_for(timeout=15_000)
    page.screenshot(path=str(artifacts / "cards-dark.png"), full_page=True)
    for selector in (
        "#card-panels .q-panel .q-v",
        "#card-panels .q-panel .q-title",
        "#q-header .q-card",
        "#q-header .q-state",
    ):
        for element in page.locator(selector).all()[:6]:
            ratio = element.evaluate(CONTRAST)
            assert ratio >= 4.5, f"{selector} '{element.inner_text()}' has contrast {ratio:.2f}"
    page.close()


def test_the_kiosk_fills_its_screen_in_large_type(browser: Any, appliance: Appliance, artifacts: Path) -> None:
    page = open_chat(browser, appliance.url + "/kiosk/", 1920, 1080)
    page.locator("#q-header").get_by_text("ready").wait_for(timeout=15_000)
    send(page, "Hello from the kiosk.")
    size = page.locator("#chatbot [data-testid='user']").last.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 28, f"kiosk message text is {size} px"
    value = page.locator("#kiosk-cards .q-v").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert value >= 24, f"kiosk card values are {value} px"
    transcript = page.locator("#chatbot").bounding_box()
    assert transcript["height"] >= 0.4 * 1080
    assert page.evaluate("() => document.documentElement.scrollHeight") <= 1080 + 2, "the kiosk page scrolls"
    page.screenshot(path=str(artifacts / "kiosk-1920x1080.png"))
    page.close()


@pytest.fixture
def lone_app(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """An app of its own (no cards: only the page matters), to be stopped by the test."""
    port = free_port()
    env = {
        **os.environ,
        "QUARTET_WEB__PORT": str(port),
        "QUARTET_DATA_DIR": str(tmp_path / "var"),
        "QUARTET_KNOWLEDGE__DIR": str(tmp_path / "kb"),
        "QUARTET_ENGINE__CARDS": json.dumps(["127.0.0.1:1"]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout=120, every=0.3)
    yield url, proc
    proc.kill()
    proc.wait(timeout=20)


def test_the_page_says_offline_within_five_seconds(browser: Any, lone_app: tuple[str, Any]) -> None:

    url, proc = lone_app
    page = open_chat(browser, url, 1366, 768)
    assert not page.evaluate("() => document.body.classList.contains('q-offline')")
    proc.kill()
    proc.wait(timeout=10)
    gone = time.monotonic()
    page.wait_for_function("() => document.body.classList.contains('q-offline')", timeout=5_000)
    assert time.monotonic() - gone < 5
    page.close()


def test_admin_applies_engine_settings_and_shows_progress_live(
    browser: Any, appliance: Appliance, artifacts: Path
) -> None:
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    admin_login(page, appliance.url)
    catalog = page.locator("#catalog").inner_text()
    assert "Why it cannot load" in catalog and "Absent 27B" in catalog and "need_gib_per_card" not in catalog
    page.locator("#admin-status").get_by_text("ready").first.wait_for(timeout=10_000)
    page.get_by_text("Engine settings", exact=True).first.click()  # the accordion, not the log's lines
    page.locator("#apply-settings").click()
    seen = set()
    for _ in range(600):  # the page's own timer shows the reload as it happens
        seen.add(page.locator("#admin-status").inner_text().split("\n")[0][:40])
        if "loaded in" in page.locator("#switch-result").inner_text():
            break
        page.wait_for_timeout(200)
    result = page.locator("#switch-result").inner_text()
    page.screenshot(path=str(artifacts / "admin-applied.png"), full_page=True)
    assert "loaded in" in result, f"Apply and reload said: {result!r}"
    assert len(seen) > 1, f"the status never changed during the reload: {seen}"
    page.close()


def test_documents_tab_at_1280x800(browser: Any, appliance: Appliance, artifacts: Path, tmp_path: Path) -> None:
    """Ask is in view; a drop says what became of each file; a broken file can be deleted; Ask has a Stop;
    sources name each page once; a page keeps its line breaks."""
    from tests.library import handbook

    good = tmp_path / "ops-handbook-ui.pdf"
    good.write_bytes(handbook() + b"\n% a copy of its own: other tests index the handbook too\n")
    broken = tmp_path / "broken-scan-ui.pdf"
    broken.write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 200)
    page = open_tab(browser, appliance.url, "Documents", 1280, 800)
    ask = page.locator("#ask").bounding_box()
    assert ask and ask["y"] + ask["height"] <= 800, f"Ask is below the fold: {ask}"
    page.locator("#upload input[type=file]").set_input_files([str(good), str(broken)])
    status = page.locator("#upload-status")
    status.get_by_text("ops-handbook-ui.pdf").wait_for(timeout=30_000)
    page.wait_for_function(
        "() => /ops-handbook-ui\\.pdf[^\\n]*indexed/.test((document.querySelector('#upload-status')?.innerText ?? ''))",
        timeout=180_000,
    )
    page.wait_for_function(
        "() => /broken-scan-ui\\.pdf[^\\n]*not indexed/"
        ".test((document.querySelector('#upload-status')?.innerText ?? ''))",
        timeout=60_000,
    )
    assert "{" not in status.inner_text(), "the upload report is raw JSON"
    page.screenshot(path=str(artifacts / "documents-1280x800.png"))

    page.locator("#question textarea").fill("At what temperature do the cards throttle? Answer at length.")
    page.locator("#ask").click()
    page.locator("#answer").get_by_text(re.compile(r"\w{3,}")).first.wait_for(timeout=120_000)
    stopped(page, "#stop-ask", "#answer", "the answer")

    page.locator("#question textarea").fill("What does the handbook say about cooling and temperatures?")
    page.locator("#ask").click()
    page.locator("#sources label").first.wait_for(timeout=120_000)
    page.wait_for_timeout(500)
    labels = [label.split("] ", 1)[1] for label in page.locator("#sources label").all_inner_texts()]
    assert len(labels) == len(set(labels)), f"a page is listed twice among the sources: {labels}"
    page.locator("#sources label").first.click()
    page.locator("#page-view .q-page-text").wait_for(timeout=10_000)
    assert page.locator("#page-view .q-page-text").evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"

    page.locator("#manage-docs").click()
    page.locator("#doc-choice input").fill("broken-scan-ui")
    page.get_by_role("option", name="broken-scan-ui.pdf").click()
    page.locator("#delete-doc").click()
    page.locator("#delete-doc-confirm").click()
    page.wait_for_function(
        "() => !document.querySelector('#documents').innerText.includes('broken-scan-ui.pdf')", timeout=15_000
    )
    page.close()

    c = api_client(appliance.url)  # leave the shared appliance's library as it was: the page uploaded it
    token = admin_token(appliance)
    for doc in c.predict(api_name="/documents"):
        if doc["name"] == good.name:
            assert c.predict(doc["id"], token, api_name="/delete_document") is True


def test_regenerate_keeps_versions_and_a_question_can_be_edited(browser: Any, appliance: Appliance) -> None:
    engine_idle(appliance)  # what earlier tests started has ended: this one's answers are not held up by it
    page = open_chat(browser, appliance.url, 1366, 900)
    page.locator("#new-chat").click()
    send(page, "Name a colour.")
    first = page.locator("#chatbot [data-testid='bot']").last.inner_text()
    status = page.locator("#chat-status").inner_text()
    assert "⚠" not in status, f"the first answer failed, so there is nothing to regenerate: {status}"
    page.locator("#regenerate").click()
    page.locator("#version-label").get_by_text("answer 2 of 2").wait_for(timeout=90_000)
    page.locator("#send").wait_for(state="visible", timeout=60_000)
    page.locator("#version-older").click()
    page.locator("#version-label").get_by_text("answer 1 of 2").wait_for(timeout=10_000)
    assert page.locator("#chatbot [data-testid='bot']").last.inner_text() == first

    user = page.locator("#chatbot [data-testid='user']").last
    user.hover()
    page.locator("#chatbot button[aria-label='Edit'], #chatbot button[title='Edit']").last.click()
    page.locator("#chatbot textarea").last.fill("Name a fruit.")
    page.locator("#chatbot").get_by_role("button", name=re.compile("Submit|Save", re.I)).last.click()
    page.locator("#chatbot [data-testid='user']").get_by_text("Name a fruit.").wait_for(timeout=30_000)
    page.wait_for_function(
        "() => /tok\\/s|⚠|stopped/.test((document.querySelector('#chat-status')?.innerText ?? ''))", timeout=90_000
    )
    texts = page.locator("#chatbot [data-testid='user']").all_inner_texts()
    assert texts == ["Name a fruit."], f"the edited question should replace the old one: {texts}"
    page.close()
