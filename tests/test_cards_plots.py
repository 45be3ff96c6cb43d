"""The Cards tab's plots draw a bounded number of points per card over their ten minutes, whatever the poll
rate: every sample drawn made a page showing the tab take 12.7-14 s to draw its plots after ten minutes of
samples, and every page load (which draws the tab's state) ~3 s more CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.telemetry.service import HISTORY_S
from app.ui.cards_tab import PLOT_POINTS, plot_frame

NOW = 1_000_000.0


def samples(every_s: float, value: Callable[[int, float], float]) -> list[dict[str, Any]]:
    count = int(HISTORY_S / every_s)
    return [
        {"t": NOW - i * every_s, "card": card, "load_pct": value(card, i * every_s), "temperature_c": None}
        for i in range(count)
        for card in range(4)
    ]


def test_ten_minutes_of_samples_at_two_a_second_are_drawn_as_at_most_the_plot_points_per_card() -> None:
    frame = plot_frame(samples(0.5, lambda card, ago: 10.0 * card), "load_pct", NOW)
    per_card = frame.groupby("card").size()
    assert list(per_card.index) == ["card 0", "card 1", "card 2", "card 3"]
    assert (per_card <= PLOT_POINTS).all() and (per_card >= PLOT_POINTS - 1).all(), per_card.to_dict()
    assert frame.groupby("card")["load_pct"].agg(["min", "max"]).to_dict("list") == {
        "min": [0.0, 10.0, 20.0, 30.0],
        "max": [0.0, 10.0, 20.0, 30.0],
    }  # a steady value stays itself, each card its own
    assert frame["minutes"].min() >= -HISTORY_S / 60 and frame["minutes"].max() < 0


def test_a_step_stays_where_it_happened_and_each_point_is_its_buckets_mean() -> None:
    # load 90 % during the last minute, 0 % before: the step is at one minute ago, give or take a bucket
    frame = plot_frame(samples(1.0, lambda card, ago: 90.0 if ago < 60 else 0.0), "load_pct", NOW)
    card0 = frame[frame["card"] == "card 0"].sort_values("minutes")
    high = card0[card0["load_pct"] == 90.0]["minutes"]
    low = card0[card0["load_pct"] == 0.0]["minutes"]
    assert high.min() > -1.0 - HISTORY_S / PLOT_POINTS / 60 and low.max() < -1.0 + HISTORY_S / PLOT_POINTS / 60
    assert set(card0["load_pct"]) == {0.0, 90.0}  # buckets of 5 whole seconds: none straddles the step here


def test_samples_without_the_value_draw_nothing_rather_than_zero() -> None:
    frame = plot_frame(samples(1.0, lambda card, ago: 1.0), "temperature_c", NOW)
    assert frame.empty and list(frame.columns) == ["minutes", "card", "temperature_c"]
