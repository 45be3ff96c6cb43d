"""What the engine shows the UI, the API and /metrics: one status dict built from the scheduler's
queue and the supervisor's view of its backend, and the tally of what the answers did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Literal

from app.engine.events import Done, Event, Failed, Stats, Token
from app.engine.meter import Counters, RateMeter
from app.engine.supervisor import BackendView
from app.engine.ticket import Ticket


def status_of(
    view: BackendView,
    *,
    isolated: bool,
    switching: str | None,
    held: str | None,
    running: Sequence[Ticket],
    waiting: Sequence[Ticket],
    parallel: int,
    rate: float,
    last_stats: Stats | None,
    cancel_s: float | None,
    background_slots: int,
) -> dict[str, Any]:
    info = view.info
    return {
        "state": view.state,
        "message": view.message,
        "switching": switching,
        "down_card": view.down_card,
        "isolated": isolated,
        "model": None
        if info is None
        else {
            "name": info.name,
            "gguf_file": info.path,  # not "path": gradio_client would fetch it as a file
            "n_layers": info.n_layers,
            "n_ctx": info.n_ctx,
            "load_s": round(info.load_s, 2),
            "backend": info.backend,
            "capabilities": asdict(info.capabilities),
        },
        "placement": [asdict(card) for card in info.cards] if info else [],
        "queue": {
            "running": len(running),
            "waiting": len(waiting),
            "held": held,
            "parallel": parallel,
            "background": sum(t.request.background for t in running),
            "background_slots": background_slots,
            "background_waiting": sum(t.request.background for t in waiting),
        },
        "live_tps": round(rate, 1) if running else 0.0,
        "last_stats": last_stats.as_dict() if last_stats else None,
        "last_cancel_s": None if cancel_s is None else round(cancel_s, 3),
    }


def empty_stats(reason: Literal["cancelled"]) -> Stats:
    return Stats(0, 0, 0, 0.0, 0.0, 0.0, 0.0, reason)


class Tally:
    """What the answers did: the live tokens/s, running totals, the last answer's stats, the last cancel's delay."""

    def __init__(self) -> None:
        self.rate = RateMeter()
        self.counters = Counters()
        self.last_stats: Stats | None = None
        self.cancel_s: float | None = None  # from the last cancel to its slot being free

    def record(self, event: Event) -> None:
        if isinstance(event, Token):
            self.rate.tick()
            self.counters.add("tokens")
        elif isinstance(event, Done):
            self.last_stats = event.stats
            self.counters.add("prompt_tokens", event.stats.prompt_tokens)
            self.counters.add("drafted_tokens", event.stats.drafted_tokens)
            self.counters.add("accepted_tokens", event.stats.accepted_tokens)
            self.counters.add("decode_steps", event.stats.steps)
            if event.stats.finish_reason == "cancelled":
                self.counters.add("cancelled")
        elif isinstance(event, Failed):
            self.counters.add("errors")
