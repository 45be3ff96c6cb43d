"""Turning service results into what the page shows: chat bubbles, stats lines, the header."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from typing import Any

from app.chat.service import ChatUpdate
from app.chat.store import StoredMessage


def stats_line(stats: dict[str, Any]) -> str:
    parts = [f"{stats.get('generated_tokens', 0)} tokens"]
    if stats.get("ttft_s"):
        parts.append(f"first token {stats['ttft_s']:.2f} s")
    if stats.get("decode_tps"):
        parts.append(f"{stats['decode_tps']:.1f} tok/s")
    if stats.get("finish_reason") == "cancelled":
        parts.append("stopped")
    elif stats.get("finish_reason") == "length":
        parts.append("cut at the token limit")
    return " · ".join(parts)


def _footer(message: StoredMessage) -> str:
    if message.status == "error":
        error = (message.stats or {}).get("error", "the answer failed")
        return f"\n\n<span class='q-error'>⚠ {html.escape(error)}</span>"
    if message.stats:
        return f"\n\n<span class='q-stats'>{stats_line(message.stats)}</span>"
    if message.status == "stopped":
        return "\n\n<span class='q-stats'>stopped</span>"
    return ""


def bubbles(history: list[StoredMessage], live: ChatUpdate | None = None) -> list[dict[str, str]]:
    shown = [
        {"role": m.role, "content": m.content + (_footer(m) if m.role == "assistant" else "")}
        for m in history
        if m.role in ("user", "assistant")
    ]
    if live is not None and not live.done:
        shown.append({"role": "assistant", "content": live.text or "…"})
    return shown


def waiting_line(update: ChatUpdate) -> str:
    if update.waiting:
        held = f" — {update.held}" if update.held else ""
        return f"⏳ waiting, position {update.waiting}{held}"
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
        if update.done or update.waiting or now - last >= gap:
            last = now
            pending = None
            yield update
    if pending is not None:
        yield pending


def header_html(status: dict[str, Any]) -> str:
    model = status.get("model") or {}
    name = html.escape(model.get("name") or "no model")
    state = html.escape(status.get("state", "?"))
    cards = []
    for card in status.get("cards", []):
        layers = card.get("layers") or []
        span = f"{layers[0]}–{layers[-1]}" if layers else "no layers"
        cards.append(
            f"<span class='q-card q-{card['state']}' title='{html.escape(card['endpoint'])}: {span}'>"
            f"card {card['index']} {card['state'].replace('-', ' ')}</span>"
        )
    message = html.escape(status.get("message", "")) if state != "ready" else ""
    return (
        f"<div class='q-header'><span class='q-model'>{name}</span>"
        f"<span class='q-state q-{state}'>{state}</span>{''.join(cards)}"
        f"{_load(status)}<span class='q-message'>{message}</span></div>"
    )


def _load(status: dict[str, Any]) -> str:
    """'2 running · 1 waiting · 41.0 tok/s': the answers in the slots, the queue, the aggregate rate."""
    queue = status.get("queue") or {}
    running, waiting = queue.get("running", 0), queue.get("waiting", 0)
    if not running and not waiting:
        return ""
    rate = f" · {status.get('live_tps', 0.0):.1f} tok/s" if running else ""
    return f"<span class='q-load'>{running} running · {waiting} waiting{rate}</span>"
