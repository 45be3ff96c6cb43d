"""How to build an engine: which model, which cards, which llama.cpp knobs. Picklable, import-light."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EngineConfig:
    model_path: Path
    model_name: str
    cards: tuple[str, ...]
    n_ctx: int = 4096
    n_batch: int = 512
    n_ubatch: int = 512
    n_threads: int = 2
    prompt_chunk: int = 128
    parallel: int = 4  # answers generated at once (slots: llama.cpp sequences in one batch)
    kv_cache_mb: int = 2048  # host memory for the KV of sequences whose slot was reused (0 = none)
    tensor_split: tuple[float, ...] | None = None
    split_mode: str = "layer"
    max_tokens_limit: int = 4096
    chat_template: str | None = None  # a file in template_dir that overrides the GGUF's template
    kv_type: str = "f16"  # f16, q8_0 or q4_0 (always with flash attention: see engine.py)
    health_offset: int | None = 1000  # a card's /health port is its RPC port plus this (None: no agent)
    step_timeout_s: float = 30.0  # a step (prompt chunk or token) running longer means a card hangs
    template_dir: Path = Path(__file__).resolve().parents[2] / "assets" / "chat_templates"
