"""The admin page (/admin): log in, see the catalog and whether each model fits, switch models,
change engine settings, read the admin log. Not linked from the user pages; every action is
checked by the admin service on the server with the session's token."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import gradio as gr
import pandas as pd

from app.admin import AdminDenied
from app.context import AppContext
from app.engine.events import EngineError
from app.ui import panels
from app.ui.callers import client_address

_CATALOG_COLUMNS = ["id", "name", "file", "present", "size_gib", "arch", "layers", "quant", "n_ctx", "kv_type",
                    "need_gib_per_card", "fits", "loaded", "problem"]


def build(ctx: AppContext) -> gr.Blocks:
    admin = ctx.admin
    with gr.Blocks(title="Quartet admin", analytics_enabled=False) as page:
        token = gr.State(None)
        gr.Markdown("## Quartet admin")
        with gr.Column(visible=True) as door:
            password = gr.Textbox(label="Admin password", type="password", elem_id="admin-password")
            enter = gr.Button("Log in", variant="primary", elem_id="admin-login")
        with gr.Column(visible=False) as room:
            status = gr.HTML(elem_id="admin-status")
            table = gr.Dataframe(headers=_CATALOG_COLUMNS, interactive=False, wrap=True, elem_id="catalog")
            with gr.Row():
                choice = gr.Dropdown(label="Model", choices=[], elem_id="model-choice")
                sure = gr.Checkbox(label="Switch now: running answers stop, new ones wait", elem_id="confirm")
                go = gr.Button("Switch model", variant="primary", elem_id="switch")
            result = gr.Markdown(elem_id="switch-result")
            with gr.Accordion("Engine settings", open=False):
                with gr.Row():
                    n_ctx = gr.Number(ctx.engine.config.n_ctx, label="context", precision=0)
                    n_threads = gr.Number(ctx.engine.config.n_threads, label="threads", precision=0)
                    n_batch = gr.Number(ctx.engine.config.n_batch, label="batch", precision=0)
                    n_ubatch = gr.Number(ctx.engine.config.n_ubatch, label="micro-batch", precision=0)
                    kv_type = gr.Dropdown(["f16", "q8_0", "q4_0"], value=ctx.engine.config.kv_type, label="KV cache")
                    split = gr.Textbox(", ".join(f"{v:g}" for v in ctx.engine.config.tensor_split or ()),
                                       label="tensor split (share per card; empty: by free memory)",
                                       elem_id="tensor-split")
                apply = gr.Button("Apply and reload", elem_id="apply-settings")
            with gr.Accordion("Cards", open=False):
                endpoints = gr.Textbox("\n".join(ctx.engine.config.cards), lines=4, elem_id="card-endpoints",
                                       label="Card endpoints (host:port, one per line; loopback or the internal link)")
                with gr.Row():
                    ping = gr.Button("Ping", elem_id="ping-cards")
                    use = gr.Button("Use these cards and reload", elem_id="set-cards")
                    restart = gr.Button("Restart engine", elem_id="restart-engine")
                pings = gr.Dataframe(interactive=False, label="Ping", elem_id="pings")
                gr.Markdown("Changes last until the app restarts; to keep them, set `cards` in the settings file.")
            history = gr.Dataframe(interactive=False, label="Admin log", elem_id="admin-log")

        def who(request: gr.Request) -> str:
            return f"web {client_address(request)}"

        def refresh(key: str | None) -> tuple[Any, ...]:
            """Every step of this page checks the session: the catalog and log are for the admin only."""
            try:
                catalog, log = admin.catalog_view(key), admin.log(key)
            except AdminDenied as err:
                raise gr.Error(str(err)) from err
            return (
                panels.overall(ctx.status()) + panels.card_strip(ctx.status(), compact=True),
                pd.DataFrame(catalog, columns=_CATALOG_COLUMNS),
                pd.DataFrame(log),
                gr.update(choices=[row["id"] for row in catalog]),
            )

        def on_login(secret: str, request: gr.Request) -> tuple[Any, ...]:
            try:
                opened = admin.login(secret, who=who(request), client=client_address(request))
            except AdminDenied as err:
                raise gr.Error(str(err)) from err
            return opened, gr.update(visible=False), gr.update(visible=True), "", *refresh(opened)

        def run(action: Any) -> Iterator[str]:
            outcome: dict[str, str] = {}

            def work() -> None:
                try:
                    info = action()
                    outcome["text"] = f"✅ {info.name} loaded in {info.load_s:.1f} s"
                except (EngineError, AdminDenied) as err:
                    outcome["text"] = f"⚠ {err}"

            worker = threading.Thread(target=work, daemon=True)
            worker.start()
            while worker.is_alive():
                lines = [f"⏳ {ctx.status()['message']}"]
                for card in admin.load_progress():
                    lines.append(
                        f"- card {card['card']} ({card['endpoint']}): no memory reading" if card["pct"] is None else
                        f"- card {card['card']} ({card['endpoint']}): {card['loaded_gib']} of ≈{card['expected_gib']} "
                        f"GiB ({card['pct']} %)"
                    )
                yield "\n".join(lines)
                time.sleep(0.5)
            yield outcome["text"]

        def on_switch(key: str | None, model: str | None, confirmed: bool, request: gr.Request) -> Iterator[str]:
            if not confirmed or not model:
                raise gr.Error("Choose a model and tick the confirmation first.")
            yield from run(lambda: admin.switch_model(key, model, who=who(request)))

        def on_apply(
            key: str | None, context: float, threads: float, batch: float, ubatch: float, kv: str, shares: str,
            request: gr.Request,
        ) -> Iterator[str]:
            changes: dict[str, Any] = {"n_ctx": int(context), "n_threads": int(threads), "n_batch": int(batch),
                                       "n_ubatch": int(ubatch), "kv_type": kv, "tensor_split": shares}
            yield from run(lambda: admin.apply_settings(key, changes, who=who(request)))

        def listed(text: str) -> list[str]:
            return [line.strip() for line in text.splitlines() if line.strip()]

        def on_ping(key: str | None, text: str) -> pd.DataFrame:
            try:
                return pd.DataFrame(admin.ping(key, listed(text)))
            except (EngineError, AdminDenied) as err:
                raise gr.Error(str(err)) from err

        def on_cards(key: str | None, text: str, request: gr.Request) -> Iterator[str]:
            yield from run(lambda: admin.set_cards(key, listed(text), who=who(request)))

        def on_restart(key: str | None, request: gr.Request) -> Iterator[str]:
            yield from run(lambda: admin.restart_engine(key, who=who(request)))

        shown = [status, table, history, choice]
        ping.click(on_ping, [token, endpoints], pings, api_visibility="private", show_progress="hidden")
        use.click(on_cards, [token, endpoints], result, api_visibility="private").then(
            refresh, token, shown, api_visibility="private"
        )
        restart.click(on_restart, token, result, api_visibility="private").then(
            refresh, token, shown, api_visibility="private"
        )
        gr.on(
            [enter.click, password.submit], on_login, password, [token, door, room, password, *shown],
            api_visibility="private", show_progress="hidden",
        )
        go.click(on_switch, [token, choice, sure], result, api_visibility="private").then(
            refresh, token, shown, api_visibility="private"
        )
        apply.click(on_apply, [token, n_ctx, n_threads, n_batch, n_ubatch, kv_type, split], result,
                    api_visibility="private").then(refresh, token, shown, api_visibility="private")
    return page
