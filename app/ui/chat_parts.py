"""What the Chat tab works out without widgets of its own: which conversation a page may see, the rename
box, the status line of a conversation's last answer (and whether to look again until the engine is back),
and an export's file."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import Any

import gradio as gr

from app.chat.service import ChatService, ChatUpdate
from app.chat.store import Conversation, StoredMessage
from app.errors import NotFound, Refused
from app.ui import display


def owned(chat: ChatService, cid: str | None, owner: str) -> Conversation | None:
    try:
        return chat.conversation(cid, owner=owner) if cid else None
    except NotFound:
        return None


def owned_id(chat: ChatService, cid: str | None, owner: str) -> str | None:
    found = owned(chat, cid, owner)
    return found.id if found else None


def renaming(title: str | None, *, clear: bool = False) -> dict[str, Any]:
    """The rename box for a conversation shown: its title as the placeholder; emptied only after a rename,
    never when the view settles (that would wipe what is being typed)."""
    return gr.update(value="", placeholder=title or "New chat") if clear else gr.update(placeholder=title or "New chat")


def so_far(chat: ChatService, cid: str, owner: str) -> tuple[list[StoredMessage], display.Versions]:
    """A conversation's messages and its regenerated answers' versions, for display.bubbles."""
    return chat.history(cid, owner=owner), chat.answer_versions(cid, owner=owner)


def status_line(chat: ChatService, history: list[StoredMessage]) -> str:
    """How the last answer went; one lost with a card says so only until the engine is ready again."""
    return display.last_stats(history, engine_ready=not display.lost_engine(history) or chat.engine_ready())


def recheck(chat: ChatService, history: list[StoredMessage]) -> Any:
    """The tab's timer: on while the last answer is being written for another page (this one was reloaded,
    or opened the chat elsewhere), or failed with a card and the engine is not back yet."""
    return gr.Timer(active=_streaming(history) or (display.lost_engine(history) and not chat.engine_ready()))


def recovered(chat: ChatService, cid: str | None, owner: str) -> tuple[Any, Any, Any]:
    """A timer's tick: the transcript and line as they are now (the timer off once there is nothing to
    follow), or nothing new while the engine is not back."""
    found = owned(chat, cid, owner)
    history, versions = so_far(chat, found.id, owner) if found else ([], {})
    if _streaming(history):
        return display.bubbles(history, None, versions), display.last_stats(history), gr.skip()
    if display.lost_engine(history) and not chat.engine_ready():
        return gr.skip(), gr.skip(), gr.skip()
    return display.bubbles(history, None, versions), status_line(chat, history), gr.Timer(active=False)


def _streaming(history: list[StoredMessage]) -> bool:
    return bool(history) and history[-1].role == "assistant" and history[-1].status == "streaming"


def detached(updates: Iterator[ChatUpdate]) -> Generator[ChatUpdate, None, None]:
    """An answer's updates, read in a thread of their own: the page that asked may go (a reload, a closed
    tab: Gradio closes its step) and the answer goes on, saved as it streams, for the page to pick up again.
    Stop and a switch to another chat still end it (ChatService.stop)."""
    box: queue.Queue[ChatUpdate | None] = queue.Queue()

    def drain() -> None:
        try:
            for update in updates:
                box.put(update)
        finally:
            box.put(None)

    threading.Thread(target=drain, name="chat-answer", daemon=True).start()
    while (update := box.get()) is not None:
        yield update


def export(chat: ChatService, cid: str | None, owner: str, *, as_json: bool) -> dict[str, Any]:
    """The owner's chat written out and offered once to this page (a private file, gone once fetched: never in
    Gradio's file cache, which serves any file to whoever has its URL)."""
    found = owned(chat, cid, owner)
    if found is None:
        raise Refused("There is no chat to export yet: send a message first.")
    name = display.export_name(found, ".json" if as_json else ".md")
    offer = chat.offer_export(found.id, owner=owner, as_json=as_json, name=name)
    return gr.update(value=display.download_link(offer), visible=True)
