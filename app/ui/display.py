"""Turning service results into what the page shows: chat bubbles, stats lines, the header."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from typing import Any

from app.chat.service import ChatUpdate
from app.chat.store import Conversation, StoredMessage
from app.downloads import Offer
from app.telemetry.views import ApplianceStatus
from app.ui.rendering import answer_markdown, typed_back, typed_text


def stats_line(stats: dict[str, Any]) -> str:
    parts = [f"{stats.get('generated_tokens', 0)} tokens"]
    if stats.get("ttft_s"):
        parts.append(f"first token {stats['ttft_s']:.2f} s")
    if stats.get("decode_tps"):
        parts.append(f"{stats['decode_tps']:.1f} tok/s")
    steps, tokens = stats.get("steps") or 0, stats.get("generated_tokens") or 0
    if stats.get("accepted_tokens") and steps and tokens > steps:  # speculative decoding took several a step
        parts.append(f"{tokens / steps:.1f} tokens a step")
    if stats.get("finish_reason") == "cancelled":
        parts.append("stopped")
    elif stats.get("finish_reason") == "length":
        parts.append("cut at the token limit")
    return " · ".join(parts)


def _note(message: StoredMessage) -> str | None:
    """What to say beside an answer that did not end normally (shown apart from it, so Copy copies the answer)."""
    if message.status == "error":
        return f"⚠ {(message.stats or {}).get('error', 'the answer failed')}"
    if message.status == "stopped":
        return "stopped"
    if message.status == "interrupted":
        return "⚠ interrupted: the appliance restarted while this answer was written"
    if message.status == "streaming":
        return "still being written…"
    return None


Versions = dict[int, tuple[int, int]]  # a regenerated answer's message id: which version it is, of how many


def bubbles(
    history: list[StoredMessage], live: ChatUpdate | None = None, versions: Versions | None = None
) -> list[dict[str, Any]]:
    """The transcript for gr.Chatbot: each message's own text only (rendered safely); an answer that
    failed, stopped or was interrupted says so on a plain line under it, and an earlier answer that was
    regenerated says which version it is ("answer 2 of 3"; the last answer has ‹ › under the chat)."""
    answers = [m.id for m in history if m.role == "assistant"] or [0]
    live = live if live is not None and not live.done else None
    labels = {i: f"answer {n} of {m}" for i, (n, m) in (versions or {}).items() if live or i != answers[-1]}
    shown = [
        {**bubble, "content": bubble["content"] + _line(labels[m.id])} if m.id in labels else bubble
        for m, bubble in _transcript(history)
    ]
    if live is not None:
        shown.append({"role": "assistant", "content": answer_markdown(live.text) or "…"})
    return shown


def answered(history: list[StoredMessage]) -> bool:
    """Whether there is an answer to regenerate."""
    return any(m.role == "assistant" for m in history)


def list_label(query: str, found: int) -> str:
    """The list's heading: what a search found nothing for is said, not an empty list."""
    return f"No chat matches “{query.strip()}”" if query.strip() and not found else "Conversations"


def list_entry(conversation: Conversation) -> tuple[str, str]:
    """A conversation in the list: its title and day, and its id."""
    return f"{conversation.title} · {conversation.updated_at[:10]}", conversation.id


def message_at(history: list[StoredMessage], index: int) -> StoredMessage | None:
    """The stored message behind the `index`-th bubble of `bubbles(history)`."""
    shown = _transcript(history)
    return shown[index][0] if 0 <= index < len(shown) else None


def shown_text(message: StoredMessage) -> str:
    """A bubble's content. A person's own message stays their text, with HTML, link or image brackets and
    addresses made plain text (`&lt;`, `&#91;`, `&#58;//`): the edit box holds what they wrote (edited_text
    reads it back), and the page's Markdown renderer can form no element, image or link from it. An answer
    is rendered and cleaned whole, its Markdown kept for Copy (rendering.answer_markdown); how it ended, if not
    normally, is a plain line under it, outside what Copy copies."""
    if message.role == "user":
        return typed_text(message.content)  # code fences as typed: the page's renderer shows them as text
    note = _note(message)
    return answer_markdown(message.content) + (_line(note) if note else "")


def _line(text: str) -> str:
    return f'<div class="q-answer-note">{html.escape(text)}</div>'


def edited_text(text: str) -> str:
    """What a person typed into a message's edit box, as they meant it (the box shows `&lt;` for `<`, `&#91;`
    for `[`)."""
    return typed_back(text)


def _transcript(history: list[StoredMessage]) -> list[tuple[StoredMessage, dict[str, Any]]]:
    shown: list[tuple[StoredMessage, dict[str, Any]]] = []
    for m in history:
        if m.role in ("user", "assistant") and (m.content or m.role == "user" or _note(m)):
            shown.append((m, {"role": m.role, "content": shown_text(m)}))
    return shown


