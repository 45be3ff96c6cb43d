"""How to build an engine: which model, which cards, which llama.cpp knobs, how its queue behaves.

This is the `[engine]` section of the settings (app/settings.py), declared once: the composition root hands
`settings.engine` to the engine as it is. Picklable (it crosses to the engine worker), import-light, and
checked when built — `dataclasses.replace` checks a changed copy too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic.dataclasses import dataclass

from app.endpoint import HEALTH_OFFSET, EndpointText

CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quartet"
DEMO_MODEL = CACHE_DIR / "models" / "gemma-3-270m-q4_k_m.gguf"
# Below Linux's ephemeral range (32768–60999): an outgoing connection never takes a local card's port
LOCAL_CARDS = tuple(f"127.0.0.1:{port}" for port in range(25052, 25056))
TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "assets" / "chat_templates"
# Defaults other modules start from (a request's, a catalog entry's): declared here, used there.
N_CTX = 16384  # an agent's first request (OpenCode: ten tools and its prompt, ~7,200 tokens) with room to work
KV_TYPE = "f16"
MAX_TOKENS = 512
TEMPERATURE = 0.7


BackendName = Literal["cards", "upstream"]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class EngineConfig:
    model_path: Path = Field(default=DEMO_MODEL, description="GGUF file of the model to load at start.")
    model_name: str = Field(default="Gemma 3 270M (demo)", description="Display name of the loaded model.")
    cards: tuple[EndpointText, ...] = Field(
        default=LOCAL_CARDS,
        description="The cards (host:port of each RPC server, in pipeline order; health on port + "
        "health_offset). With `backend = upstream` they are read for health only, and may be empty.",
    )
    health_offset: int = Field(
        default=HEALTH_OFFSET, ge=1, description="A card's health endpoint listens on its RPC port plus this offset."
    )
    models_dir: Path = Field(default=CACHE_DIR / "models", description="The only folder models may be loaded from.")
    catalog_path: Path = Field(
        default=Path("assets/models.toml"),
        description="TOML list of the models the admin can switch between (relative: to the app's folder).",
    )
    n_ctx: int = Field(default=N_CTX, ge=256, description="Context length in tokens.")
    n_batch: int = Field(default=512, ge=1, description="Logical batch size for prompt processing.")
    n_ubatch: int = Field(default=512, ge=1, description="Physical batch size for prompt processing.")
    prompt_chunk: int = Field(
        default=128, ge=1, description="Prompt tokens evaluated between two checks for cancellation."
    )
    n_threads: int = Field(default=2, ge=1, description="Host CPU threads of the engine.")
    tensor_split: tuple[float, ...] | None = Field(
        default=None, description="Share of layers per card; empty for llama's split by free memory."
    )
    split_mode: Literal["layer", "row", "tensor"] = Field(
        default="layer", description="How layers are spread across cards; only 'layer' works over RPC."
    )
    kv_type: str = Field(
        default=KV_TYPE, description="Type of the KV cache: f16, q8_0 or q4_0 (always with flash attention)."
    )
    chat_template: str | None = Field(
        default=None, description="A file in `template_dir` that overrides the GGUF's chat template."
    )
    template_dir: Path = Field(
        default=TEMPLATE_DIR, description="Folder of the chat templates for GGUFs without one (named by architecture)."
    )
    isolation: bool = Field(
        default=True, description="Run llama.cpp in a supervised worker process (a card fault costs one answer)."
    )
    parallel: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Answers generated at once, batched in one step across the cards; each holds its own "
        "n_ctx of KV cache on the cards. More wait in the queue.",
    )
    kv_cache_mb: int = Field(
        default=2048,
        ge=0,
        description="Host memory (MiB) for the KV cache of conversations whose slot another prompt took: "
        "saved when the slot is reused, restored when the conversation returns, least recently used out "
        "first; 0 = keep none (a returning conversation's prompt is read again).",
    )
    background_slots: int = Field(
        default=1,
        ge=1,
        description="Slots that background work (extraction batches, summary parts) may take at once; "
        "people's answers are served first.",
    )
    max_queue: int = Field(
        default=32, ge=1, description="Answers that may wait in the queue before new ones are refused."
    )
    max_tokens: int = Field(default=MAX_TOKENS, ge=1, description="Default cap on generated tokens per answer.")
    max_tokens_limit: int = Field(default=4096, ge=1, description="Hard cap a request may ask for.")
    temperature: float = Field(default=TEMPERATURE, ge=0, description="Default sampling temperature.")
    step_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds one engine step (a prompt chunk or a token) may take before the card holding it "
        "is declared not responding: the answer fails naming it and the engine restarts when it is back.",
    )
    swa_full: bool = Field(
        default=False,
        description="Keep the sliding-window layers' KV cache (Gemma: five layers in six) at full context too. Off, "
        "they hold each answer's window only (as llama-server does): the 27B's cache takes half the cards' memory; "
        "a prompt cut back further than the window reaches is read again from the nearest checkpoint.",
    )
    ctx_checkpoints: int = Field(
        default=3,
        ge=0,
        le=16,
        description="Checkpoints of the sliding-window layers each answer keeps while its prompt is read (the start "
        "of the last message, and a step before the end), in host memory: an agent re-sending its prompt with a "
        "new last message, or an answer asked again, reads only what changed. Without them (0) such a prompt is "
        "read whole. Unused with `swa_full`.",
    )
    draft_max: int = Field(
        default=16,
        ge=0,
        le=64,
        description="Speculative decoding from the answer's context: the most tokens drafted for one step, where "
        "the last `draft_ngram` tokens stood earlier in the prompt or the answer (a quote, a copied value). "
        "At temperature 0 the answer is the same token for token; 0 turns it off.",
    )
    draft_ngram: int = Field(
        default=4,
        ge=1,
        le=32,
        description="Tokens that must match an earlier place of the context before what followed there is drafted.",
    )

    backend: BackendName = Field(
        default="cards",
        description="What generates the answers: `cards` (llama.cpp split across the card agents) or "
        "`upstream` (an OpenAI-compatible server: the boards' vendor runtime, vLLM, llama-server).",
    )
    upstream_url: str = Field(
        default="", description="Base URL of the upstream's OpenAI API (`http://host:port/v1`), for `upstream`."
    )
    upstream_key: SecretStr = Field(
        default=SecretStr(""), description="Bearer key the upstream wants, if any; never logged or shown."
    )
    upstream_model: str = Field(
        default="", description="Model id to ask the upstream for; empty: the first one its /v1/models lists."
    )
    upstream_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds the upstream may take to answer a request, and between two chunks of a stream, "
        "before the answer fails naming it.",
    )
    upstream_answer_s: float = Field(
        default=600.0,
        gt=0,
        description="Seconds one answer may take upstream in all, from its request to its last chunk (4,096 "
        "tokens at 13 tokens/s take 315 s): past it the request is closed and the answer fails naming the "
        "upstream, however busy its stream (keep-alives, empty chunks) kept it.",
    )

    @field_validator("cards")
    @classmethod
    def _cards_listed_once(cls, cards: tuple[str, ...]) -> tuple[str, ...]:
        twice = sorted({card for card in cards if cards.count(card) > 1})
        if twice:
            raise ValueError(f"card endpoint {twice[0]} is listed twice")
        return cards

    @model_validator(mode="after")
    def _backend_has_what_it_needs(self) -> EngineConfig:
        if self.backend == "cards" and not self.cards:
            raise ValueError("at least one card endpoint is needed")
        if self.backend == "upstream" and not self.upstream_url.startswith(("http://", "https://")):
            raise ValueError("backend = upstream needs upstream_url, the upstream's http(s)://host:port/v1")
        return self
