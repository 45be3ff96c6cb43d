"""What the browser tests share: opening a page at a size, sending a chat message and waiting for its
answer, logging in to the admin page, reading a toast, the contrast of a text, and streams that keep the
engine's slots busy. One place, so that a change to how the page is driven is made once."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai

from tests.harness import ADMIN_PASSWORD, API_KEY, Appliance, api_client, wait_until

# The contrast ratio (WCAG) of an element's text against the first opaque background behind it.
CONTRAST = """(el) => {
  const rgb = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = ([r, g, b]) => 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  let bg = null;
  for (let e = el; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) { bg = c; break; }
  }
  bg = bg || [255, 255, 255];
  const fg = rgb(getComputedStyle(el).color);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""
RUN_OVER = re.compile(r"1 of 1 documents — (done|error)")  # an Extraction run over one document has ended
TOAST = ".toast-body, [data-testid='toast-body']"
CHAT_READY = "#send:not([disabled])"  # Send is on once the page's load has said whose page it is
# the chat's status line once an answer is over: its stats, a warning, or "stopped"
ANSWER_OVER = "() => /tok\\/s|⚠|stopped/.test((document.querySelector('#chat-status')?.innerText ?? ''))"


def open_page(
    browser: Any, url: str, width: int, height: int, *, ready: str | None = CHAT_READY, **options: Any
) -> Any:
    """A new page (in a context of its own) at `width`×`height`, loaded, with `ready` on it."""
    page = browser.new_page(viewport={"width": width, "height": height}, **options)
    page.goto(url, wait_until="load")
    if ready:
        page.locator(ready).first.wait_for(timeout=15_000)
    return page


def open_chat(browser: Any, url: str, width: int, height: int, **options: Any) -> Any:
    return open_page(browser, url, width, height, **options)


def open_tab(browser: Any, url: str, tab: str, width: int, height: int, **options: Any) -> Any:
    """The page at a size with one of its tabs shown. The tab is clicked once the page's load has said whose page
    it is (Send on): a click as the page was still drawing found the tab's button re-drawn under it and waited 30 s
    for it (issue 27, a whole run of 2026-12-06)."""
    page = open_page(browser, url, width, height, **options)
    page.get_by_role("tab", name=tab).click()
    return page


@contextlib.contextmanager
def browser_context(browser: Any, width: int, height: int, **options: Any) -> Iterator[Any]:
    """A context of its own (its own storage: another "browser"), closed at the end."""
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    try:
        yield context
    finally:
        context.close()


def goto(
    page: Any, url: str, ready: str | None = CHAT_READY, *, wait_until: str = "load", timeout_ms: int = 15_000
) -> Any:
    """`url` in `page`, then `ready` shown within `timeout_ms` (the navigation has at least Playwright's 30 s)."""
    page.goto(url, wait_until=wait_until, timeout=max(30_000, timeout_ms))
    if ready:
        page.locator(ready).first.wait_for(timeout=timeout_ms)
    return page


def send(page: Any, text: str) -> None:
    """Send `text` and wait until the answer is over and Send is back."""
    page.locator("#chat-input textarea").fill(text)
    page.locator("#send").click()
    try:
        page.wait_for_function(ANSWER_OVER, timeout=90_000)
    except Exception as error:
        raise AssertionError(f"the answer to {text!r} was not over in 90 s; the page shows: {said(page)}") from error
    page.locator("#send").wait_for(state="visible", timeout=10_000)


def said(page: Any) -> str:
    """What the chat shows now (status line, toasts, the last bubble), for a failure's message."""
    return repr(
        page.evaluate(
            "() => ({status: document.querySelector('#chat-status')?.innerText,"
            " toasts: [...document.querySelectorAll('.toast-body')].map(e => e.innerText),"
            " last: [...document.querySelectorAll('#chatbot .message')].map(e => e.innerText).slice(-2)})"
        )
    )


def engine_idle(appliance: Appliance, timeout: float = 180.0) -> None:
    """Wait until no answer runs or waits (what an earlier test started has ended): an answer that shares
    its steps with others can come out differently (llama.cpp's batched arithmetic), so a test that needs
    the model's solo answer waits for this first."""

    c = api_client(appliance.url)
    wait_until(
        lambda: (queue := c.predict(api_name="/status")["queue"]) and not queue["running"] and not queue["waiting"],
        timeout=timeout,
        every=0.5,
    )


def answered(page: Any, text: str) -> None:
    """Send `text` and wait for its own answer to end (the status line may still say how the last one did)."""
    page.locator("#chat-input textarea").fill(text)
    page.locator("#send").click()
    page.locator("#chatbot [data-testid='user']").get_by_text(text).wait_for(timeout=15_000)
    page.wait_for_function(
        "() => /generating|waiting|reading/.test((document.querySelector('#chat-status')?.innerText ?? ''))"
        " || /tok\\/s/.test((document.querySelector('#chat-status')?.innerText ?? ''))",
        timeout=60_000,
    )
    page.wait_for_function(
        "() => /tok\\/s|⚠/.test((document.querySelector('#chat-status')?.innerText ?? ''))", timeout=90_000
    )
    page.locator("#send").wait_for(state="visible", timeout=10_000)


def toast_saying(page: Any, text: str) -> str:
    """The text of the toast that says `text` (Gradio's toast for a gr.Error), waited for."""
    page.locator(TOAST).filter(has_text=text).first.wait_for(timeout=15_000)
    return str(page.locator(TOAST).filter(has_text=text).first.inner_text())


