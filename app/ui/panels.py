"""Card panels as HTML: state, load, temperature (or "no sensor"), memory, layers, tokens/s."""

from __future__ import annotations

import html
from typing import Any


def _gib(n: float | None) -> str:
    return "–" if n is None else f"{n / 2**30:.1f} GiB"


def _mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def _layers(layers: list[int]) -> str:
    if not layers:
        return "no layers"
    return f"layers {layers[0]}–{layers[-1]}" if len(layers) > 1 else f"layer {layers[0]}"


def card_panel(card: dict[str, Any], *, compact: bool = False) -> str:
    state = card["state"]
    temp = card["temperature_c"]
    thermal = card.get("thermal") or "none"
    temp_text = "no sensor" if temp is None else f"{temp:.1f} °C"
    load = card.get("load_pct")
    load_text = "–" if load is None else f"{load:.0f} %"
    if card.get("load_source") == "process_cpu":
        load_text += " cpu"
    failing = state in ("down", "not-responding")
    reason = f"<div class='q-reason'>{html.escape(card['reason'] or '')}</div>" if failing else ""
    rows = [
        ("load", load_text),
        ("temp", f"<span class='q-thermal-{thermal}'>{temp_text}</span>"),
        ("tok/s", f"{card['tokens_per_s']:.1f}"),
    ]
    if not compact:
        rows += [
            ("memory", f"{_gib(card['mem_used_bytes'])} / {_gib(card['mem_total_bytes'])}"),
            ("model", f"{_layers(card['layers'])} · {_mib(card['layer_bytes'])}"),
        ]
    cells = "".join(f"<div class='q-k'>{k}</div><div class='q-v'>{v}</div>" for k, v in rows)
    return (
        f"<div class='q-panel q-{state}' data-card='{card['index']}' data-state='{state}'>"
        f"<div class='q-title'>card {card['index']} <span class='q-badge'>{state.replace('-', ' ')}</span></div>"
        f"<div class='q-endpoint'>{html.escape(card['endpoint'])}</div>{reason}"
        f"<div class='q-grid'>{cells}</div></div>"
    )


def card_strip(status: dict[str, Any], *, compact: bool = False) -> str:
    panels = "".join(card_panel(card, compact=compact) for card in status["cards"])
    return f"<div class='q-panels'>{panels}</div>"


def overall(status: dict[str, Any]) -> str:
    model = (status.get("model") or {}).get("name", "no model")
    last = status.get("last_stats") or {}
    live = status.get("live_tps") or 0.0
    decode = live or last.get("decode_tps", 0.0)
    hold = status.get("thermal", {}).get("hold")
    warn = f"<div class='q-hold'>⚠ {html.escape(hold)}</div>" if hold else ""
    return (
        f"<div class='q-overall'><span><b>{html.escape(model)}</b> · {html.escape(status['state'])}</span>"
        f"<span>decode {decode:.1f} tok/s{' (live)' if live else ''}</span>"
        f"<span>first token {last.get('ttft_s', 0.0):.2f} s</span>"
        f"<span>{_queue(status['queue'])}</span>"
        f"</div>{warn}"
    )


def _queue(queue: dict[str, Any]) -> str:
    """'3 running · 2 waiting (1 background)': the slots in use and the line, background work named."""
    text = f"{queue['running']} running · {queue['waiting']} waiting"
    background = queue.get("background_waiting", 0)
    return text + (f" ({background} background)" if background else "")
