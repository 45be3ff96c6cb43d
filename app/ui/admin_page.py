"""The admin page (/admin): log in (Enter works), see the catalog and whether each model fits, switch
models, change engine settings and cards, people and API keys, take and restore backups, read the logs
and the admin log.
Not linked from the user pages; every step checks the session's token on the server, the catalog and
log included. Long actions run as jobs of the admin service; a timer shows their progress, the engine's
state and the cards live."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd

from app.admin import AdminDenied, AdminService
from app.errors import Refused
from app.people_admin import PeopleAdmin
from app.telemetry.views import ApplianceStatus, LoadRow
from app.ui import admin_backup, admin_people, panels
from app.ui.callers import acted_from, login_of, throttle_key
from app.ui.errors import explained

_EVERY_S = 1.0
# What each catalog column means to a person, in the order they read it; the reason a model cannot load
# comes early, where it is seen.
_CATALOG = {
    "name": "Model",
    "fits": "Fits",
    "problem": "Why it cannot load",
    "loaded": "Loaded",
    "size_gib": "Size (GiB)",
    "need_gib_per_card": "Needs per card (GiB)",
    "layers": "Layers",
    "quant": "Quantisation",
    "n_ctx": "Context",
    "kv_type": "KV cache",
    "arch": "Architecture",
    "file": "File",
}
# Their widths: at 1280×800 the table fits the page and no header breaks inside a word ("Load/ed").
_WIDTHS: list[str | int] = ["9%", "5%", "17%", "6%", "6%", "8%", "6%", "10%", "7%", "6%", "10%", "10%"]
# The engine settings row, in the order of its fields (the cards' endpoints follow them).
_SETTINGS = ["n_ctx", "n_threads", "n_batch", "n_ubatch", "kv_type", "tensor_split", "parallel", "background_slots"]


def build(admin: AdminService, people: PeopleAdmin, status: Callable[[], ApplianceStatus]) -> gr.Blocks:
    """`status()` gives the appliance's status (engine and cards) for the live panel."""
    with gr.Blocks(title="Quartet admin", analytics_enabled=False) as page:
        token, job = gr.State(None), gr.State(None)
        gr.Markdown("## Quartet admin", elem_id="q-header")  # where the offline banner shows (assets/kiosk.js)
        with gr.Column(visible=True) as login_box:
            name = gr.Textbox(label="Name (empty: the admin password of the settings)", elem_id="admin-name")
            password = gr.Textbox(label="Admin password", type="password", elem_id="admin-password")
            enter = gr.Button("Log in", variant="primary", elem_id="admin-login")
        with gr.Column(visible=False) as admin_box:
            live = gr.HTML(elem_id="admin-status")
            with gr.Row():
                choice = gr.Dropdown(label="Model", choices=[], elem_id="model-choice", scale=3)
                confirm = gr.Checkbox(label="Switch now: running answers stop, new ones wait", elem_id="confirm")
                switch_button = gr.Button("Switch model", variant="primary", elem_id="switch")
            result = gr.Markdown(elem_id="switch-result")
            table = gr.Dataframe(
                headers=list(_CATALOG.values()), interactive=False, wrap=True, column_widths=_WIDTHS, elem_id="catalog"
            )
            with gr.Accordion("Engine settings", open=False):
                with gr.Row():
                    n_ctx = gr.Number(label="context", precision=0)
                    n_threads = gr.Number(label="threads", precision=0)
                    n_batch = gr.Number(label="batch", precision=0)
                    n_ubatch = gr.Number(label="micro-batch", precision=0)
                    kv_type = gr.Dropdown(["f16", "q8_0", "q4_0"], label="KV cache")
                    split = gr.Textbox(
                        label="tensor split (share per card; empty: by free memory)", elem_id="tensor-split"
                    )
                with gr.Row():
                    parallel = gr.Number(
                        label="answers at once (parallel; each holds its context's KV cache on the cards)",
                        precision=0,
                        minimum=1,
                        elem_id="parallel",
                    )
                    background = gr.Number(
                        label="slots background work may take", precision=0, minimum=1, elem_id="background-slots"
                    )
                apply = gr.Button("Apply and reload", elem_id="apply-settings")
                origins = gr.Markdown(elem_id="settings-origins")
            with gr.Accordion("Cards", open=False):
                endpoints = gr.Textbox(
                    lines=4,
                    elem_id="card-endpoints",
                    label="Card endpoints (host:port, one per line; loopback or the internal link)",
                )
                with gr.Row():
                    ping = gr.Button("Ping", elem_id="ping-cards")
                    use = gr.Button("Use these cards and reload", elem_id="set-cards")
                    restart = gr.Button("Restart engine", elem_id="restart-engine")
                pings = gr.Dataframe(interactive=False, label="Ping", elem_id="pings")
                gr.Markdown(
                    "Changes made here (cards, engine settings, the model) are kept for the next start in the "
                    "data folder's `admin-settings.toml`; the environment and the settings file (QUARTET_CONFIG) "
                    "come first, and the engine settings say where each value comes from."
                )
            shown_people, people_actions = admin_people.add(people, token)
            admin_backup.add(admin, token)
            history = gr.Dataframe(interactive=False, label="Admin log", elem_id="admin-log")
        timer = gr.Timer(_EVERY_S, active=False)
        ticket = gr.Textbox(visible=False)

        def who(request: gr.Request) -> str:
            return acted_from(request)

        def overview(key: str | None) -> tuple[Any, ...]:
            """Catalog, log and model choices: for the admin only (the service checks the token)."""
            rows, log = admin.catalog_view(key), admin.log(key)
            catalog = pd.DataFrame(
                [{label: _cell(row.get(k)) for k, label in _CATALOG.items()} for row in rows],
                columns=list(_CATALOG.values()),
            )
            return catalog, _log_frame(log), gr.update(choices=[(row["name"], row["id"]) for row in rows])

        @explained
        def on_login(login_name: str, secret: str, request: gr.Request) -> tuple[Any, ...]:
            opened = admin.login(
                secret, who=who(request), client=throttle_key(request), name=login_name, login=login_of(request)
            )
            current = admin.engine_settings(opened)
            shown = [current[name] for name in _SETTINGS] + [current["cards"], _origins(current["sources"])]
            return (
                opened,
                "",
                gr.Timer(active=True),
                _live(status()),
                *overview(opened),
                *shown,
            )

        @explained
        def on_tick(key: str | None, job_id: str | None) -> tuple[Any, ...]:
            try:
                job_now = admin.job(key, job_id)
            except AdminDenied:
                return gr.update(), gr.update(), None, gr.update(), gr.update(), gr.update()
            now = status()
            if job_now is None:
                return _live(now), gr.update(), None, gr.update(), gr.update(), gr.update()
            if job_now.state == "running":
                shown = _progress(job_now.name, now.message, admin.load_progress())
                return _live(now), shown, job_id, gr.update(), gr.update(), gr.update()
            return _live(now), job_now.text, None, *overview(key)

        def started(key: str | None, name: str, action: Any, request: gr.Request) -> tuple[str, str]:
            job_now = admin.start(key, name, action, who=who(request))  # refused while another runs (logged)
            return job_now.id, f"⏳ {name}…"

        @explained
        def on_switch(key: str | None, model: str | None, confirmed: bool, request: gr.Request) -> tuple[str, str]:
            if not confirmed or not model:
                raise Refused("Choose a model and tick the confirmation first.")
            return started(key, f"switch to {model}", lambda: admin.switch_model(key, model, who=who(request)), request)

        @explained
        def on_apply(
            key: str | None,
            context: float | None,
            threads: float | None,
            batch: float | None,
            ubatch: float | None,
            kv: str,
            shares: str,
            slots: float | None,
            background_slots: float | None,
            request: gr.Request,
        ) -> tuple[str, str]:
            changes = {
                "n_ctx": context,
                "n_threads": threads,
                "n_batch": batch,
                "n_ubatch": ubatch,
                "kv_type": kv,
                "tensor_split": shares,
                "parallel": slots,
                "background_slots": background_slots,
            }  # the admin service checks each one
            return started(
                key, "engine settings", lambda: admin.apply_settings(key, changes, who=who(request)), request
            )

        @explained
        def on_cards(key: str | None, text: str, request: gr.Request) -> tuple[str, str]:
            return started(key, "card change", lambda: admin.set_cards(key, _listed(text), who=who(request)), request)

        @explained
        def on_restart(key: str | None, request: gr.Request) -> tuple[str, str]:
            return started(key, "engine restart", lambda: admin.restart_engine(key, who=who(request)), request)

        @explained
        def on_ping(key: str | None, text: str) -> pd.DataFrame:
            return pd.DataFrame(admin.ping(key, _listed(text)))

        quiet: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
        settings = [n_ctx, n_threads, n_batch, n_ubatch, kv_type, split, parallel, background]
        fields = [*settings, endpoints, origins]
        # the form is filled while it is still hidden, and shown after: a value the admin types at once is
        # never replaced by the login's (it was, when both came in one update)
        logged_in = gr.on(
            [enter.click, password.submit],
            on_login,
            [name, password],
            [token, password, timer, live, table, history, choice, *fields],
            **quiet,
        )
        logged_in.success(
            lambda: (gr.update(visible=False), gr.update(visible=True)), None, [login_box, admin_box], **quiet
        )
        logged_in.success(explained(lambda key: admin_people.filled(people, key)), token, shown_people, **quiet)
        logged_in.success(explained(admin.upload_ticket), token, ticket, **quiet).then(
            None, ticket, None, js=admin_people.ticket_script(), **quiet
        )
        for action in people_actions:  # each is in the admin log: the page shows it at once
            action.success(explained(lambda key: pd.DataFrame(admin.log(key))), token, history, **quiet)
        timer.tick(on_tick, [token, job], [live, result, job, table, history, choice], **quiet)
        switch_button.click(on_switch, [token, choice, confirm], [job, result], **quiet)
        apply.click(on_apply, [token, *settings], [job, result], **quiet)
        use.click(on_cards, [token, endpoints], [job, result], **quiet)
        restart.click(on_restart, token, [job, result], **quiet)
        ping.click(on_ping, [token, endpoints], pings, **quiet)
    return page


