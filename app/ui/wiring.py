"""What the page and its tabs share: the engine's concurrency group and the on-load hook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENGINE_QUEUE = "engine"  # every engine-bound event shares one concurrency group
ENGINE_LISTENERS = 64  # our own queue serialises the engine; Gradio only has to let callers in


@dataclass(frozen=True)
class OnLoad:
    """What a tab wants run when a browser opens the page (restore its state)."""

    fn: Callable[..., Any]
    inputs: list[Any]
    outputs: list[Any]
