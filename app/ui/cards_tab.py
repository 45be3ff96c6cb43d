"""The Cards tab: a panel per card and plots of tokens/s, load and temperature over ten minutes."""

from __future__ import annotations

import time
from typing import Any

import gradio as gr
import pandas as pd

from app.telemetry.service import Telemetry
from app.ui import display, panels
from app.ui.wiring import QUIET, OnLoad

_EVERY_S = 1.0
_PLOTS = [("tokens_per_s", "tokens/s"), ("load_pct", "load %"), ("temperature_c", "temperature °C")]


def build(telemetry: Telemetry) -> tuple[gr.Timer, OnLoad]:
    """Returns the tab's timer, so the page can pause it while the tab is hidden, and its refresh, which
    the page runs when it loads and when the tab is shown: what the tab was built with is the boot-time
    state ("no model · loading"), so it starts empty. The overall line shows the answers running /
    waiting in the engine's slots and the aggregate tokens/s."""
    overall = gr.HTML(display.BEFORE_LOAD, elem_id="cards-overall")
    strip = gr.HTML("", elem_id="card-panels")
    plots = [
        gr.LinePlot(
            _frame(telemetry, key),
            x="minutes",
            y=key,
            color="card",
            title=title,
            x_title="minutes ago",
            y_title=title,
            height=220,
            elem_id=f"plot-{key}",
        )
        for key, title in _PLOTS
    ]
    note = gr.Markdown(visible=False, elem_id="plot-note")
    timer = gr.Timer(_EVERY_S, active=False)

    def refresh() -> tuple[Any, ...]:
        now = telemetry.status()
        frames = [_frame(telemetry, key) for key, _ in _PLOTS]
        missing = [title for (_, title), frame in zip(_PLOTS, frames, strict=True) if frame.empty]
        shown = [gr.update(value=frame, visible=not frame.empty) for frame in frames]
        message = f"No card reports {', '.join(missing)} (no sensor)." if missing else ""
        return panels.overall(now), panels.card_strip(now), *shown, gr.update(value=message, visible=bool(missing))

    outputs = [overall, strip, *plots, note]
    timer.tick(refresh, None, outputs, **QUIET)
    return timer, OnLoad(refresh, [], outputs)


def _frame(telemetry: Telemetry, key: str) -> pd.DataFrame:
    rows = telemetry.history()
    now = time.time()
    frame = pd.DataFrame(
        [
            {"minutes": round((r["t"] - now) / 60, 3), "card": f"card {r['card']}", key: r[key]}
            for r in rows
            if r.get(key) is not None
        ]
    )
    if frame.empty:
        return pd.DataFrame({"minutes": [], "card": [], key: []})
    return frame
