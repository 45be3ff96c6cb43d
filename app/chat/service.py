"""Chat: a conversation's history in, a streamed answer out, saved as it streams and as it ends.

The UI and the API call `send` / `regenerate` and iterate the updates. An answer is saved a few
times a second while it streams, so a crash of the app keeps what people already saw (marked
interrupted at the next start). Whatever way an answer ends — finished, stopped, failed, or the
client gone — what was generated is saved with its status. Only questions that got an answer go back
to the model: a failed, empty or stopped-before-a-word answer never breaks the conversation.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from app.chat.store import ChatStore, Conversation, StoredMessage
from app.downloads import Downloads, Offer
from app.engine.events import Done, EngineError, Failed, GenerationRequest, Message, Queued, Reading, Stats, Token
from app.engine.follow import follow
from app.engine.service import EngineService
from app.engine.ticket import Ticket
from app.errors import Kind, NotFound, Refused

_SAVE_EVERY_S = 0.25  # a streaming answer is written to the database at most this often
_ANSWERED = ("ok", "stopped", "interrupted")


@dataclass(frozen=True)
class ChatUpdate:
    text: str  # the answer so far
    waiting: int = 0  # queue position while waiting, else 0
    held: str | None = None  # why no answer may start now (a card too hot)
    reading: bool = False  # the answer has its slot: the model reads the conversation (no word yet)
    done: bool = False
    stats: Stats | None = None
    error: str | None = None
    card: str | None = None
    kind: Kind | None = None  # the failure's kind (app/errors.py): branch on it, not on `error`


class ConversationNotFound(NotFound):
    """A conversation that does not exist — or is not the caller's: the two look the same from outside."""


