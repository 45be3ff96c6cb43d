"""What the Chat tab works out without widgets of its own: which conversation a page may see, the rename
box, the status line of a conversation's last answer (and whether to look again until the engine is back),
and an export's file."""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.chat.service import ChatService
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
    """The tab's timer: on while the last answer failed with a card and the engine is not back yet."""
    return gr.Timer(active=display.lost_engine(history) and not chat.engine_ready())


def recovered(chat: ChatService, cid: str | None, owner: str) -> tuple[Any, Any]:
    """A timer's tick: the status line once the engine is back (and the timer off), else nothing new."""
    found = owned(chat, cid, owner)
    history = chat.history(found.id, owner=owner) if found else []
    if not display.lost_engine(history):
        return gr.skip(), gr.Timer(active=False)
    if not chat.engine_ready():
        return gr.skip(), gr.skip()
    return display.RECOVERED, gr.Timer(active=False)


def export(chat: ChatService, cid: str | None, owner: str, *, as_json: bool) -> dict[str, Any]:
    found = owned(chat, cid, owner)
    if found is None:
        raise Refused("There is no chat to export yet: send a message first.")
    text = chat.export(found.id, owner=owner, as_json=as_json)
    return gr.update(value=display.export_file(found, text, ".json" if as_json else ".md"), visible=True)
