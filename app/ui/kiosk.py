"""The kiosk page (/kiosk) for the touchscreen on the box: large type, the cards, chat — nothing else."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from app.ui import chat_tab, panels

_EVERY_S = 2.0


def build(ctx: AppContext) -> gr.Blocks:
    with gr.Blocks(title="Quartet", analytics_enabled=False) as page:
        strip = gr.HTML(panels.card_strip(ctx.status(), compact=True), elem_id="kiosk-cards")
        load = chat_tab.build(ctx)
        timer = gr.Timer(_EVERY_S)
        timer.tick(
            lambda: panels.card_strip(ctx.status(), compact=True), None, strip, queue=False, api_visibility="private"
        )
        page.load(load.fn, load.inputs, load.outputs, queue=False, api_visibility="private")
    return page
