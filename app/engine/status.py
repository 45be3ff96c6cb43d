"""What the engine says about itself, as one frozen typed value (built by `EngineService.status()`).

Pydantic models: the same value is read by the panels and serialised for `/status` and `/health`.
Telemetry adds the cards' view to it (app/telemetry/views.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Read at the top level wherever the engine groups them: the slots in use, the line, and the cache counters
# (slots' prefix reuse and the host KV store; 0 until the engine reports them).
LIFTED = (
    "running",
    "waiting",
    "prefix_hits",
    "host_restores",
    "cached_tokens_total",
    "kv_host_bytes",
    "kv_host_entries",
)


class Frozen(BaseModel):
    """A frozen value, read by attribute (`status.queue.waiting`); it is not a mapping."""

    model_config = ConfigDict(frozen=True)


class ModelView(Frozen):
    name: str
    gguf_file: str  # not "path": gradio_client would fetch it as a file
    n_layers: int
    n_ctx: int
    load_s: float
    backend: str = "cards"  # what serves it: "cards" (llama.cpp on the cards) or "upstream"
    capabilities: dict[str, bool] = Field(default_factory=dict)  # app/engine/events.py Capabilities, by name

    def can(self, capability: str) -> bool:
        """Whether the loaded engine can do this (`json_schema`, `logprobs`, `completions`, `placement`, …)."""
        return self.capabilities.get(capability, True)


class Placed(Frozen):
    """What llama placed on one card: its layers and the bytes of weights it received."""

    endpoint: str
    device: str
    layers: tuple[int, ...]
    buffer_bytes: int


class QueueView(Frozen):
    running: int = 0  # answers in the slots
    waiting: int = 0  # answers in line
    held: str | None = None  # why no answer may start now
    parallel: int = 1  # slots
    background: int = 0  # background answers in the slots
    background_slots: int = 1  # slots background work may take at once
    background_waiting: int = 0


class EngineStatus(Frozen):
    state: str
    message: str
    switching: str | None = None
    down_card: str | None = None
    isolated: bool = True
    model: ModelView | None = None
    placement: tuple[Placed, ...] = Field(default=(), exclude=True)  # shown through each card's view
    queue: QueueView = QueueView()
    live_tps: float = 0.0  # aggregate tokens/s across every running answer
    last_stats: dict[str, Any] | None = None  # the last answer's Stats
    last_cancel_s: float | None = None
    running: int = 0  # answers in the slots (as in `queue`)
    waiting: int = 0  # answers in line (as in `queue`)
    prefix_hits: int = 0  # answers that found their prompt's start in a slot
    host_restores: int = 0  # conversations whose KV cache came back from host memory
    cached_tokens_total: int = 0  # prompt tokens not computed again, since the app started
    kv_host_bytes: int = 0  # KV cache kept in host memory now
    kv_host_entries: int = 0

    @model_validator(mode="before")
    @classmethod
    def _counters_at_top(cls, data: Any) -> Any:
        """The slot and cache counters are read at the top level, wherever the engine groups them."""
        if not isinstance(data, dict):
            return data
        lifted = dict(data)
        for group in [v for v in data.values() if isinstance(v, dict)]:
            for name in LIFTED:
                if name in group and name not in lifted:
                    lifted[name] = group[name]
        return lifted
