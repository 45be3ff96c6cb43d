"""Chat: a conversation's history in, a streamed answer out, everything saved as it ends.

The UI and the API call `send` / `regenerate` and iterate the updates. Whatever way an answer
ends — finished, stopped, failed, or the client gone — what was generated is saved with its status.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

from app.chat.store import ChatStore
from app.engine.events import Done, EngineError, Failed, GenerationRequest, Message, Queued, Stats, Token
from app.engine.service import EngineService
from app.engine.ticket import Ticket


@dataclass(frozen=True)
class ChatUpdate:
    text: str  # the answer so far
    waiting: int = 0  # queue position while waiting, else 0
    held: str | None = None  # why no answer may start now (a card too hot)
    done: bool = False
    stats: Stats | None = None
    error: str | None = None
    card: str | None = None


class ChatService:
    def __init__(self, store: ChatStore, engine: EngineService, *, max_tokens: int, temperature: float) -> None:
        self.store = store
        self.engine = engine
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._active: dict[str, Ticket] = {}
        self._lock = threading.Lock()

    def send(self, cid: str, text: str, *, owner: str, max_tokens: int | None = None) -> Iterator[ChatUpdate]:
        if not text.strip():
            raise ValueError("the message is empty")
        if self.store.get(cid) is None:
            raise KeyError(f"no conversation {cid}")
        self.store.add(cid, "user", text)
        return self._answer(cid, owner=owner, max_tokens=max_tokens)

    def regenerate(self, cid: str, *, owner: str) -> Iterator[ChatUpdate]:
        self.store.drop_last_answer(cid)
        messages = self.store.messages(cid)
        if not messages or messages[-1].role != "user":
            raise ValueError("there is no question to answer again")
        return self._answer(cid, owner=owner, max_tokens=None)

    def stop(self, owner: str) -> bool:
        """Cancel the answer that `owner` (a browser session, an API call) is waiting for."""
        with self._lock:
            ticket = self._active.get(owner)
        if ticket is None:
            return False
        self.engine.cancel(ticket)
        return True

    def _request(self, cid: str, max_tokens: int | None) -> GenerationRequest:
        conversation = self.store.get(cid)
        assert conversation is not None
        history = [
            Message(m.role, m.content)  # type: ignore[arg-type]
            for m in self.store.messages(cid)
            if m.content and m.role in ("user", "assistant")
        ]
        system = [Message("system", conversation.system_prompt)] if conversation.system_prompt.strip() else []
        return GenerationRequest(
            messages=tuple(system + history),
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
        )

    def _answer(self, cid: str, *, owner: str, max_tokens: int | None) -> Iterator[ChatUpdate]:
        try:
            ticket = self.engine.submit(self._request(cid, max_tokens))
        except EngineError as err:
            self.store.add(cid, "assistant", "", status="error", stats={"error": str(err)})
            yield ChatUpdate("", done=True, error=str(err))
            return
        with self._lock:
            self._active[owner] = ticket
        text, saved = "", False
        try:
            for event in ticket.events():
                if isinstance(event, Queued):
                    yield ChatUpdate(text, waiting=event.position, held=event.held)
                elif isinstance(event, Token):
                    text += event.text
                    yield ChatUpdate(text)
                elif isinstance(event, Done):
                    status = "stopped" if event.stats.finish_reason == "cancelled" else "ok"
                    self.store.add(cid, "assistant", text, status=status, stats=event.stats.as_dict())
                    saved = True
                    yield ChatUpdate(text, done=True, stats=event.stats)
                elif isinstance(event, Failed):
                    self.store.add(cid, "assistant", text, status="error", stats={"error": event.message})
                    saved = True
                    yield ChatUpdate(text, done=True, error=event.message, card=event.card)
        finally:
            with self._lock:
                if self._active.get(owner) is ticket:
                    del self._active[owner]
            if not saved:  # the client went away: keep what it was shown
                self.store.add(cid, "assistant", text, status="stopped")
