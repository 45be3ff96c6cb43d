"""The Chat tab: streaming answers, Stop, Regenerate, New chat, saved conversations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.chat.service import ChatUpdate
from app.context import AppContext
from app.ui import display
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE, OnLoad


def build(ctx: AppContext) -> OnLoad:
    chat = ctx.chat
    conversation = gr.BrowserState(None, storage_key="quartet-conversation")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=220):
            new_chat = gr.Button("New chat", elem_id="new-chat")
            picker = gr.Radio(label="Conversations", choices=_choices(ctx), elem_id="conversations")
        with gr.Column(scale=4):
            with gr.Accordion("System prompt", open=False, elem_id="system-prompt-box"):
                system = gr.Textbox(ctx.settings.system_prompt, lines=3, show_label=False, elem_id="system-prompt")
            bubbles = gr.Chatbot(
                height=520, elem_id="chatbot", buttons=["copy"], feedback_options=None, show_label=False
            )
            line = gr.Markdown(elem_id="chat-status")
            with gr.Row():
                box = gr.Textbox(
                    placeholder="Message Quartet…", show_label=False, scale=6, lines=1, max_lines=8,
                    elem_id="chat-input",
                )
                send = gr.Button("Send", variant="primary", scale=1, elem_id="send")
                stop = gr.Button("Stop", variant="stop", scale=1, elem_id="stop")
                regenerate = gr.Button("Regenerate", scale=1, elem_id="regenerate")

    def stream(updates: Iterator[ChatUpdate], cid: str) -> Iterator[tuple[Any, ...]]:
        history = chat.store.messages(cid)
        for update in display.throttle(updates, ctx.settings.ui_updates_per_s):
            if update.done:
                history = chat.store.messages(cid)
            yield display.bubbles(history, update), display.waiting_line(update), cid, gr.update()

    def on_send(text: str, cid: str | None, prompt: str, request: gr.Request) -> Iterator[tuple[Any, ...]]:
        if not text.strip():
            raise gr.Error("Type a message first.")
        cid = _conversation(ctx, cid, prompt)
        updates = chat.send(cid, text, owner=request.session_hash or "anon")
        yield display.bubbles(chat.store.messages(cid)), "", cid, ""
        yield from stream(updates, cid)

    def on_regenerate(cid: str | None, request: gr.Request) -> Iterator[tuple[Any, ...]]:
        if not cid:
            raise gr.Error("There is no answer to regenerate yet.")
        try:
            updates = chat.regenerate(cid, owner=request.session_hash or "anon")
        except ValueError as err:
            raise gr.Error(str(err)) from err
        yield from stream(updates, cid)

    def on_stop(request: gr.Request) -> None:
        chat.stop(request.session_hash or "anon")

    def on_pick(cid: str | None) -> tuple[Any, ...]:
        found = chat.store.get(cid) if cid else None
        if found is None:
            return [], ctx.settings.system_prompt, None, gr.update(choices=_choices(ctx), value=None)
        return (
            display.bubbles(chat.store.messages(found.id)),
            found.system_prompt,
            found.id,
            gr.update(choices=_choices(ctx), value=found.id),
        )

    def on_new() -> tuple[Any, ...]:
        return [], "", None, ctx.settings.system_prompt, gr.update(value=None)

    engine_bound: dict[str, Any] = {"concurrency_limit": ENGINE_LISTENERS, "concurrency_id": ENGINE_QUEUE}
    outputs = [bubbles, line, conversation, box]
    sent = gr.on(
        [send.click, box.submit], on_send, [box, conversation, system], outputs, api_visibility="private",
        **engine_bound,
    )
    sent.then(lambda cid: gr.update(choices=_choices(ctx), value=cid), conversation, picker, queue=False,
              api_visibility="private")
    regenerate.click(on_regenerate, conversation, outputs, api_visibility="private", **engine_bound)
    stop.click(on_stop, None, None, queue=False, api_visibility="private")
    picker.input(on_pick, picker, [bubbles, system, conversation, picker], queue=False, api_visibility="private")
    new_chat.click(on_new, None, [bubbles, line, conversation, system, picker], queue=False, api_visibility="private")
    return OnLoad(on_pick, [conversation], [bubbles, system, conversation, picker])


def _conversation(ctx: AppContext, cid: str | None, prompt: str) -> str:
    found = ctx.chat.store.get(cid) if cid else None
    if found is None:
        return ctx.chat.store.create(prompt)
    if prompt != found.system_prompt:
        ctx.chat.store.set_system_prompt(found.id, prompt)
    return found.id


def _choices(ctx: AppContext) -> list[tuple[str, str]]:
    return [(c.title, c.id) for c in ctx.chat.store.recent()]
