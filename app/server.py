"""The web server: FastAPI with the Gradio page mounted at / and plain routes beside it."""

from __future__ import annotations

import asyncio
import functools
import re
from pathlib import Path
from typing import Any

import fastapi
import gradio as gr
import uvicorn
from fastapi.responses import JSONResponse, RedirectResponse, Response
from gradio.exceptions import InvalidPathError
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import download_routes, errors, password_routes
from app.api.gate import ApiGate
from app.api.openai_routes import build_router, require_key
from app.context import AppContext
from app.early_script import EarlyScript
from app.errors import Refused
from app.guards import AdminUploads, KeyOwners
from app.page_logins import CallerAddress, PageLogins, SameOrigin
from app.telemetry import metrics
from app.telemetry.views import Health
from app.ui import admin_page, kiosk, page
from app.ui.errors import for_person

ASSETS = Path(__file__).resolve().parent.parent / "assets"
SUB_PAGES = ("/kiosk", "/admin")  # mounted beside the main page at "/"


# What a page may load: only this app's own files, data: images and its own API. Rendered answers are
# defused already (app/ui/rendering.py); this header makes the browser refuse whatever slips through.
# Gradio's page needs inline scripts and styles and runs the page's `js` through Function().
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "media-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ]
)


def create_app(ctx: AppContext) -> fastapi.FastAPI:
    api = fastapi.FastAPI(title="Quartet", docs_url=None, redoc_url=None, openapi_url=None)
    limit = ctx.settings.web.max_body_mb * 2**20
    api.add_middleware(ApiGate, keys=ctx.api_keys, max_body_bytes=limit)
    small = ctx.settings.knowledge.max_file_bytes + 2**20  # a document and its form: all a non-admin may send
    api.add_middleware(AdminUploads, may_upload=ctx.admin.sessions.may_upload, small_bytes=small)
    api.add_middleware(KeyOwners, owner_of=ctx.people.key_owner)  # named-endpoint callers with a key made here
    api.add_middleware(NoRemoteFiles)  # no URL in file=, on every page
    api.add_middleware(SameOrigin)  # a login or /password form posted from another site: refused
    api.add_middleware(SecurityHeaders)  # outside the gate and NoRemoteFiles: their refusals get the headers too
    pages = frozenset({"/", *(sub + "/" for sub in SUB_PAGES)})  # before Gradio's modules run (app/early_script.py)
    api.add_middleware(EarlyScript, script=ASSETS / "frames.js", pages=pages)
    api.add_middleware(CallerAddress)  # the page logins' throttle counts by address

    _mount_openai(api, ctx)
    settings = ctx.settings

    own = metrics.registry(ctx.status, ctx.engine.counters.snapshot)

    @api.get("/metrics")
    def metrics_page(request: fastapi.Request) -> Response:
        if not settings.web.metrics_public:
            require_key(request, ctx.api_keys)
        return Response(metrics.render(own), media_type=metrics.CONTENT_TYPE)

    @api.get("/health")
    def health(request: fastapi.Request) -> Health:
        if not settings.web.health_public:
            require_key(request, ctx.api_keys)
        return Health.of(ctx.status())

    for sub in SUB_PAGES:  # the pages live at /kiosk/ and /admin/: a link without the slash works too
        api.add_api_route(sub, _redirect_to(sub + "/"), include_in_schema=False)

    reconnect = _scripts("kiosk.js")
    css = [ASSETS / "quartet.css"]
    # one throttle for every page; on when the settings file or the admin page (at this start) has people
    on = bool(settings.web.users) or ctx.people.any_people()
    made, must_change = ctx.people.login_hash, ctx.people.must_change
    logins = PageLogins(settings.web.users, made=made, must_change=must_change) if on else None
    ctx.people.logins_on = on
    password_routes.add(api, ctx.people)
    download_routes.add(api, ctx.downloads, holds=ctx.admin.sessions.holds)  # before the pages take "/"
    if logins:
        ctx.people.on_end.append(logins.end)
    mount = functools.partial(_mount, api, ctx, logins=logins)
    mount(kiosk.build(ctx), "/kiosk", footer_links=[], css_paths=[*css, ASSETS / "kiosk.css"], js=reconnect)
    restore_mb = ctx.settings.backup.max_upload_mb  # a backup holds every document: more than one may be
    admin = admin_page.build(ctx.admin, ctx.people, ctx.status)
    mount(admin, "/admin", footer_links=[], css_paths=css, max_file_bytes=restore_mb * 2**20, js=reconnect)
    mount(page.build(ctx), "", footer_links=["api"], css_paths=css, js=_scripts("kiosk.js", "quartet.js"))
    return api


def _scripts(*names: str) -> str:
    """The page's `js`: the named assets/ scripts (each a function of no arguments), run in turn at load."""
    each = ", ".join(f"({(ASSETS / name).read_text(encoding='utf-8').strip()})" for name in names)
    return f"() => {{ [{each}].forEach((run) => run()); }}"


# Gradio's queue loop looks for work every 1 ms and for progress to send every 10 ms when it has none
# (gradio/queueing.py `sleep_when_free`): three mounted pages kept an idle appliance's web thread at 0.1 of
# a core. An event waits at most these many seconds more to start, nothing beside a model's answer.
QUEUE_IDLE_S = 0.02
PROGRESS_IDLE_S = 0.05


