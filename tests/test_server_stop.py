"""An open page does not hold the app's stop: its heartbeat stream (which never ends by itself) is ended
first, as Gradio's own close() does; uvicorn otherwise waited out its grace (4.4 s with one page open) and
cancelled the stream, logging "timeout graceful shutdown exceeded"."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from tests.harness import Appliance, models_folder

pytestmark = pytest.mark.slow  # an app process

GRACE_EXCEEDED = "timeout graceful shutdown exceeded"


def test_a_stop_with_a_page_stream_open_ends_the_stream_instead_of_waiting_out_the_grace(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    nowhere = {"QUARTET_ENGINE__BACKEND": "upstream", "QUARTET_ENGINE__UPSTREAM_URL": "http://127.0.0.1:9/v1"}
    app = Appliance(None, tmp_path / "var", tmp_path / "logs", models_folder(tmp_path / "models"), settings=nowhere)
    app.start(engine=False)  # no engine needed: the page and its streams are the subject
    opened = threading.Event()

    def hold_the_stream() -> None:  # what an open tab keeps: GET …/heartbeat/<session>, an endless event stream
        with httpx.stream("GET", f"{app.url}/gradio_api/heartbeat/stop-test", timeout=30) as stream:
            for _ in stream.iter_lines():
                opened.set()

    reader = threading.Thread(target=hold_the_stream, daemon=True)
    reader.start()
    try:
        assert opened.wait(15), "the heartbeat stream did not open"
    finally:
        app.stop()
    reader.join(10)
    log = (tmp_path / "logs" / "app-1.log").read_text(encoding="utf-8", errors="replace")
    assert app.proc is not None and app.proc.returncode == 0, log[-2000:]
    assert not reader.is_alive(), "the stream was still open after the app stopped"
    assert GRACE_EXCEEDED not in log, "the stop waited out its grace for the open stream:\n" + log[-2000:]
