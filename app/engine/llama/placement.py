"""Where llama put the model's layers, read from llama's own load log (docs/design.md, engine fact 3).

A model that silently runs on the host CPU looks healthy and is four times too slow; the engine
refuses it. The log is the only place llama says which device got which layer.
"""

from __future__ import annotations

import re
from collections import defaultdict

from app.engine.events import CardPlacement, EngineError

_LAYER = re.compile(r"layer\s+(\d+) assigned to device (\S+?),")
_BUFFER = re.compile(r"load_tensors:\s+\S*\[([^\]]+)\] model buffer size =\s+([\d.]+) MiB")


def layers_by_device(log: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for layer, device in _LAYER.findall(log):
        found[device].append(int(layer))
    return dict(found)


def buffers_by_endpoint(log: str) -> dict[str, int]:
    """Bytes of weights each RPC card received ("RPC0[127.0.0.1:50052] model buffer size = 18.29 MiB")."""
    return {endpoint: int(float(mib) * 1024 * 1024) for endpoint, mib in _BUFFER.findall(log)}


def place(log: str, *, devices: dict[str, str], n_layers: int) -> tuple[tuple[CardPlacement, ...], tuple[int, ...]]:
    """Map llama's placement onto the cards (`devices`: ggml device name → card endpoint).

    Returns the per-card placement and the repeating layers left on the host, and raises
    EngineError when any of the model's repeating layers did not land on a card.
    """
    by_device = layers_by_device(log)
    if not by_device:
        raise EngineError("llama did not report where it placed the layers; cannot verify the cards are used")
    buffers = buffers_by_endpoint(log)
    cards = tuple(
        CardPlacement(
            endpoint=endpoint,
            device=device,
            layers=tuple(sorted(by_device.get(device, []))),
            buffer_bytes=buffers.get(endpoint, 0),
        )
        for device, endpoint in devices.items()
    )
    host = tuple(
        sorted(
            layer
            for device, layers in by_device.items()
            if device not in devices
            for layer in layers
            if layer < n_layers
        )
    )
    if host:
        raise EngineError(
            f"{len(host)} of {n_layers} layers were placed on the host CPU instead of the cards "
            f"(layers {host[0]}-{host[-1]}); check that every card is registered and has memory"
        )
    return cards, host