def _calm_queue(blocks: gr.Blocks) -> None:
    """The page's queue polls at QUEUE_IDLE_S and PROGRESS_IDLE_S when idle (no-ops if Gradio renames them)."""
    queue = getattr(blocks, "_queue", None)
    for name, seconds in (("sleep_when_free", QUEUE_IDLE_S), ("progress_update_sleep_when_free", PROGRESS_IDLE_S)):
        if queue is not None and hasattr(queue, name):
            setattr(queue, name, seconds)


def _mount(
    api: fastapi.FastAPI,
    ctx: AppContext,
    blocks: gr.Blocks,
    path: str,
    *,
    logins: PageLogins | None,
    footer_links: list[str],
    css_paths: list[Path],
    js: str | None = None,
    max_file_bytes: int | None = None,
) -> None:
    """Mount one page with the same guard as every other.

    Gradio checks that a file a client names (FileData `path`) was uploaded through this app only once
    `blocks.has_launched` is set, which `launch()` does and `mount_gradio_app` does not: without it a
    client could hand any server path (`/etc/passwd`, `/dev/zero`) to an endpoint that takes a file, and
    Gradio would copy it into its cache. Each mounted page is therefore marked as launched, so that every
    file input is refused unless it lies in Gradio's upload folder — for every endpoint at once."""
    blocks.queue(default_concurrency_limit=1)
    gr.mount_gradio_app(
        api,
        blocks,
        path=path,
        auth=logins.check if logins else None,
        max_file_size=max_file_bytes or ctx.settings.knowledge.max_file_bytes,
        server_name=ctx.settings.web.host,
        server_port=ctx.settings.web.port,
        show_error=True,
        ssr_mode=False,
        footer_links=footer_links,
        css_paths=css_paths,
        js=js,
        app_kwargs={"openapi_url": None} if logins else {},  # Gradio's /openapi.json would need no login
    )
    blocks.has_launched = True
    _calm_queue(blocks)
    _name_refused_files(blocks)
    if logins:  # its sessions, which a person's removal ends
        mounted = (getattr(route, "app", None) for route in api.routes)
        logins.follow(next(app for app in mounted if getattr(app, "blocks", None) is blocks))


_NOT_MOVED = re.compile(r"Cannot move (.+?) to the gradio cache dir")


def _name_refused_files(blocks: gr.Blocks) -> None:
    """A file Gradio refuses (not uploaded to this app) is named by its file name only: Gradio's own
    message shows the path it made of it, the install folder included ("Cannot move /opt/quartet/file:/etc/passwd")."""
    checked = blocks.preprocess_data

    async def preprocess_data(*args: Any, **kwargs: Any) -> Any:
        try:
            return await checked(*args, **kwargs)
        except InvalidPathError as err:
            found = _NOT_MOVED.search(str(err))
            name = Path(found.group(1)).name if found else "that file"
            refused = Refused(f"{name} was not uploaded to this app: only an upload can be given here")
            raise for_person(refused) from None

    blocks.preprocess_data = preprocess_data  # type: ignore[method-assign]


def _redirect_to(target: str) -> Any:
    def redirect() -> RedirectResponse:
        return RedirectResponse(target, status_code=308)

    return redirect


# A `file=` value that names a URL rather than a file of this app (Gradio streams http(s) URLs there).
_REMOTE = re.compile(r"/file=\s*(?:[a-z][a-z0-9+.-]*:|//|\\\\)", re.IGNORECASE)


class NoRemoteFiles:
    """Refuses `…/file=<URL>` on every mounted page: Gradio would fetch any public address for whoever
    asks, and nothing leaves the box. The path is matched as the server decoded it (`%3A` is `:`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _REMOTE.search(scope.get("path", "")):
            refusal = JSONResponse(
                {"detail": "this server does not fetch addresses: file= serves only this app's own files"},
                status_code=403,
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """Adds the Content-Security-Policy (and no-sniff, referrer) to every HTTP response, streams included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "no-referrer"
            await send(message)

        await self.app(scope, receive, with_headers)


def _mount_openai(api: fastapi.FastAPI, ctx: AppContext) -> None:
    api.include_router(build_router(ctx))
    errors.close_prefix(api)  # after /v1's routes, before the pages mounted at /
    errors.install(api)  # every QuartetError a route raises, in OpenAI's shape


def end_page_streams(server: uvicorn.Server) -> None:
    """End every open page's heartbeat stream, as Gradio's own `close()` does before it stops its server: an
    open page holds that stream to the end, and uvicorn's stop waits for it to its grace (4.4 s with one page
    open, every stop). Each mounted page's stream waits on its app's `stop_event`; set from this thread, it
    lands on the web loop's next tick (uvicorn wakes every 0.1 s)."""
    for route in getattr(server.config.app, "routes", ()):
        event = getattr(getattr(route, "app", None), "stop_event", None)
        if isinstance(event, asyncio.Event):
            event.set()


def make_server(ctx: AppContext) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(ctx),
        host=ctx.settings.web.host,
        port=ctx.settings.web.port,
        log_level="warning",
        timeout_graceful_shutdown=3,  # open pages' streams are ended first (end_page_streams)
    )
    return uvicorn.Server(config)
