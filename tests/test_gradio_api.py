"""tests/gradio_api.py's Client against gradio_client's own, with the race between the server's close of a
session's stream and the next call held open: a proxy in front of a small Gradio app sends the close 0.3 s
late. gradio_client's Client loses calls there (a run of run 4's suite, 2026-12-06: a `/documents` poll
cancelled); ours loses none. Should gradio_client's own stop losing them, the first test says so, and
tests/gradio_api.py can go."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError

import gradio as gr
import gradio_client
import pytest

from tests.gradio_api import Client
from tests.harness import free_port

pytestmark = pytest.mark.slow  # a Gradio app of its own and 0.3 s per lost close

CALLS = 8
HOLD_S = 0.3


def _forward(source: socket.socket, target: socket.socket, hold_close: bool) -> None:
    """Bytes from `source` to `target`; with `hold_close`, the stream's close message goes HOLD_S late."""
    try:
        while data := source.recv(65536):
            at = data.find(b"close_stream")
            if hold_close and at >= 0:
                start = data.rfind(b"data:", 0, at)
                target.sendall(data[:start])
                time.sleep(HOLD_S)
                data = data[start:]
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


@pytest.fixture(scope="module")
def late_close() -> Iterator[str]:
    """A Gradio app with one queued endpoint, behind a proxy that holds back the close of every stream."""
    with gr.Blocks() as demo:
        shown = gr.Textbox()
        gr.Button().click(lambda: "read", None, shown, api_name="read")
    demo.queue().launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    app_port = int(demo.local_url.rstrip("/").rsplit(":", 1)[1])
    listener = socket.create_server(("127.0.0.1", free_port()))

    def accept() -> None:
        while True:
            try:
                browser, _ = listener.accept()
            except OSError:
                return
            app = socket.create_connection(("127.0.0.1", app_port))
            threading.Thread(target=_forward, args=(browser, app, False), daemon=True).start()
            threading.Thread(target=_forward, args=(app, browser, True), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        listener.close()
        demo.close()


def _outcomes(client: gradio_client.Client) -> list[str]:
    said = []
    for _ in range(CALLS):
        try:
            said.append(client.predict(api_name="/read"))
        except CancelledError:
            said.append("cancelled")
    return said


def test_gradio_clients_own_client_loses_calls_sent_as_the_stream_closes(late_close: str) -> None:
    said = _outcomes(gradio_client.Client(late_close, verbose=False))
    assert "cancelled" in said, f"gradio_client {gradio_client.__version__} lost no call: tests/gradio_api.py can go"


def test_ours_waits_for_the_close_and_loses_none(late_close: str) -> None:
    assert _outcomes(Client(late_close, verbose=False)) == ["read"] * CALLS
