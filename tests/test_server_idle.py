"""An idle appliance keeps its web thread quiet: Gradio's queue, as it comes, looks for work every 1 ms and
kept 0.1 of a core busy with nobody on the pages (bench/idle_web.py: 0.116 → 0.020 of a core)."""

from __future__ import annotations

import gradio as gr

from app.server import PROGRESS_IDLE_S, QUEUE_IDLE_S, _calm_queue


def test_a_mounted_pages_queue_polls_at_the_apps_pace_not_gradios_millisecond() -> None:
    with gr.Blocks() as page:
        box = gr.Textbox()
        box.submit(lambda text: text, box, box)
    page.queue(default_concurrency_limit=1)
    queue = page._queue
    assert queue.sleep_when_free < QUEUE_IDLE_S  # the installed Gradio still names them, and polls faster
    _calm_queue(page)
    assert (queue.sleep_when_free, queue.progress_update_sleep_when_free) == (QUEUE_IDLE_S, PROGRESS_IDLE_S)
