"""The whole page: header (model and cards), one tab per module, and the named API endpoints."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from app.ui import api_endpoints, cards_tab, chat_tab, display

_HEADER_EVERY_S = 2.0


def build(ctx: AppContext) -> gr.Blocks:
    with gr.Blocks(title="Quartet", analytics_enabled=False) as page:
        header = gr.HTML(display.header_html(ctx.status()), elem_id="q-header")
        with gr.Tabs():
            with gr.Tab("Chat", id="chat") as chat:
                loads = [chat_tab.build(ctx)]
            with gr.Tab("Cards", id="cards") as cards:
                cards_timer = cards_tab.build(ctx)
        api_endpoints.register(ctx)
        timer = gr.Timer(_HEADER_EVERY_S)
        timer.tick(lambda: display.header_html(ctx.status()), None, header, queue=False, api_visibility="private")
        # the Cards tab's plots only refresh while it is shown
        cards.select(lambda: gr.Timer(active=True), None, cards_timer, queue=False, api_visibility="private")
        chat.select(lambda: gr.Timer(active=False), None, cards_timer, queue=False, api_visibility="private")
        for load in loads:
            page.load(load.fn, load.inputs, load.outputs, queue=False, api_visibility="private")
    return page
