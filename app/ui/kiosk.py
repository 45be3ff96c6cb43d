"""The kiosk page (/kiosk) for the touchscreen on the box: large type, the model and engine state, the
cards, chat with the kiosk's own conversations — nothing else."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from app.ui import chat_tab, display, panels
from app.ui.callers import Owners
from app.ui.wiring import QUIET

_EVERY_S = 2.0


def build(ctx: AppContext) -> gr.Blocks:
    with gr.Blocks(title="Quartet", analytics_enabled=False) as page:
        # both filled by the page's load: what the page was built with is the boot state
        strip = gr.HTML("", elem_id="kiosk-cards")
        header = gr.HTML(display.BEFORE_LOAD, elem_id="q-header")
        load = chat_tab.build(
            ctx.chat,
            Owners(ctx.people.owner_of_login),
            default_prompt=ctx.settings.web.system_prompt,
            updates_per_s=ctx.settings.web.ui_updates_per_s,
            identity_key="quartet-kiosk",
            secret=ctx.browser_secret,
        )
        timer = gr.Timer(_EVERY_S)

        def now() -> tuple[str, str]:
            status = ctx.status()
            return display.header_html(status), panels.card_strip(status, compact=True)

        timer.tick(now, None, [header, strip], **QUIET)
        page.load(load.fn, load.inputs, load.outputs, **QUIET)
        page.load(now, None, [header, strip], **QUIET)
    return page
