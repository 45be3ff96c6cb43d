"""Card panels as HTML: state, load, temperature (or "no sensor"), memory, layers, tokens/s."""

from __future__ import annotations

import html

from app.engine.status import QueueView
from app.telemetry.views import ApplianceStatus, CardView


def _gib(n: float | None) -> str:
    return "–" if n is None else f"{n / 2**30:.1f} GiB"


def _mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def _layers(layers: tuple[int, ...]) -> str:
    if not layers:
        return "no layers"
    return f"layers {layers[0]}–{layers[-1]}" if len(layers) > 1 else f"layer {layers[0]}"


def card_panel(card: CardView, *, compact: bool = False) -> str:
    state = card.state
    temp = card.temperature_c
    thermal = card.thermal or "none"
    temp_text = "no sensor" if temp is None else f"{temp:.1f} °C"
    load = card.load_pct
    load_text = "–" if load is None else f"{load:.0f} %"
    if card.load_source == "process_cpu":
        load_text += " cpu"
    reason = f"<div class='q-reason'>{html.escape(card.reason or '')}</div>" if card.failing else ""
    rows = [
        ("load", load_text),
        ("temp", f"<span class='q-thermal-{thermal}'>{temp_text}</span>"),
        ("tok/s", f"{card.tokens_per_s:.1f}"),
    ]
    if not compact:
        rows += [
            ("memory", f"{_gib(card.mem_used_bytes)} / {_gib(card.mem_total_bytes)}"),
            ("model", f"{_layers(card.layers)} · {_mib(card.layer_bytes)}"),
        ]
    cells = "".join(f"<div class='q-k'>{k}</div><div class='q-v'>{v}</div>" for k, v in rows)
    return (
        f"<div class='q-panel q-{state}' data-card='{card.index}' data-state='{state}'>"
        f"<div class='q-title'>card {card.index} <span class='q-badge'>{state.replace('-', ' ')}</span></div>"
        f"<div class='q-endpoint'>{html.escape(card.endpoint)}</div>{reason}"
        f"<div class='q-grid'>{cells}</div></div>"
    )


def card_strip(status: ApplianceStatus, *, compact: bool = False) -> str:
    panels = "".join(card_panel(card, compact=compact) for card in status.cards)
    if not status.cards:  # an upstream engine with no card agents listed: nothing to show, and it says so
        panels = "<div class='q-card q-none' id='no-cards'>Cards: not reported by this engine</div>"
    return f"<div class='q-panels'>{panels}</div>"


def overall(status: ApplianceStatus) -> str:
    """The model and state, the aggregate tokens/s (live while answers run, else the last answer's),
    first-token time, and the answers running / waiting in the engine's slots."""
    model = status.model.name if status.model else "no model"
    last = status.last_stats or {}
    live = status.live_tps
    decode = live or last.get("decode_tps", 0.0)
    hold = status.thermal.hold
    warn = f"<div class='q-hold'>⚠ {html.escape(hold)}</div>" if hold else ""
    return (
        f"<div class='q-overall'><span><b>{html.escape(model)}</b> · {html.escape(status.state)}</span>"
        f"<span>decode {decode:.1f} tok/s{' (live, all answers)' if live else ''}</span>"
        f"<span>first token {last.get('ttft_s', 0.0):.2f} s</span>"
        f"<span class='q-slots'>{_queue(status.queue)}</span>"
        f"</div>{warn}"
    )


def _queue(queue: QueueView) -> str:
    """'3 of 4 slots running · 2 waiting (1 background)': the slots in use and the line, background work named."""
    text = f"{queue.running} of {queue.parallel} slots running · {queue.waiting} waiting"
    return text + (f" ({queue.background_waiting} background)" if queue.background_waiting else "")