def _live(status: ApplianceStatus) -> str:
    return panels.overall(status) + panels.card_strip(status, compact=True)


def _progress(job: str, message: str, rows: list[LoadRow]) -> str:
    """'⏳ engine restart: loading…' then 'card 1 (…): 180 MiB of ≈250 MiB (72 %)': the job by its name on every
    tick, never more loaded than the total (the service corrects its estimate by what a card gained), in a unit
    that shows a small model's share."""
    lines = [f"⏳ {job}: {message}"]
    for row in rows:
        if row.pct is None or row.loaded_bytes is None or row.expected_bytes is None:
            lines.append(f"- card {row.card} ({row.endpoint}): no memory reading")
            continue
        got, total = _size(row.loaded_bytes), _size(row.expected_bytes)
        lines.append(f"- card {row.card} ({row.endpoint}): {got} of ≈{total} ({row.pct} %)")
    return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _log_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The admin log as people read it: when, who, what, the outcome in words (not the stored 1/0)."""
    outcome = {1: "✓ done", 0: "✗ refused or failed"}
    shown = [
        {
            "When": r["at"],
            "Who": r["who"],
            "Action": r["action"],
            "Outcome": outcome[int(r["ok"])],
            "Detail": r["detail"],
        }
        for r in rows
    ]
    return pd.DataFrame(shown, columns=["When", "Who", "Action", "Outcome", "Detail"])


def _origins(sources: dict[str, str]) -> str:
    return "Where each value comes from (kept for the next start unless overridden):\n" + "\n".join(
        f"- `{name}`: {where}" for name, where in sources.items()
    )


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else value


def _listed(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]
