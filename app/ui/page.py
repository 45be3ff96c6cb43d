"""The whole page: header (model and cards), one tab per module, and the named API endpoints."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from app.ui import (
    admin_api,
    cards_api,
    cards_tab,
    chat_api,
    chat_tab,
    display,
    documents_api,
    documents_tab,
    extraction_api,
    extraction_tab,
    my_keys,
    people_api,
)
from app.ui.callers import Owners
from app.ui.wiring import QUIET

_HEADER_EVERY_S = 2.0


def build(ctx: AppContext) -> gr.Blocks:
    owners = Owners(ctx.people.owner_of_login)  # whose rows a login's are: a person's stable id
    with gr.Blocks(title="Quartet", analytics_enabled=False) as page:
        # empty until the page's load fills it: what the page was built with is the boot state ("loading")
        header = gr.HTML(display.BEFORE_LOAD, elem_id="q-header")
        with gr.Tabs():
            with gr.Tab("Chat", id="chat") as chat:
                loads = [
                    chat_tab.build(
                        ctx.chat,
                        owners,
                        default_prompt=ctx.settings.web.system_prompt,
                        updates_per_s=ctx.settings.web.ui_updates_per_s,
                        identity_key="quartet-browser",
                        secret=ctx.browser_secret,
                    )
                ]
            with gr.Tab("Documents", id="documents") as documents:
                documents_timer, documents_now = documents_tab.build(
                    ctx.knowledge,
                    ctx.answerer,
                    ctx.summariser,
                    owners,
                    max_upload_bytes=ctx.settings.knowledge.max_file_bytes,
                )
            with gr.Tab("Extraction", id="extraction") as extraction:
                extraction_timer, extraction_now = extraction_tab.build(ctx.extraction, owners)
            with gr.Tab("Cards", id="cards") as cards:
                cards_timers, cards_now = cards_tab.build(ctx.telemetry)
            if ctx.people.logins_on:  # a person's own keys: only where people log in
                with gr.Tab("My API keys", id="keys") as keys:
                    my_keys.build(ctx.people, keys)
        chat_api.register(ctx.chat, owners, updates_per_s=ctx.settings.web.ui_updates_per_s)
        documents_api.register(ctx.knowledge, ctx.answerer, ctx.summariser, ctx.admin, owners)
        extraction_api.register(ctx.extraction, owners)
        cards_api.register(ctx.telemetry)
        admin_api.register(ctx.admin)
        people_api.register(ctx.people)
        my_keys.register(ctx.people)
        timer = gr.Timer(_HEADER_EVERY_S)
        timer.tick(lambda: display.header_html(ctx.status()), None, header, **QUIET)
        # a tab's timer only runs while the tab is shown
        timers = {chat: [], documents: [documents_timer], extraction: [extraction_timer], cards: cards_timers}
        every = [timer for shown in timers.values() for timer in shown]
        for tab in timers:
            tab.select(
                lambda shown=timers[tab]: [gr.Timer(active=any(t is s for s in shown)) for t in every],
                None,
                every,
                **QUIET,
            )
        # a tab as it is now, at once when shown (its timer's first tick comes a second or two later)
        for tab, now in ((documents, documents_now), (extraction, extraction_now), (cards, cards_now)):
            tab.select(now.fn, now.inputs, now.outputs, **QUIET)
        for load in [*loads, cards_now]:
            page.load(load.fn, load.inputs, load.outputs, **QUIET)
        # the header as it is now, not as it was when the page was built (at boot: "no model · loading")
        page.load(lambda: display.header_html(ctx.status()), None, header, **QUIET)
    return page
