"""The Cards feature's named endpoints (gradio_client): the appliance's status and every card's reading."""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.telemetry.service import Telemetry


def register(telemetry: Telemetry) -> None:
    def status() -> dict[str, Any]:
        """The loaded model and its layer count, the queue, and each card's state and layers."""
        return telemetry.status().model_dump(mode="json")

    def cards() -> list[dict[str, Any]]:
        """The latest sample of every card: state, load, temperature (None = no sensor), memory, layers, tok/s."""
        return [card.reading() for card in telemetry.status().cards]

    gr.api(cards, api_name="cards", queue=False)
    gr.api(status, api_name="status", queue=False)
