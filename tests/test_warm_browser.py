"""A context given back to the pool (tests/warm_browser.py) comes out again empty: no cookie, no stored
identity, no permission, the viewport asked for; one that carried an init script is never handed out again."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.harness import free_port
from tests.warm_browser import CLEAR_PATH, WarmBrowser


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>pool</title><p>a page</p>"
        if self.path == "/favicon.ico":  # asked by Chromium after the load, it comes late, as on a busy machine
            time.sleep(0.1)  # (before the pool cleared cookies last, its cookie then outlived the reset)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Set-Cookie", "who=someone; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def stored(page: Any) -> dict[str, Any]:
    return page.evaluate("() => ({local: {...localStorage}, session: {...sessionStorage}, cookie: document.cookie})")


def test_a_context_given_back_is_handed_out_again_emptied(browser: WarmBrowser, site: str) -> None:
    context = browser.new_context(viewport={"width": 900, "height": 700}, color_scheme="dark")
    page = context.new_page()
    page.goto(site)
    page.evaluate("() => { localStorage.setItem('identity', 'first person'); sessionStorage.setItem('s', '1') }")
    context.grant_permissions(["clipboard-read"], origin=site)
    assert stored(page) == {"local": {"identity": "first person"}, "session": {"s": "1"}, "cookie": "who=someone"}
    made, reused = browser.made, browser.reused
    context.close()

    again = browser.new_context(viewport={"width": 640, "height": 480}, color_scheme="dark")
    assert (browser.made, browser.reused) == (made, reused + 1), "the context given back was not used again"
    assert again._context is context._context
    assert [p.url for p in again.pages] == [site + CLEAR_PATH], "the last test's pages are still open"
    page = again.new_page()
    assert page.viewport_size == {"width": 640, "height": 480}
    assert again.cookies() == []
    page.goto(site + "/other")
    # the page set its cookie again on this load; what the last test stored is gone
    assert stored(page) == {"local": {}, "session": {}, "cookie": "who=someone"}
    assert page.evaluate("async () => (await navigator.permissions.query({name: 'clipboard-read'})).state") != (
        "granted"
    )
    again.close()


def test_the_page_given_back_is_the_next_tests_first_page_emptied(browser: WarmBrowser, site: str) -> None:
    page = browser.new_page(viewport={"width": 1000, "height": 700}, color_scheme="dark", locale="de-DE")
    page.goto(site)
    page.evaluate("() => { localStorage.setItem('identity', 'someone'); sessionStorage.setItem('tab', 'mine') }")
    browser.checked_out()[-1].close()
    again = browser.new_page(viewport={"width": 700, "height": 500}, color_scheme="dark", locale="de-DE")
    assert again._impl_obj is page._impl_obj, "the page given back was not used again"
    assert again.viewport_size == {"width": 700, "height": 500}
    assert again.evaluate("() => [localStorage.length, sessionStorage.length]") == [0, 0]
    again.goto(site + "/next")
    assert stored(again) == {"local": {}, "session": {}, "cookie": "who=someone"}
    again.on("dialog", lambda dialog: dialog.accept())  # listened to: never handed out again
    browser.checked_out()[-1].close()
    third = browser.new_page(color_scheme="dark", locale="de-DE")
    assert third._impl_obj is not page._impl_obj and again.is_closed()
    browser.checked_out()[-1].close()


def test_other_options_get_a_context_of_their_own(browser: WarmBrowser, site: str) -> None:
    light = browser.new_context(color_scheme="light")
    light.close()
    made = browser.made
    dark = browser.new_context(color_scheme="no-preference")
    assert browser.made == made + 1
    assert dark._context is not light._context
    dark.close()


def test_a_context_with_an_init_script_is_closed_not_kept(browser: WarmBrowser, site: str) -> None:
    context = browser.new_context(color_scheme="light", reduced_motion="reduce")
    context.add_init_script("window.marked = true")
    page = context.new_page()
    page.goto(site)
    assert page.evaluate("() => window.marked") is True
    real = context._context
    context.close()
    assert context.closed
    fresh = browser.new_context(color_scheme="light", reduced_motion="reduce")
    assert fresh._context is not real
    page = fresh.new_page()
    page.goto(site)
    assert page.evaluate("() => window.marked") is None
    fresh.close()


def test_a_context_left_open_by_a_test_is_given_back_at_its_end(browser: WarmBrowser, site: str) -> None:
    page = browser.new_page(viewport={"width": 800, "height": 600}, color_scheme="light")
    page.goto(site)
    assert any(c._context is page.context for c in browser.checked_out())


def test_the_context_left_open_came_back(browser: WarmBrowser) -> None:
    """Runs after the test above (file order): its context is no longer handed out to anyone."""
    assert browser.checked_out() == []
