"""What a handler may know of its caller."""

from __future__ import annotations

import gradio as gr


def client_address(request: gr.Request | None) -> str:
    """The caller's network address (what login throttling counts by), "?" when unknown."""
    return request.client.host if request is not None and request.client else "?"