# the engine's failures that end once it is rebuilt (app/errors.py kinds)
_ENGINE_LOST = ("card", "engine")
RECOVERED = "⚠ the last answer failed when the engine lost a card; it is ready again: Regenerate to ask again"


def last_stats(history: list[StoredMessage], *, engine_ready: bool = True) -> str:
    """The status line for a conversation just opened: how its last answer went. An answer that failed as a
    card stopped answering says so only while the engine is not back (the answer's own note keeps it)."""
    answers = [m for m in history if m.role == "assistant"]
    if not answers:
        return ""
    last = answers[-1]
    if engine_ready and lost_engine(history):
        return RECOVERED
    return _note(last) or (stats_line(last.stats) if last.stats else "")


def lost_engine(history: list[StoredMessage]) -> bool:
    """Whether the last answer failed because the engine lost a card (or the engine itself)."""
    answers = [m for m in history if m.role == "assistant"]
    last = answers[-1] if answers else None
    return last is not None and last.status == "error" and (last.stats or {}).get("kind") in _ENGINE_LOST


def queue_line(*, waiting: int, held: str | None = None, reading: bool = False, what: str = "your question") -> str:
    """Where an answer stands before its first word, as the engine said: 'waiting, position N' only while
    someone is ahead (or a hold), 'reading …' once the model reads the prompt; '' otherwise."""
    if waiting:
        return f"⏳ waiting, position {waiting}" + (f" — {held}" if held else "")
    return f"reading {what}…" if reading else ""


def waiting_line(update: ChatUpdate) -> str:
    if update.waiting or update.reading:
        return queue_line(waiting=update.waiting, held=update.held, reading=update.reading)
    if update.error:
        return f"⚠ {update.error}"
    if update.done and update.stats:
        return stats_line(update.stats.as_dict())
    return "generating…" if not update.done else ""


def throttle(updates: Iterator[ChatUpdate], per_s: float) -> Iterator[ChatUpdate]:
    """Pass on at most `per_s` updates a second (the browser is the bottleneck), always the last."""
    gap = 1.0 / per_s
    last = 0.0
    pending: ChatUpdate | None = None
    for update in updates:
        pending = update
        now = time.monotonic()
        if update.done or update.waiting or update.reading or now - last >= gap:
            last = now
            pending = None
            yield update
    if pending is not None:
        yield pending


# The header before a page's load has filled it in: no state at all rather than the boot-time one.
BEFORE_LOAD = "<div class='q-header'><span class='q-message'>connecting…</span></div>"


def header_html(status: ApplianceStatus) -> str:
    name = html.escape(status.model.name if status.model else "no model")
    state = html.escape(status.state)
    cards = []
    for card in status.cards:
        span = f"{card.layers[0]}–{card.layers[-1]}" if card.layers else "no layers"
        cards.append(
            f"<span class='q-card q-{card.state}' title='{html.escape(card.endpoint)}: {span}'>"
            f"card {card.index} {card.state.replace('-', ' ')}</span>"
        )
    message = html.escape(status.message) if state != "ready" else ""
    return (
        f"<div class='q-header'><span class='q-model'>{name}</span>"
        f"<span class='q-state q-{state}'>{state}</span>{''.join(cards)}"
        f"{_load(status)}<span class='q-message'>{message}</span></div>"
    )


def _load(status: ApplianceStatus) -> str:
    """'2 running · 1 waiting · 41.0 tok/s': the answers in the slots, the queue, the aggregate rate."""
    running, waiting = status.running, status.waiting
    if not running and not waiting:
        return ""
    rate = f" · {status.live_tps:.1f} tok/s" if running else ""
    return f"<span class='q-load'>{running} running · {waiting} waiting{rate}</span>"


def export_name(conversation: Conversation, suffix: str) -> str:
    """The name a conversation's export is saved as: its title and day."""
    title = re.sub(r"[^\w\- ]+", "", conversation.title).strip().replace(" ", "-")[:60].strip("-") or "chat"
    return f"{title}-{conversation.updated_at[:10]}{suffix}"


def download_link(offer: Offer) -> str:
    """A file offered once (app/downloads.py) as a link: its name (stem and extension) and size. Fetched once:
    the link works for one download, within 10 minutes."""
    stem, dot, ext = offer.name.partition(".")
    return (
        f'<a class="q-download" href="{html.escape(offer.url)}" download="{html.escape(offer.name)}">'
        f'<span class="filename"><span class="stem">{html.escape(stem)}</span>'
        f'<span class="ext">{html.escape(dot + ext)}</span></span> '
        f'<span class="size">{_size(offer.size)}</span></a>'
        '<span class="q-download-note">one download, within 10 minutes</span>'
    )


def _size(size: int) -> str:
    """794 B, 1.2 KB, 3.4 MB, 1.1 GB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