class ChatService:
    """The chat feature's front door: conversations belong to an owner ("person:<id>", "user:<login>",
    "browser:<id>", …: app/ui/callers.py), and every method checks it. `session` names who waits for an
    answer (Stop)."""

    def __init__(
        self,
        store: ChatStore,
        engine: EngineService,
        *,
        max_tokens: int,
        temperature: float,
        system_prompt: str,
        downloads: Downloads,
    ) -> None:
        self.store, self.downloads = store, downloads  # downloads: where an export is offered once
        self.engine = engine
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system_prompt = system_prompt
        self._active: dict[str, Ticket] = {}
        self._lock = threading.Lock()

    # -- conversations ------------------------------------------------------------------------

    def open(self, cid: str | None, *, owner: str, system_prompt: str | None = None) -> str:
        """Continue `owner`'s conversation `cid` (its system prompt updated when one is given), or start one."""
        prompt = self.system_prompt if system_prompt is None else system_prompt
        if not cid:
            return self.store.create(prompt, owner=owner)
        found = self.conversation(cid, owner=owner)
        if system_prompt is not None and system_prompt != found.system_prompt:
            self.store.set_system_prompt(found.id, system_prompt)
        return found.id

    def conversation(self, cid: str, *, owner: str) -> Conversation:
        found = self.store.get(cid)
        if found is None or found.owner != owner:
            raise ConversationNotFound(f"There is no conversation {cid}.")
        return found

    def recent(self, owner: str, *, query: str = "") -> list[Conversation]:
        return self.store.recent(owner, query=query)

    def engine_ready(self) -> bool:
        """Whether answers can start now (a page says a card's failure is over once it is)."""
        return self.engine.status().state == "ready"

    def history(self, cid: str, *, owner: str) -> list[StoredMessage]:
        return self.store.messages(self.conversation(cid, owner=owner).id)

    def rename(self, cid: str, title: str, *, owner: str) -> None:
        if not title.strip():
            raise Refused("A title cannot be empty.")
        self.store.rename(self.conversation(cid, owner=owner).id, title)

    def delete(self, cid: str, *, owner: str) -> None:
        self.store.delete(self.conversation(cid, owner=owner).id)

    def offer_export(self, cid: str, *, owner: str, as_json: bool, name: str) -> Offer:
        """The owner's conversation exported (`export`) and offered once, as `name` (app/downloads.py)."""
        text = self.export(cid, owner=owner, as_json=as_json)
        media_type = "application/json" if as_json else "text/markdown"
        return self.downloads.offer_text(text, name=name, media_type=media_type)

    def export(self, cid: str, *, owner: str, as_json: bool) -> str:
        """The conversation as Markdown (people) or JSON (programs), with each answer's status and stats."""
        found = self.conversation(cid, owner=owner)
        messages = self.store.messages(found.id)
        if as_json:
            return json.dumps(
                {
                    "id": found.id,
                    "title": found.title,
                    "system_prompt": found.system_prompt,
                    "updated_at": found.updated_at,
                    "messages": [
                        {"role": m.role, "content": m.content, "status": m.status, "stats": m.stats} for m in messages
                    ],
                },
                ensure_ascii=False,
                indent=2,
            )
        said = {"user": "You", "assistant": "Quartet"}
        lines = [f"# {found.title}", "", f"_System prompt:_ {found.system_prompt}" if found.system_prompt else ""]
        for m in messages:
            note = "" if m.status == "ok" else f" _({m.status})_"
            lines += ["", f"**{said.get(m.role, m.role)}:**{note}", "", m.content]
        return "\n".join(lines).strip() + "\n"

    # -- answers --------------------------------------------------------------------------------

    def send(
        self, cid: str, text: str, *, owner: str, session: str, max_tokens: int | None = None
    ) -> Iterator[ChatUpdate]:
        if not text.strip():
            raise Refused("the message is empty")
        found = self.conversation(cid, owner=owner)
        self.store.add(found.id, "user", text)
        return self._answer(found.id, session=session, max_tokens=max_tokens)

    def regenerate(self, cid: str, *, owner: str, session: str) -> Iterator[ChatUpdate]:
        """Answer the last question again; the earlier answer stays as a version to go back to."""
        found = self.conversation(cid, owner=owner)
        messages = self.store.messages(found.id)
        if not any(m.role == "user" for m in messages):
            raise Refused("there is no question to answer again")
        self.store.retire_last_answer(found.id)
        return self._answer(found.id, session=session, max_tokens=None)

    def edit(self, cid: str, message_id: int, text: str, *, owner: str, session: str) -> Iterator[ChatUpdate]:
        """Ask an earlier question again in other words: it and what followed are set aside, and the
        conversation goes on from the new wording."""
        found = self.conversation(cid, owner=owner)
        if not text.strip():
            raise Refused("the message is empty")
        if not any(m.id == message_id and m.role == "user" for m in self.store.messages(found.id)):
            raise Refused("only your own messages in this conversation can be edited")
        self.store.retire_from(found.id, message_id)
        self.store.add(found.id, "user", text)
        return self._answer(found.id, session=session, max_tokens=None)

    def versions(self, cid: str, *, owner: str) -> tuple[list[int], int | None]:
        """The versions of the last answer (message ids, oldest first) and the one shown."""
        return self.store.versions(self.conversation(cid, owner=owner).id)

    def answer_versions(self, cid: str, *, owner: str) -> dict[int, tuple[int, int]]:
        """Every shown answer that was regenerated: which version it is, of how many (message id -> (n, m))."""
        return self.store.answer_versions(self.conversation(cid, owner=owner).id)

    def choose_version(self, cid: str, message_id: int, *, owner: str) -> None:
        try:
            self.store.choose(self.conversation(cid, owner=owner).id, message_id)
        except KeyError as err:
            raise NotFound("that is not a version of the last answer") from err

    def stop(self, session: str) -> bool:
        """Cancel the answer that `session` (a browser tab, an API call) is waiting for."""
        with self._lock:
            ticket = self._active.get(session)
        if ticket is None:
            return False
        self.engine.cancel(ticket)
        return True

    def _request(self, cid: str, max_tokens: int | None) -> GenerationRequest:
        conversation = self.store.get(cid)
        assert conversation is not None
        history = [Message(m.role, m.content) for m in model_history(self.store.messages(cid))]  # type: ignore[arg-type]
        system = [Message("system", conversation.system_prompt)] if conversation.system_prompt.strip() else []
        return GenerationRequest(
            messages=tuple(system + history),
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
        )

    def _answer(self, cid: str, *, session: str, max_tokens: int | None) -> Iterator[ChatUpdate]:
        try:
            ticket = self.engine.submit(self._request(cid, max_tokens))
        except EngineError as err:
            self.store.add(cid, "assistant", "", status="error", stats={"error": str(err), "kind": err.kind})
            yield ChatUpdate("", done=True, error=str(err), kind=err.kind)
            return
        with self._lock:
            self._active[session] = ticket
        saver = _Saver(self.store, cid)
        try:
            for event in follow(ticket):
                if isinstance(event, Queued):
                    yield ChatUpdate(saver.text, waiting=event.position, held=event.held)
                elif isinstance(event, Reading):
                    yield ChatUpdate(saver.text, reading=True)
                elif isinstance(event, Token):
                    saver.grow(event.text)
                    yield ChatUpdate(saver.text)
                elif isinstance(event, Done):
                    saver.finish("stopped" if event.stats.finish_reason == "cancelled" else "ok", event.stats.as_dict())
                    yield ChatUpdate(saver.text, done=True, stats=event.stats)
                elif isinstance(event, Failed):
                    saver.finish("error", {"error": event.message, "kind": event.kind})
                    yield ChatUpdate(saver.text, done=True, error=event.message, card=event.card, kind=event.kind)
        finally:
            with self._lock:
                if self._active.get(session) is ticket:
                    del self._active[session]
            if not saver.finished:  # the client went away: keep what it was shown
                saver.finish("stopped", None)


class _Saver:
    """One answer in the database: created at its first token, rewritten a few times a second, closed at the end."""

    def __init__(self, store: ChatStore, cid: str) -> None:
        self.store, self.cid = store, cid
        self.text, self.finished = "", False
        self._id: int | None = None
        self._saved_at = 0.0

    def grow(self, piece: str) -> None:
        self.text += piece
        if self._id is None:
            self._id = self.store.add(self.cid, "assistant", self.text, status="streaming")
            self._saved_at = time.monotonic()
        elif time.monotonic() - self._saved_at >= _SAVE_EVERY_S:
            self.store.update(self._id, self.text, status="streaming")
            self._saved_at = time.monotonic()

    def finish(self, status: str, stats: dict[str, Any] | None) -> None:
        if self._id is None:
            self.store.add(self.cid, "assistant", self.text, status=status, stats=stats)
        else:
            self.store.update(self._id, self.text, status=status, stats=stats)
        self.finished = True


def model_history(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    """The turns to send to the model: each question with its answer, when it got one with text, and the
    last question. A question whose answer failed or came out empty is left out with that answer, so the
    roles always alternate and one bad answer never breaks the rest of the conversation."""
    kept: list[StoredMessage] = []
    question: StoredMessage | None = None
    for message in messages:
        if message.role == "user":
            question = message
        elif message.role == "assistant":
            if question is not None and message.content.strip() and message.status in _ANSWERED:
                kept += [question, message]
            question = None
    if question is not None:
        kept.append(question)
    return kept