def admin_login(page: Any, url: str) -> None:
    """Log in to the admin page. Retried only when the login was refused (another test's wrong password may
    have started this address's throttle): a slow login sent again would fill the form a second time, over
    what a test types after the first."""
    page.goto(url + "/admin/", wait_until="load")
    page.locator("#admin-password input").wait_for(timeout=15_000)
    for _ in range(20):
        toasts = page.locator(TOAST).count()
        page.locator("#admin-password input").fill(ADMIN_PASSWORD)
        page.locator("#admin-password input").press("Enter")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if page.locator("#catalog").is_visible():
                return
            if page.locator(TOAST).count() > toasts:
                break  # refused: wait out the throttle, then try again
            page.wait_for_timeout(200)
        else:
            raise AssertionError("the admin login neither opened the page nor was refused in 90 s")
        page.wait_for_timeout(1_500)
    raise AssertionError("could not log in to the admin page")


def ingest(appliance: Appliance, path: Path) -> int:
    """Put a file in the library through the `ingest` endpoint; its document id once it is indexed."""
    from gradio_client import handle_file

    c = api_client(appliance.url)
    c.predict([handle_file(str(path))], api_name="/ingest")
    doc = wait_until(
        lambda: next(
            (d for d in c.predict(api_name="/documents") if d["name"] == path.name and d["status"] == "ok"), None
        ),
        timeout=180,
        every=0.5,
    )
    return int(doc["id"])


def document(appliance: Appliance, doc_id: int) -> dict[str, Any]:

    docs = api_client(appliance.url).predict(api_name="/documents")
    return dict(next(d for d in docs if d["id"] == doc_id))


def admin_token(appliance: Appliance) -> str:
    """An admin session's token through `admin_login`, waiting out a throttle another test's wrong
    password started."""
    from gradio_client.exceptions import AppError

    c = api_client(appliance.url)

    def logged_in() -> str | None:
        try:
            return str(c.predict(ADMIN_PASSWORD, api_name="/admin_login"))
        except AppError as err:
            if "try again in" not in str(err):
                raise
            return None

    return str(wait_until(logged_in, timeout=30, every=1.0))


def forget(appliance: Appliance, *doc_ids: int) -> None:
    """Leave the shared appliance's library as it was: remove documents whoever uploaded them (a page's
    upload is that page's; the admin may remove any)."""
    c = api_client(appliance.url)
    token = admin_token(appliance)
    for doc_id in doc_ids:
        c.predict(doc_id, token, api_name="/delete_document")


def stopped(page: Any, stop: str, shown: str, what: str) -> None:
    """Press the Stop button `stop`: the text in `shown` says "stopped" and does not grow after."""
    page.locator(stop).click()
    page.locator(shown).get_by_text("stopped").first.wait_for(timeout=5_000)  # said, not only frozen
    page.wait_for_timeout(1_500)
    before = page.locator(shown).inner_text()
    page.wait_for_timeout(2_000)
    assert page.locator(shown).inner_text() == before, f"{what} went on after Stop"


def extract_with(page: Any, template: str, document_name: str, *, timeout_s: float) -> None:
    """On the Extraction tab: run `template` over one document and wait until the run is over: done, or an
    error when a part of the document failed (the demo model may run a table into its token cap; the run
    then says so, as its export does, and keeps what it found)."""
    page.locator("#extract-template input").click()
    page.get_by_role("option", name=template, exact=True).click()
    page.locator("#extract-docs input").click()
    page.get_by_role("option", name=document_name).click()
    page.keyboard.press("Escape")
    page.locator("#extract-run").click()
    page.locator("#extract-progress").get_by_text(RUN_OVER).wait_for(timeout=timeout_s * 1000)


class Streams:
    """Streaming /v1 answers that keep the engine's slots busy until they are let go."""

    def __init__(self, appliance: Appliance, count: int) -> None:
        self.client = openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=300)
        self.release = threading.Event()
        self.started = [threading.Event() for _ in range(count)]
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._stream, args=(i,), daemon=True) for i in range(count)]
        for thread in self.threads:
            thread.start()

    def _stream(self, i: int) -> None:
        try:
            response = self.client.chat.completions.create(
                model="demo",
                messages=[{"role": "user", "content": f"Count from {i} to 2000, one number per line."}],
                max_tokens=1500,
                temperature=0,
                stream=True,
            )
            for chunk in response:
                if any(choice.delta.content for choice in chunk.choices):
                    self.started[i].set()
                if self.release.is_set():
                    break
            response.close()
        except openai.APIError as err:
            self.errors.append(str(err))

    def generating(self) -> int:
        return sum(started.is_set() for started in self.started)

    def close(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(timeout=60)


def click_until(
    button: Any, count: Callable[[], int], want: int, *, what: str, tries: int = 3, wait_s: float = 5.0
) -> None:
    """Click `button` until `count()` reads `want`. A click after which `count()` still reads what it read
    before is given again (at most `tries` clicks): one full run saw a click on "Add a field", just after the
    field table had grown, add nothing, as if it landed beside the button, and no run alone repeats it. Any
    other count fails at once, naming it."""
    before = count()
    for attempt in range(1, tries + 1):
        button.click()
        try:
            wait_until(lambda: count() != before, timeout=wait_s, every=0.2)
        except TimeoutError:
            continue
        assert count() == want, f"{what}: {count()} rows after the click, {want} wanted ({before} before)"
        if attempt > 1:
            print(f"{what}: the click took effect on click {attempt}")
        return
    raise AssertionError(f"{what}: {tries} clicks left the table at {before} rows, {want} wanted")
