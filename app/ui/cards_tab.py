"""The Cards tab: a panel per card and plots of tokens/s, load and temperature over ten minutes."""

from __future__ import annotations

import time
from typing import Any

import gradio as gr
import pandas as pd

from app.telemetry.service import HISTORY_S, Telemetry
from app.ui import display, panels
from app.ui.wiring import QUIET, OnLoad

_EVERY_S = 1.0
# Points a plot draws per card over its ten minutes: the samples (one a second at the default poll, two a
# second at the tests') are averaged in 5-s buckets. Drawing every sample cost a page showing the tab 12.7-14 s
# to draw its plots against 4.4-6.7 s with a minute of samples, and every page load ~3 s more CPU, since the
# page draws the tab's state at load (1,200 samples a card; a side-by-side run on 2026-12-03).
PLOT_POINTS = 120
PLOTS_EVERY_S = HISTORY_S / PLOT_POINTS  # the plots are redrawn once a bucket, the panels every second
_PLOTS = [("tokens_per_s", "tokens/s"), ("load_pct", "load %"), ("temperature_c", "temperature °C")]


def build(telemetry: Telemetry) -> tuple[list[gr.Timer], OnLoad]:
    """Returns the tab's timers (the panels' and the plots'), so the page can pause them while the tab is
    hidden, and its refresh, which
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
    plots_timer = gr.Timer(PLOTS_EVERY_S, active=False)

    def panels_now() -> tuple[str, str]:
        now = telemetry.status()
        return panels.overall(now), panels.card_strip(now)

    def plots_now() -> tuple[Any, ...]:
        frames = [_frame(telemetry, key) for key, _ in _PLOTS]
        missing = [title for (_, title), frame in zip(_PLOTS, frames, strict=True) if frame.empty]
        shown = [gr.update(value=frame, visible=not frame.empty) for frame in frames]
        message = f"No card reports {', '.join(missing)} (no sensor)." if missing else ""
        return *shown, gr.update(value=message, visible=bool(missing))

    def refresh() -> tuple[Any, ...]:
        return *panels_now(), *plots_now()

    timer.tick(panels_now, None, [overall, strip], **QUIET)
    plots_timer.tick(plots_now, None, [*plots, note], **QUIET)
    return [timer, plots_timer], OnLoad(refresh, [], [overall, strip, *plots, note])


def _frame(telemetry: Telemetry, key: str) -> pd.DataFrame:
    return plot_frame(telemetry.history(), key, time.time())


def plot_frame(rows: list[dict[str, Any]], key: str, now: float, points: int = PLOT_POINTS) -> pd.DataFrame:
    """A plot's frame of `key` per card: the samples of each HISTORY_S / `points` seconds averaged into one
    point, at their mean time (minutes before `now`); samples without the value (no sensor) left out."""
    bucket_s = HISTORY_S / points
    sums: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        value = row.get(key)
        if value is None:
            continue
        ago = now - row["t"]
        total = sums.setdefault((row["card"], int(ago // bucket_s)), [0.0, 0.0, 0])
        total[0] += ago
        total[1] += value
        total[2] += 1
    frame = pd.DataFrame(
        [
            {"minutes": round(-ago / count / 60, 3), "card": f"card {card}", key: value / count}
            for (card, _), (ago, value, count) in sorted(sums.items(), key=lambda item: (item[0][0], -item[0][1]))
        ]
    )
    if frame.empty:
        return pd.DataFrame({"minutes": [], "card": [], key: []})
    return frame
