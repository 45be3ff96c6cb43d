"""One Chromium whose browser contexts are used again, emptied, by the next test (issue 27).

A page loaded in a new context fetches and compiles the whole Gradio front end: ~1.8 s of Chromium's CPU and
~0.4 s of the app's on this machine, where the same page in a context that loaded it before costs ~1.0 s and
~0.15 s (its HTTP cache and V8's code cache are warm). The suite loads a page some hundreds of times.

So a test's `browser.new_context(...)` / `browser.new_page(...)` hands out a context a finished test gave back,
when one was made with the same options (the viewport aside: every new page is set to the one asked for).
Given back, a context is emptied of what a person's browser would carry to the next one: its pages are
closed, its cookies, permissions, routes, offline switch and extra headers reset, and the localStorage,
sessionStorage and IndexedDB of every origin it showed cleared (Gradio's BrowserState, the chat list's
identity, lives there). What it keeps is its HTTP and code caches, the cost being saved. A context given an
init script or an exposed function cannot be emptied of it, so it is closed instead of kept.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

DEFAULT_VIEWPORT = {"width": 1280, "height": 720}  # Playwright's, for a test that names none
KEEP = 3  # emptied contexts kept per set of options
CLEAR_PATH = "/__quartet_tests_clear_storage__"  # answered by the context itself, never by the app
CLEAR_STORAGE = """async () => {
  localStorage.clear();
  sessionStorage.clear();
  if (indexedDB.databases) {
    for (const db of await indexedDB.databases()) indexedDB.deleteDatabase(db.name);
  }
}"""
TAINTING = frozenset({"add_init_script", "expose_binding", "expose_function", "route_from_har"})


def _key(options: dict[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in options.items() if k != "viewport"))


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else None


class WarmContext:
    """A pooled Playwright BrowserContext as a test sees it: `close()` gives it back to the pool."""

    def __init__(self, pool: WarmBrowser, context: Any, key: str) -> None:
        self._pool = pool
        self._context = context
        self._key = key
        self.viewport: dict[str, int] = DEFAULT_VIEWPORT
        self.origins: set[str] = set()
        self.tainted = False
        self.closed = False
        context.on("close", lambda _: setattr(self, "closed", True))
        context.on("page", self._watch)

    def _watch(self, page: Any) -> None:
        def navigated(frame: Any) -> None:
            if frame == page.main_frame and (origin := _origin(frame.url)):
                self.origins.add(origin)

        page.on("framenavigated", navigated)

    def new_page(self, **options: Any) -> Any:
        page = self._context.new_page(**options)
        page.set_viewport_size(self.viewport)
        return page

    def close(self, **_: Any) -> None:
        self._pool.give_back(self)

    def __getattr__(self, name: str) -> Any:
        if name in TAINTING:
            self.tainted = True
        return getattr(self._context, name)

    def empty(self) -> bool:
        """Reset to a context no test has used but for its caches; False if that cannot be done."""
        if self.closed or self.tainted:
            return False
        context = self._context
        try:
            for page in list(context.pages):
                page.close()
            context.unroute_all(behavior="ignoreErrors")
            context.clear_cookies()
            context.clear_permissions()
            context.set_offline(False)
            context.set_extra_http_headers({})
            if self.origins:
                page = context.new_page()
                for origin in sorted(self.origins):
                    blank = origin + CLEAR_PATH
                    page.route(blank, lambda route: route.fulfill(status=200, content_type="text/html", body=""))
                    page.goto(blank)
                    page.evaluate(CLEAR_STORAGE)
                page.close()
        except Exception:
            return False
        self.origins = set()
        return not self.closed


class WarmBrowser:
    """The session's Chromium as tests use it (`new_context`, `new_page`); anything else goes to Playwright."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser
        self._free: dict[str, list[WarmContext]] = {}
        self._out: list[WarmContext] = []
        self.made = 0
        self.reused = 0

    def new_context(self, **options: Any) -> WarmContext:
        key = _key(options)
        free = self._free.get(key, [])
        if free:
            warm = free.pop()
            self.reused += 1
        else:
            warm = WarmContext(self, self._browser.new_context(**options), key)
            self.made += 1
        warm.viewport = options.get("viewport") or DEFAULT_VIEWPORT
        self._out.append(warm)
        return warm

    def new_page(self, **options: Any) -> Any:
        return self.new_context(**options).new_page()

    def checked_out(self) -> list[WarmContext]:
        return list(self._out)

    def give_back(self, warm: WarmContext) -> None:
        if warm not in self._out:
            return  # given back already
        self._out.remove(warm)
        free = self._free.setdefault(warm._key, [])
        if len(free) < KEEP and warm.empty():
            free.append(warm)
        elif not warm.closed:
            warm._context.close()

    def report(self) -> str:
        loads = self.made + self.reused
        return f"browser contexts: {loads} handed out, {self.made} made, {self.reused} used again emptied"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)
