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

One page of it is kept too, left on a blank page of the last origin it showed, and is the next test's first
`new_page()`: a new page is a new renderer process, which then compiles the front end again (~0.45 s of
Chromium's CPU a load more than the same page navigating). Only a page nobody listened to is kept: one with
more listeners than it was made with (`page.on(...)`, a `dialog` handler), an exposed function, a locator
handler or a HAR route is closed. (A page-level `add_init_script` cannot be seen from here: no test uses
one; a test that does must close its page.)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

DEFAULT_VIEWPORT = {"width": 1280, "height": 720}  # Playwright's, for a test that names none
KEEP = 3  # emptied contexts kept per set of options
CLEAR_PATH = "/__quartet_tests_clear_storage__"  # answered by the context itself, never by the app
BLANK = '<link rel="icon" href="data:,">'  # so Chromium asks the app for no icon after the reset
CLEAR_STORAGE = """async () => {
  localStorage.clear();
  sessionStorage.clear();
  if (indexedDB.databases) {
    for (const db of await indexedDB.databases()) indexedDB.deleteDatabase(db.name);
  }
}"""
TAINTING = frozenset({"add_init_script", "expose_binding", "expose_function", "route_from_har"})
PAGE_EVENTS = (
    "close", "console", "crash", "dialog", "domcontentloaded", "download", "filechooser", "frameattached",
    "framedetached", "framenavigated", "load", "pageerror", "popup", "request", "requestfailed",
    "requestfinished", "response", "websocket", "worker",
)  # fmt: skip


def _key(options: dict[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in options.items() if k != "viewport"))


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else None


def _listeners(page: Any) -> dict[str, int]:
    impl = page._impl_obj
    return {event: impl.listener_count(event) for event in PAGE_EVENTS}


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
        self.kept: Any | None = None  # a page of the last test, emptied, for the next `new_page()`
        self._made_with: dict[Any, dict[str, int]] = {}  # each page's listeners once the pool had watched it
        context.on("close", lambda _: setattr(self, "closed", True))
        context.on("page", self._watch)

    def _watch(self, page: Any) -> None:
        def navigated(frame: Any) -> None:
            if frame == page.main_frame and (origin := _origin(frame.url)):
                self.origins.add(origin)

        page.on("framenavigated", navigated)
        self._made_with[page] = _listeners(page)

    def new_page(self, **options: Any) -> Any:
        page, self.kept = self.kept, None
        if page is None or page.is_closed() or options:
            page = self._context.new_page(**options)
            self._pool.pages_made += 1
        else:
            self._pool.pages_reused += 1
        page.set_viewport_size(self.viewport)
        return page

    def _reusable(self, page: Any) -> bool:
        impl = page._impl_obj
        untouched = _listeners(page) == self._made_with.get(page)
        return untouched and not (impl._bindings or impl._locator_handlers or impl._har_routers)

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
            pages = [page for page in context.pages if not page.is_closed()]
            keep = next((page for page in pages if self._reusable(page)), None)
            for page in pages:
                if page is not keep:
                    page.close()
            context.unroute_all(behavior="ignoreErrors")
            context.clear_permissions()
            context.set_offline(False)
            context.set_extra_http_headers({})
            if keep is None and self.origins:
                keep = context.new_page()
            if keep is not None:
                keep.unroute_all(behavior="ignoreErrors")
                for origin in sorted(self.origins):
                    blank = origin + CLEAR_PATH
                    keep.route(blank, lambda route: route.fulfill(status=200, content_type="text/html", body=BLANK))
                    keep.goto(blank)
                    keep.evaluate(CLEAR_STORAGE)
                keep.unroute_all(behavior="ignoreErrors")
            context.clear_cookies()  # last: a response still on its way to the last test's page may set one
            self._made_with = {page: counts for page, counts in self._made_with.items() if page is keep}
        except Exception:
            return False
        self.origins = set()
        self.kept = keep
        return not self.closed


class WarmBrowser:
    """The session's Chromium as tests use it (`new_context`, `new_page`); anything else goes to Playwright."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser
        self._free: dict[str, list[WarmContext]] = {}
        self._out: list[WarmContext] = []
        self.made = 0
        self.reused = 0
        self.pages_made = 0
        self.pages_reused = 0

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
        return (
            f"browser contexts: {loads} handed out, {self.made} made, {self.reused} used again emptied; pages:"
            f" {self.pages_made} made, {self.pages_reused} used again"
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)
