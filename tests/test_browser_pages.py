"""The chat, documents and kiosk pages in a real Chromium, for what people meet there: a refusal says
what it refuses, a drop with one file too large still reports (and indexes) every other file, `[n]` in
an answer opens its source, a chat is exported when asked, a failed or stopped answer does not break the
conversation, another chat picked while one streams stays on screen, maths is typeset."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import (
    TOAST,
    answered,
    browser_context,
    document,
    forget,
    goto,
    ingest,
    open_chat,
    open_tab,
    said,
    send,
    stopped,
    toast_saying,
)
from tests.harness import Appliance, api_client, wait_until

pytestmark = pytest.mark.browser


def test_a_refusal_from_a_quick_step_reaches_the_page_with_its_text(browser: Any, appliance: Appliance) -> None:
    """Steps that answer at once (export, rename, index again, open a PDF) say why they refuse: before,
    Gradio 6 turned their gr.Error into a red "Error" with no text (`queue=False`)."""
    page = open_chat(browser, appliance.url, 1366, 768)
    page.locator("#new-chat").click()
    page.locator("#chat-manage").click()
    page.locator("#export-chat-md").click()
    assert "send a message first" in toast_saying(page, "no chat to export")
    send(page, "Say hello.")
    page.locator("#chat-title textarea, #chat-title input").first.fill("   ")
    page.locator("#rename-chat").click()
    toast_saying(page, "A title cannot be empty.")
    page.get_by_role("tab", name="Documents").click()
    page.locator("#manage-docs").click()
    page.locator("#reindex-doc").click()
    toast_saying(page, "Choose a document first.")
    page.locator("#unlock").click()
    toast_saying(page, "Choose the password-protected PDF and type its password.")
    page.close()


def test_a_drop_with_a_file_too_large_reports_and_indexes_every_other_file(
    browser: Any, appliance: Appliance, artifacts: Path, tmp_path: Path
) -> None:
    """One file over the 200 MB limit among small ones: each file gets its line (the large one refused,
    by name and limit), the small ones are indexed. Before, the browser refused the whole drop."""
    small = tmp_path / "small-note-ui.txt"
    small.write_text("A note for the upload report: the fan filter is cleaned every month.\n", encoding="utf-8")
    other = tmp_path / "second-note-ui.md"
    other.write_text("# Second note\n\nThe spare cards are kept in the foam trays.\n", encoding="utf-8")
    huge = tmp_path / "huge-scan-ui.pdf"
    with open(huge, "wb") as out:  # sparse: 201 MiB on paper, nothing on disk
        out.truncate(201 * 2**20)
    page = open_tab(browser, appliance.url, "Documents", 1280, 800)
    page.locator("#upload input[type=file]").set_input_files([str(small), str(huge), str(other)])
    status = page.locator("#upload-status")
    page.wait_for_function(
        "() => /huge-scan-ui\\.pdf[^\\n]*refused[^\\n]*larger than 200 MB/.test("
        "(document.querySelector('#upload-status')?.innerText ?? ''))",
        timeout=30_000,
    )
    for name in (small.name, other.name):
        page.wait_for_function(
            "n => new RegExp(n.replace('.', '\\\\.') + '[^\\\\n]*indexed').test("
            "(document.querySelector('#upload-status')?.innerText ?? ''))",
            arg=name,
            timeout=180_000,
        )
    lines = [line for line in status.inner_text().splitlines() if "-ui." in line]
    assert len([line for line in lines if "huge-scan-ui.pdf" in line]) == 1, lines
    assert not page.locator(TOAST).filter(has_text="exceed").count(), "the browser refused the drop"
    page.screenshot(path=str(artifacts / "documents-drop-too-large.png"))
    page.close()

    docs = api_client(appliance.url).predict(api_name="/documents")
    forget(appliance, *[d["id"] for d in docs if d["name"] in (small.name, other.name)])


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)])
def test_a_citation_in_the_answer_opens_its_source(
    browser: Any, appliance: Appliance, artifacts: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    from tests.library import quick_start

    pdf = tmp_path / f"quick-start-cite-{size[0]}.pdf"
    pdf.write_bytes(quick_start() + f"\n% a copy of its own ({size[0]})\n".encode())
    doc_id = ingest(appliance, pdf)
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    try:
        goto(page, appliance.url)  # the tab once the page is ready (Send on)
        page.get_by_role("tab", name="Documents").click()
        page.locator("#scope input").click()
        page.get_by_role("option", name=pdf.name).click()
        page.keyboard.press("Escape")
        page.locator("#question textarea").fill("How do I switch the appliance on the first time?")
        page.locator("#ask").click()
        page.locator("#answer").get_by_text(f"{pdf.name}, page 1").first.wait_for(timeout=120_000)  # done
        cite = page.locator("#answer button.q-cite").last  # the list under the answer: "[1] file, page 1"
        cite.wait_for(timeout=10_000)
        number = cite.get_attribute("data-n").split(",")[0]
        page.evaluate("() => window.scrollTo(0, 0)")
        cite.click()
        view = page.locator(f"#page-view .q-page[data-source='{number}']")
        view.wait_for(timeout=10_000)
        assert view.locator("mark").first.inner_text().strip(), "the cited passage is not highlighted"
        picked = page.locator("#sources label").filter(has=page.locator("input:checked"))
        assert re.match(rf"\[[\d, ]*\b{number}\b", picked.inner_text()), picked.inner_text()
        page.wait_for_function(
            "() => { const r = document.querySelector('#page-view .q-page')"
            ".getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; }",
            timeout=5_000,
        )  # scrolled to it, on a phone too
        page.locator("#page-view[data-cited]").wait_for(timeout=5_000)  # the source is highlighted
        page.screenshot(path=str(artifacts / f"documents-citation-{size[0]}x{size[1]}.png"))
    finally:
        page.close()
        forget(appliance, doc_id)


def test_a_chat_is_exported_when_asked(browser: Any, appliance: Appliance) -> None:
    page = open_chat(browser, appliance.url, 1366, 768)
    page.locator("#new-chat").click()
    send(page, "Export me: what is a lighthouse?")
    page.locator("#chat-manage").click()
    assert not page.locator("#chat-export").is_visible(), "an export was written without being asked for"
    page.locator("#export-chat-md").click()
    link = page.locator("#chat-export a").first
    link.wait_for(timeout=10_000)
    with page.expect_download(timeout=15_000) as download:
        link.click()
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert "**You:**" in text and "Export me: what is a lighthouse?" in text and "**Quartet:**" in text
    page.locator("#export-chat-json").click()
    page.wait_for_function(
        "() => /\\.json/.test((document.querySelector('#chat-export')?.innerText ?? ''))", timeout=10_000
    )
    with page.expect_download(timeout=15_000) as download:
        page.locator("#chat-export a").first.click()
    saved = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert [m["role"] for m in saved["messages"]][:2] == ["user", "assistant"]
    page.close()


def test_a_failed_or_stopped_answer_does_not_break_the_conversation(browser: Any, appliance: Appliance) -> None:
    """Item 2 as it was met: a too-long message fails, an answer is stopped; the next message and
    Regenerate still get answers (before: "Conversation roles must alternate…" for good)."""
    page = open_chat(browser, appliance.url, 1280, 800)
    page.locator("#new-chat").click()
    send(page, "word " * 20000)  # far more than the 16384-token context
    assert "⚠" in page.locator("#chat-status").inner_text()
    page.locator("#chat-input textarea").fill("Tell me a long story about a lighthouse keeper.")
    page.locator("#send").click()
    page.locator("#stop").wait_for(state="visible", timeout=10_000)
    with contextlib.suppress(Exception):  # a short answer may be over before the click
        page.locator("#stop").click(timeout=2_000)
    page.locator("#send").wait_for(state="visible", timeout=30_000)
    answered(page, "Name a colour.")
    status = page.locator("#chat-status").inner_text()
    assert "tok/s" in status and "alternate" not in page.locator("#chatbot").inner_text(), status
    page.locator("#regenerate").click()
    page.locator("#version-label").get_by_text("answer 2 of 2").wait_for(timeout=90_000)
    page.locator("#send").wait_for(state="visible", timeout=60_000)
    assert "tok/s" in page.locator("#chat-status").inner_text()
    assert "alternate" not in page.locator("#chatbot").inner_text()
    page.close()


def test_another_chat_picked_while_one_streams_stays_on_screen(browser: Any, appliance: Appliance) -> None:
    page = open_chat(browser, appliance.url, 1366, 768)
    page.locator("#new-chat").click()
    send(page, "Quiet chat: say yes.")
    page.locator("#new-chat").click()
    page.locator("#chat-input textarea").fill("Streaming chat: tell me a long story about the sea.")
    page.locator("#send").click()
    page.locator("#stop").wait_for(state="visible", timeout=10_000)
    # streaming: its first frame has put the new chat at the top of the list. Stop shows before that frame,
    # and a click meant for the quiet chat as the list shifts down a row lands on the streaming chat
    page.locator("#conversations label", has_text="Streaming chat").wait_for(timeout=20_000)
    page.locator("#chatbot [data-testid='user']").get_by_text("Streaming chat").wait_for(timeout=20_000)
    label = page.locator("#conversations label", has_text="Quiet chat: say yes.")
    assert re.search(r"· \d{4}-\d{2}-\d{2}$", label.inner_text().strip()), label.inner_text()  # titles dated
    label.click()
    try:
        page.locator("#chatbot [data-testid='user']").get_by_text("Quiet chat: say yes.").wait_for(timeout=20_000)
    except Exception as error:
        raise AssertionError(f"the quiet chat is not shown 20 s after its pick; the page: {said(page)}") from error
    page.wait_for_timeout(3_000)  # the other answer would have streamed into the view by now
    shown = page.locator("#chatbot").inner_text()
    assert "Quiet chat" in shown and "Streaming chat" not in shown, shown
    page.close()


def test_maths_is_typeset(browser: Any, appliance: Appliance) -> None:
    page = open_chat(browser, appliance.url, 1280, 800)
    page.locator("#new-chat").click()
    page.locator("#chat-input textarea").fill("Is $$E = mc^2$$ right?")
    page.locator("#send").click()
    user = page.locator("#chatbot [data-testid='user']").last
    user.locator(".katex").first.wait_for(timeout=15_000)  # typeset, not "$$E = mc^2$$"
    assert "$$" not in user.inner_text()
    with contextlib.suppress(Exception):
        page.locator("#stop").click(timeout=5_000)
    page.locator("#send").wait_for(state="visible", timeout=60_000)
    page.close()


def test_the_kiosk_lists_only_its_own_chats(browser: Any, appliance: Appliance) -> None:
    with browser_context(browser, 1280, 800) as context:
        page = goto(context.new_page(), appliance.url)
        send(page, "Desk chat, not for the kiosk.")
        page.locator("#conversations").get_by_text("Desk chat, not for the kiosk.").wait_for(timeout=10_000)
        goto(page, appliance.url + "/kiosk")  # the same browser, on the kiosk page
        page.wait_for_timeout(1_000)
        assert page.locator("#conversations").get_by_text("Desk chat").count() == 0
        assert page.evaluate("() => document.documentElement.scrollHeight") <= 800 + 2, "the kiosk page scrolls"


def test_the_header_never_shows_the_boot_state_of_a_ready_appliance(browser: Any, appliance: Appliance) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(appliance.url, wait_until="commit")
    page.locator("#q-header .q-state").first.wait_for(timeout=15_000)
    seen = set()
    for _ in range(30):
        seen.add(page.locator("#q-header .q-state").first.inner_text())
        page.wait_for_timeout(100)
    assert seen == {"ready"}, f"the header showed {seen}"
    page.close()


def test_read_it_all_can_be_stopped_and_a_document_indexed_again(
    browser: Any, appliance: Appliance, tmp_path: Path
) -> None:
    from tests.library import handbook

    pdf = tmp_path / "handbook-read-ui.pdf"
    pdf.write_bytes(handbook() + b"\n% a copy of its own: read it all\n")
    doc_id = ingest(appliance, pdf)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        goto(page, appliance.url)  # the tab once the page is ready (Send on)
        page.get_by_role("tab", name="Documents").click()
        page.get_by_text("Whole document", exact=True).click()
        page.locator("#whole-doc input").click()
        page.get_by_role("option", name=pdf.name).click()
        page.locator("#summarise").click()
        page.locator("#summary").get_by_text(re.compile(r"part \d+ of \d+|\w{4,}")).first.wait_for(timeout=120_000)
        stopped(page, "#stop-summarise", "#summary", "Read it all")

        page.locator("#manage-docs").click()
        page.locator("#doc-choice input").fill("handbook-read-ui")
        page.get_by_role("option", name=pdf.name).click()
        before = document(appliance, doc_id)
        page.locator("#reindex-doc").click()
        page.wait_for_timeout(1_000)
        assert not page.locator(TOAST).count(), page.locator(TOAST).all_inner_texts()
        again = wait_until(
            lambda: (
                (d := document(appliance, doc_id))["status"] == "ok" and d["indexed_at"] != before["indexed_at"] and d
            ),
            timeout=180,
            every=0.5,
        )
        assert again["chunks"] == before["chunks"]  # (its row may be out of the table's view: many documents)
        lines = page.evaluate(
            "() => [...document.querySelectorAll('#documents th')].map(th => {"
            " const r = document.createRange(); r.selectNodeContents(th.querySelector('.header')"
            " || th); return [th.innerText.trim(), new Set([...r.getClientRects()]"
            ".map(x => Math.round(x.top))).size]; })"
        )
        assert lines and all(n == 1 for _, n in lines), f"headers broken over lines ('Pas/sag/es'): {lines}"
    finally:
        page.close()
        forget(appliance, doc_id)


def test_the_trash_icon_starts_a_new_chat(browser: Any, appliance: Appliance) -> None:
    """It only emptied the view, and the next message brought the whole history back."""
    page = open_chat(browser, appliance.url, 1366, 768)
    page.locator("#new-chat").click()
    send(page, "Before the trash: say one.")
    page.locator("#chatbot button[aria-label*='clear' i], #chatbot button[title*='clear' i]").first.click()
    page.wait_for_function(
        "() => !document.querySelector('#chatbot').innerText.includes('Before the trash')", timeout=10_000
    )
    answered(page, "After the trash: say two.")
    texts = page.locator("#chatbot [data-testid='user']").all_inner_texts()
    assert texts == ["After the trash: say two."], f"the cleared history came back: {texts}"
    listing = page.locator("#conversations")
    assert listing.get_by_text("Before the trash: say one.").count() == 1, "the cleared chat left the list"
    page.close()
