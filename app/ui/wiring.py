"""What the page and its tabs share: the engine's concurrency group and the on-load hook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENGINE_QUEUE = "engine"  # every engine-bound event shares one concurrency group
ENGINE_LISTENERS = 64  # our own queue serialises the engine; Gradio only has to let callers in

# The options of a page's steps. QUIET: answers at once and cannot fail. MAY_REFUSE: runs through the
# queue, since Gradio 6 shows a refusal's text only for those (a `queue=False` step's gr.Error becomes a
# bare red "Error" on its outputs). ENGINE_BOUND: waits for the engine, in its concurrency group. None shows
# Gradio's own overlay ("processing | 12.7s", a "0.3s" flickering at each timer's tick): what a step is doing
# is said by its outputs, in our words (issue 22 item 14; tests/test_browser_wording.py).
HIDDEN = "hidden"
QUIET: dict[str, Any] = {"queue": False, "api_visibility": "private", "show_progress": HIDDEN}
MAY_REFUSE: dict[str, Any] = {"concurrency_limit": None, "api_visibility": "private", "show_progress": HIDDEN}
ENGINE_BOUND: dict[str, Any] = {
    "concurrency_limit": ENGINE_LISTENERS,
    "concurrency_id": ENGINE_QUEUE,
    "api_visibility": "private",
    "show_progress": HIDDEN,
}


@dataclass(frozen=True)
class OnLoad:
    """What a tab wants run when a browser opens the page (restore its state)."""

    fn: Callable[..., Any]
    inputs: list[Any]
    outputs: list[Any]
