"""The Chat tab: the transcript fills the window with the composer pinned below it; Send turns into Stop
while an answer streams; conversations are the browser's own (or the login's), listed in a drawer on a
phone, searchable, renamable, deletable and exportable. Handlers call the chat service only."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.chat.service import ChatService, ChatUpdate
from app.chat.store import Conversation
from app.errors import Refused
from app.ui import chat_parts, display
from app.ui.callers import UNKNOWN_PAGE, Owners, session_of
from app.ui.chat_parts import owned, owned_id, renaming
from app.ui.errors import explained
from app.ui.rendering import LATEX
from app.ui.screens import Screens
from app.ui.wiring import ENGINE_BOUND, MAY_REFUSE, QUIET, OnLoad


def build(
    chat: ChatService, owners: Owners, *, default_prompt: str, updates_per_s: float, identity_key: str, secret: str
) -> OnLoad:
    page_owner = owners.page_owner  # whose: the login's (a person's stable id), else the browser's
    # a random id: whose conversations these are; sealed with a key that outlives a restart (browser_secret.py)
    browser = gr.BrowserState(None, storage_key=identity_key, secret=secret)
    conversation = gr.BrowserState(None, storage_key=f"{identity_key}-conversation", secret=secret)
    drawer_open = gr.State(False)
    recheck = gr.Timer(1.0, active=False)  # an answer written elsewhere (a reload) or lost with a card: look again
    with gr.Row(equal_height=False, elem_id="chat-layout"):
        with gr.Column(scale=1, min_width=240, elem_id="chat-list") as listing:
            new_chat = gr.Button("+ New chat", elem_id="new-chat")
            search = gr.Textbox(placeholder="Search chats…", show_label=False, elem_id="chat-search")
            picker = gr.Radio(label="Conversations", choices=[], elem_id="conversations")
            with gr.Accordion("This chat", open=False, elem_id="chat-manage"):
                # the current title is the placeholder, never the value: what is typed here is only ever the
                # user's (an update landing after an answer, or as it starts, replaced a title being typed)
                title = gr.Textbox(label="Rename to", placeholder="New chat", elem_id="chat-title")
                rename = gr.Button("Rename", elem_id="rename-chat")
                with gr.Row():  # written when asked for, not after every answer
                    as_markdown = gr.Button("Export Markdown", size="sm", elem_id="export-chat-md")
                    as_json = gr.Button("Export JSON", size="sm", elem_id="export-chat-json")
                exported = gr.HTML(visible=False, elem_id="chat-export")  # a link, fetched once
                delete = gr.Button("Delete chat…", elem_id="delete-chat")
                really = gr.Button("Delete it for good", variant="stop", visible=False, elem_id="delete-chat-confirm")
        with gr.Column(scale=4, elem_id="chat-main"):
            with gr.Row(elem_id="chat-top"):
                drawer = gr.Button("☰ Chats", size="sm", scale=0, elem_id="chat-drawer")
                with gr.Accordion("System prompt", open=False, elem_id="system-prompt-box"):
                    system = gr.Textbox(default_prompt, lines=3, show_label=False, elem_id="system-prompt")
            bubbles = gr.Chatbot(elem_id="chatbot", buttons=["copy"], feedback_options=None, show_label=False,
                                 latex_delimiters=LATEX, height="auto", editable="user")  # fmt: skip
            with gr.Row(elem_id="chat-under"):
                line = gr.Markdown(elem_id="chat-status")
                with gr.Row(visible=False, elem_id="versions") as versions:
                    older = gr.Button("‹", size="sm", min_width=40, elem_id="version-older")
                    which = gr.Markdown(elem_id="version-label")
                    newer = gr.Button("›", size="sm", min_width=40, elem_id="version-newer")
            with gr.Row(elem_id="composer"):
                box = gr.Textbox(placeholder="Message Quartet…", show_label=False, scale=6, lines=1, max_lines=8,
                                 elem_id="chat-input")  # fmt: skip
                # off until the page's load says whose page it is (see callers.UNKNOWN_PAGE)
                send = gr.Button("Send", variant="primary", scale=1, min_width=90, interactive=False, elem_id="send")
                stop = gr.Button("Stop", variant="stop", scale=1, min_width=90, visible=False, elem_id="stop")
                regenerate = gr.Button("Regenerate", scale=1, min_width=110, interactive=False, elem_id="regenerate")

    def listed(owner: str, cid: str | None, query: str = "") -> Any:
        if owner == UNKNOWN_PAGE:  # the page's load lists its own when it comes back
            return gr.skip()
        choices = [display.list_entry(c) for c in chat.recent(owner, query=query)]
        value = cid if any(c[1] == cid for c in choices) else None
        return gr.update(choices=choices, value=value, label=display.list_label(query, len(choices)))

    def shown(owner: str, cid: str | None, query: str = "") -> tuple[Any, ...]:
        """Everything the tab shows for one conversation (or none): transcript, prompt, list, title, buttons."""
        found = owned(chat, cid, owner)
        history = chat.history(found.id, owner=owner) if found else []
        return (
            display.bubbles(history, versions=chat.answer_versions(found.id, owner=owner) if found else None),
            found.system_prompt if found else default_prompt,
            found.id if found else None,
            listed(owner, found.id if found else None, query),
            renaming(found.title if found else None),
            gr.update(interactive=display.answered(history)),
            chat_parts.status_line(chat, history),
            *version_view(owner, found),
            chat_parts.recheck(chat, history),
        )

    def version_view(owner: str, found: Conversation | None) -> tuple[Any, str]:
        """‹ 2 of 3 › under the chat when the last answer has been regenerated."""
        ids, active = chat.versions(found.id, owner=owner) if found else ([], None)
        if len(ids) < 2 or active is None:
            return gr.update(visible=False), ""
        return gr.update(visible=True), f"answer {ids.index(active) + 1} of {len(ids)}"

    screens = Screens()  # which conversation each page shows: an answer draws only where it is shown

    def showing(request: gr.Request, view: tuple[Any, ...]) -> tuple[Any, ...]:
        screens.show(session_of(request), view[2])
        return view

    def on_load(browser_id: str | None, cid: str | None, request: gr.Request) -> tuple[Any, ...]:
        browser_id = browser_id or secrets.token_urlsafe(18)
        return browser_id, *showing(request, shown(page_owner(request, browser_id), cid)), gr.update(interactive=True)

    def stream(
        updates: Iterator[ChatUpdate], cid: str, owner: str, page: str, first: tuple[Any, ...] | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """An answer's frames, while its conversation is shown (another one picked: it ends, kept as stopped)."""
        answer = chat_parts.detached(updates)  # goes on if the page goes (a reload picks it up again)

        def frames() -> Iterator[tuple[Any, ...]]:
            try:
                if first is not None:
                    yield first
                history, versions = chat_parts.so_far(chat, cid, owner)
                for update in display.throttle(answer, updates_per_s):
                    if update.done:
                        history, versions = chat_parts.so_far(chat, cid, owner)
                    yield (
                        display.bubbles(history, update, versions),
                        display.waiting_line(update),
                        cid,
                        *[gr.update()] * 3,
                    )
            finally:
                answer.close()  # only this page stops following it

        return screens.frames(page, cid, frames(), gone=(gr.skip(),) * 6)

    @explained
    def on_send(
        text: str, cid: str | None, prompt: str, browser_id: str | None, query: str, request: gr.Request
    ) -> Iterator[tuple[Any, ...]]:
        if not text.strip():
            raise Refused("Type a message first.")
        owner, page = page_owner(request, browser_id), session_of(request)
        if owner == UNKNOWN_PAGE:  # Enter pressed before the page's load came back (Send is off until then)
            raise Refused("The page is still opening: send again in a moment.")
        before = owned_id(chat, cid, owner)
        cid = chat.open(before, owner=owner, system_prompt=prompt)
        updates = chat.send(cid, text, owner=owner, session=page)
        if not screens.claim(page, before, cid):  # another conversation was picked meanwhile
            yield gr.skip(), gr.skip(), gr.skip(), "", gr.skip(), gr.skip()
            getattr(updates, "close", lambda: None)()
            return
        named = owned(chat, cid, owner) if before != cid else None  # a new chat is named by its first question
        title_now = gr.update(placeholder=named.title) if named else gr.skip()
        listed_now = listed(owner, cid, query) if named else gr.skip()  # in the list at once, not after its answer
        history, versions = chat_parts.so_far(chat, cid, owner)
        first = display.bubbles(history, None, versions), "", cid, "", title_now, listed_now
        yield from stream(updates, cid, owner, page, first)

    @explained
    def on_regenerate(cid: str | None, browser_id: str | None, request: gr.Request) -> Iterator[tuple[Any, ...]]:
        owner = page_owner(request, browser_id)
        updates = chat.regenerate(cid or "", owner=owner, session=session_of(request))
        yield from stream(updates, cid or "", owner, session_of(request))

    def busy(streaming: bool) -> tuple[Any, ...]:
        return gr.update(visible=not streaming), gr.update(visible=streaming)

    def settled(cid: str | None, browser_id: str | None, query: str, request: gr.Request) -> tuple[Any, ...]:
        """The view once an answer is over (a new chat's title came as its question was sent), for the chat
        the page shows now: another one picked meanwhile, the answer's last frame named the one it left."""
        owner, cid = page_owner(request, browser_id), screens.shows(session_of(request), cid)
        found = owned(chat, cid, owner)
        history = chat.history(found.id, owner=owner) if found else []
        return (
            cid,
            *busy(False),
            listed(owner, cid, query),
            gr.update(interactive=display.answered(history)),
            *version_view(owner, found),
            chat_parts.status_line(chat, history) if display.lost_engine(history) else gr.skip(),
            chat_parts.recheck(chat, history),
        )

    def on_edit_start(edited: gr.EditData) -> tuple[Any, ...]:
        """Stop for Send; what was edited, kept for the next step (a `.then()` step gets no event data)."""
        index = edited.index if isinstance(edited.index, int) else edited.index[0]
        return *busy(True), (index, str(edited.value))

    @explained
    def on_edit(
        cid: str | None, browser_id: str | None, edited: tuple[int, str] | None, request: gr.Request
    ) -> Iterator[tuple[Any, ...]]:
        owner = page_owner(request, browser_id)
        found = owned(chat, cid, owner)
        index, text = edited or (-1, "")
        message = display.message_at(chat.history(found.id, owner=owner), index) if found else None
        if found is None or message is None or message.role != "user":
            raise Refused("Only your own messages can be edited.")
        updates = chat.edit(found.id, message.id, display.edited_text(text), owner=owner, session=session_of(request))
        yield from stream(updates, found.id, owner, session_of(request))

    @explained
    def on_version(
        step: int, cid: str | None, browser_id: str | None, query: str, request: gr.Request
    ) -> tuple[Any, ...]:
        owner = page_owner(request, browser_id)
        found = owned(chat, cid, owner)
        if found is not None:
            ids, active = chat.versions(found.id, owner=owner)
            if active is not None:
                chosen = ids[max(0, min(len(ids) - 1, ids.index(active) + step))]
                chat.choose_version(found.id, chosen, owner=owner)
        return showing(request, shown(owner, cid, query))

    def on_pick(cid: str | None, browser_id: str | None, query: str, request: gr.Request) -> tuple[Any, ...]:
        if cid != screens.shows(session_of(request), cid):
            chat.stop(session_of(request))  # the answer streaming here ends, kept as stopped
        view = showing(request, shown(page_owner(request, browser_id), cid, query))
        return *view, gr.update(elem_classes=[]), False, *busy(False)

    def on_new(browser_id: str | None, query: str, request: gr.Request) -> tuple[Any, ...]:
        return on_pick(None, browser_id, query, request)

    def on_redraw(browser_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        """The transcript and status of the conversation this page shows now, as the server knows it."""
        owner, cid = page_owner(request, browser_id), screens.shows(session_of(request))
        found = owned(chat, cid, owner)
        history = chat.history(found.id, owner=owner) if found else []
        shown = display.bubbles(history, versions=chat.answer_versions(found.id, owner=owner) if found else None)
        return shown, found.id if found else None, chat_parts.status_line(chat, history)

    def on_search(query: str, cid: str | None, browser_id: str | None, request: gr.Request) -> dict[str, Any]:
        return listed(page_owner(request, browser_id), cid, query)

    @explained
    def on_rename(
        cid: str | None, text: str, browser_id: str | None, query: str, request: gr.Request
    ) -> tuple[Any, ...]:
        owner = page_owner(request, browser_id)
        chat.rename(cid or "", text, owner=owner)
        renamed = owned(chat, cid, owner)
        return listed(owner, cid, query), renaming(renamed.title if renamed else None, clear=True)

    @explained
    def on_delete(cid: str | None, browser_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        owner = page_owner(request, browser_id)
        chat.delete(cid or "", owner=owner)
        return *showing(request, shown(owner, None)), gr.update(visible=False)

    @explained
    def on_export(cid: str | None, browser_id: str | None, as_json: bool, request: gr.Request) -> dict[str, Any]:
        return chat_parts.export(chat, cid, page_owner(request, browser_id), as_json=as_json)

    def on_markdown(cid: str | None, browser_id: str | None, request: gr.Request) -> dict[str, Any]:
        return on_export(cid, browser_id, False, request)

    def on_json(cid: str | None, browser_id: str | None, request: gr.Request) -> dict[str, Any]:
        return on_export(cid, browser_id, True, request)

    # an answer's own status line says where it stands: Gradio's overlay over its outputs also covered the
    # list, so a chat picked while an answer waited was never picked
    quiet, may_refuse, engine_bound = QUIET, MAY_REFUSE, {**ENGINE_BOUND, "show_progress": "hidden"}
    view = [bubbles, system, conversation, picker, title, regenerate, line, versions, which, recheck]
    outputs = [bubbles, line, conversation, box, title, picker]
    after = [conversation, send, stop, picker, regenerate, versions, which, line, recheck]
    settling = [conversation, browser, search]
    started = gr.on([send.click, box.submit], lambda: busy(True), None, [send, stop], **quiet)
    sent = started.then(on_send, [box, conversation, system, browser, search], outputs, **engine_bound)
    sent.then(settled, settling, after, **quiet)
    again = regenerate.click(lambda: busy(True), None, [send, stop], **quiet)
    redone = again.then(on_regenerate, [conversation, browser], outputs, **engine_bound)
    redone.then(settled, settling, after, **quiet)
    editing = gr.State(None)
    edits = bubbles.edit(on_edit_start, None, [send, stop, editing], **quiet)
    edited = edits.then(on_edit, [conversation, browser, editing], outputs, **engine_bound)
    edited.then(settled, settling, after, **quiet)

    # each arrow's step is an input: a functools.partial hid on_version's gr.Request from Gradio, which gave None
    back, forward = gr.State(-1), gr.State(1)
    older.click(on_version, [back, conversation, browser, search], view, **may_refuse)
    newer.click(on_version, [forward, conversation, browser, search], view, **may_refuse)

    def on_recheck(cid: str | None, browser_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        return chat_parts.recovered(chat, cid, page_owner(request, browser_id))

    def on_stop(request: gr.Request) -> None:
        chat.stop(session_of(request))

    stop.click(on_stop, None, None, **quiet)
    # another conversation picked while one streams: that answer is stopped (kept, as stopped) and its step
    # ends at its next frame (screens.py), then settles the view on the picked chat. Not Gradio's `cancels`:
    # a cancelled step leaves red "Error" badges over its outputs. The switch answers at once (a message typed
    # right after "New chat" must find it done); then the view is drawn again through the queue, after any
    # frame of the old answer
    switching = [*view, listing, drawer_open, send, stop]
    for switched in [
        picker.input(on_pick, [picker, browser, search], switching, **quiet),
        new_chat.click(on_new, [browser, search], switching, **quiet),
        # the transcript's trash icon starts a new chat too (it only emptied the view: the next message
        # brought the whole history back); the cleared one stays in the list
        bubbles.clear(on_new, [browser, search], switching, **quiet),
    ]:
        switched.then(on_redraw, browser, [bubbles, conversation, line], **may_refuse)
    recheck.tick(on_recheck, [conversation, browser], [bubbles, line, recheck], **quiet)
    search.change(on_search, [search, conversation, browser], picker, **quiet)
    rename.click(on_rename, [conversation, title, browser, search], [picker, title], **may_refuse)
    delete.click(lambda: gr.update(visible=True), None, really, **quiet)
    really.click(on_delete, [conversation, browser], [*view, really], **may_refuse)
    as_markdown.click(on_markdown, [conversation, browser], exported, **may_refuse)
    as_json.click(on_json, [conversation, browser], exported, **may_refuse)
    conversation.change(lambda: gr.update(value="", visible=False), None, exported, **quiet)  # not another chat's
    drawer.click(
        lambda opened: (gr.update(elem_classes=[] if opened else ["q-open"]), not opened),
        drawer_open,
        [listing, drawer_open],
        **quiet,
    )
    return OnLoad(on_load, [browser, conversation], [browser, *view, send])
