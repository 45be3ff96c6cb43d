"""The Cards tab's three plots in Chromium: every sample redrawn each second ÷ 5-s buckets as the app draws them.

    .venv/bin/python bench/cards_plots.py [--rounds 4] [--every-s 0.5]

One small Gradio page per variant on loopback with the tab's three LinePlots (tokens/s, load, temperature,
four cards), fed ten minutes of samples at `--every-s` (1,200 a card at the tests' 0.5 s; 600 at the
product's 1 s): every sample redrawn every second (the tab before 2026-12-03), the buckets of
`app.ui.cards_tab.plot_frame` redrawn every second, and the buckets redrawn once a bucket (the app now).
Chromium (Debian's, headless) opens each variant in turn, `--rounds` times; the bench reads the seconds
until the three plots are drawn and the CPU seconds of Chromium (and Playwright's driver) over 10 s shown.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import pandas as pd
from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from app.telemetry.service import HISTORY_S
from app.ui.cards_tab import PLOTS_EVERY_S, plot_frame

KEYS = ["tokens_per_s", "load_pct", "temperature_c"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def history(every_s: float, now: float) -> list[dict[str, float]]:
    count = int(HISTORY_S / every_s)
    return [
        {
            "t": now - i * every_s,
            "card": card,
            "tokens_per_s": 40.0 + (i % 17),
            "load_pct": float((i * 7 + card * 13) % 100),
            "temperature_c": 45.0 + card + (i % 5) / 5,
        }
        for i in range(count)
        for card in range(4)
    ]


def every_sample(rows: list[dict[str, float]], key: str, now: float) -> pd.DataFrame:
    return pd.DataFrame(
        [{"minutes": round((r["t"] - now) / 60, 3), "card": f"card {int(r['card'])}", key: r[key]} for r in rows]
    )


def page(every_s: float, bucketed: bool, redraw_s: float) -> gr.Blocks:
    def frames() -> list[pd.DataFrame]:
        now = time.time()
        rows = history(every_s, now)
        if bucketed:
            return [plot_frame(rows, key, now) for key in KEYS]  # type: ignore[arg-type]
        return [every_sample(rows, key, now) for key in KEYS]

    with gr.Blocks() as blocks:
        plots = [gr.LinePlot(x="minutes", y=key, color="card", height=220, elem_id=f"plot-{key}") for key in KEYS]
        blocks.load(frames, None, plots)
        gr.Timer(redraw_s).tick(frames, None, plots)
    return blocks


def chromium_cpu(browser_pid: int) -> float:
    """CPU seconds of every process under this one: Chromium and Playwright's driver (the pages' server is a
    thread of this process, not counted)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        pid, ppid = map(int, line.split())
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [browser_pid]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--every-s", type=float, default=0.5)
    parser.add_argument("--first-port", type=int, default=30920)
    args = parser.parse_args()
    variants = {"every sample, 1 s": (False, 1.0), "buckets, 1 s": (True, 1.0), "buckets, app": (True, PLOTS_EVERY_S)}
    urls = {}
    for offset, (name, (bucketed, redraw_s)) in enumerate(variants.items()):
        blocks = page(args.every_s, bucketed, redraw_s)
        blocks.launch(server_name="127.0.0.1", server_port=args.first_port + offset, prevent_thread_lock=True)
        urls[name] = f"http://127.0.0.1:{args.first_port + offset}/"
    drawn: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        for _ in range(args.rounds):
            for name in variants:  # the variants take turns in each round
                context = browser.new_context(viewport={"width": 1366, "height": 900})
                tab = context.new_page()
                started = time.monotonic()
                tab.goto(urls[name], wait_until="load")
                for key in KEYS:
                    tab.locator(f"#plot-{key} canvas, #plot-{key} svg").first.wait_for(timeout=120_000)
                drawn[name].append(time.monotonic() - started)
                before = chromium_cpu(os.getpid())
                time.sleep(10)
                cpu[name].append(chromium_cpu(os.getpid()) - before)
                context.close()
        browser.close()
    points = int(HISTORY_S / args.every_s)
    print(f"{points} samples a card ({args.every_s} s apart), {args.rounds} rounds, medians")
    for name in variants:
        print(
            f"  {name:17s} plots drawn {statistics.median(drawn[name]):6.2f} s   "
            f"CPU over 10 s shown {statistics.median(cpu[name]):6.2f} s"
        )
    first = next(iter(variants))
    for name in list(variants)[1:]:
        print(
            f"  {name} / {first}: drawn {statistics.median(drawn[name]) / statistics.median(drawn[first]):.2f}, "
            f"CPU {statistics.median(cpu[name]) / statistics.median(cpu[first]):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
