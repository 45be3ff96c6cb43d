"""What a generation reports, in order: Queued* → Reading → Token* → Done | Failed.

Plain dataclasses: they cross the pipe between the engine worker and the app unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from app.engine.engine_config import MAX_TOKENS, TEMPERATURE
from app.errors import QuartetError

FinishReason = Literal["stop", "length", "cancelled"]
Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class GenerationRequest:
    messages: tuple[Message, ...]
    max_tokens: int = MAX_TOKENS
    temperature: float = TEMPERATURE
    top_p: float = 0.95
    stop: tuple[str, ...] = ()
    seed: int | None = None
    json_schema: str | None = None  # constrain the answer to JSON matching this schema ("{}" = any object)
    background: bool = False  # batch work (extraction, summary parts): takes at most `background_slots` slots
    prompt: str | None = None  # a plain text completion: this text tokenized as is (no chat template, no messages)
    prompt_ids: tuple[int, ...] | None = None  # a plain completion given as the model's own token ids (prompt "")
    logprobs: int | None = None  # report each token's log-probability and this many likeliest alternatives
    tools: str | None = None  # tools offered (OpenAI's JSON): given to a chat template that renders `tools`
    tools_text: str = ""  # else these words describing them go first in the system message


@dataclass(frozen=True)
class Stats:
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    ttft_s: float
    prompt_tps: float
    decode_tps: float
    total_s: float
    finish_reason: FinishReason
    drafted_tokens: int = 0  # tokens proposed by speculative decoding (drafts.py) and checked by the model
    accepted_tokens: int = 0  # ... of which the model kept: each saved a step
    steps: int = 0  # llama_decode steps that gave this answer tokens (generated ÷ steps = tokens per step)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Queued:
    position: int  # 1 = next in line
    held: str | None = None  # why no answer may start now (a card too hot), if that is why


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability under the model, with the likeliest alternatives."""

    token: str
    logprob: float
    bytes: tuple[int, ...]
    top: tuple[tuple[str, float, tuple[int, ...]], ...] = ()  # (token, logprob, bytes), likeliest first


@dataclass(frozen=True)
class Reading:
    """The answer has a slot: the engine reads its prompt now (nobody is ahead of it any more)."""


@dataclass(frozen=True)
class Token:
    text: str
    logprobs: tuple[TokenLogprob, ...] = ()  # the tokens this text came from, when the request asked for them


@dataclass(frozen=True)
class Done:
    stats: Stats


# request: the request cannot run as asked; context: the prompt overflows the model's context (shorten it,
# or split the work); card: a card failed (named); busy: the queue is full or a switch runs; timeout: no end
# within the caller's time; cancelled: stopped before it could start; engine: the engine is not available.
FailureKind = Literal["request", "context", "card", "busy", "timeout", "cancelled", "engine"]


@dataclass(frozen=True)
class Failed:
    message: str
    card: str | None = None
    kind: FailureKind = "engine"


Event = Queued | Reading | Token | Done | Failed


@dataclass(frozen=True)
class CardPlacement:
    endpoint: str
    device: str
    layers: tuple[int, ...]
    buffer_bytes: int


@dataclass(frozen=True)
class Capabilities:
    """What a loaded backend can do; pages, admin and /v1 offer these and say what is missing."""

    json_schema: bool = True  # answers constrained to a JSON Schema (extraction, /v1 response_format, tools)
    exact_counts: bool = True  # token counts from the model's own tokenizer (else estimated, on the safe side)
    cached_tokens: bool = True  # reports the prompt tokens it did not compute again
    logprobs: bool = True  # each token's log-probability and alternatives
    completions: bool = True  # plain-text prompts, no chat template (/v1/completions)
    placement: bool = True  # layers placed on the cards: per-card layers and weights, the fit check
    catalog: bool = True  # switches between the catalog's GGUF models and card changes

    def missing(self) -> tuple[str, ...]:
        return tuple(name for name, able in asdict(self).items() if not able)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    path: str  # the GGUF file; for an upstream, its URL
    n_layers: int
    n_ctx: int
    cards: tuple[CardPlacement, ...]
    host_layers: tuple[int, ...] = field(default_factory=tuple)
    load_s: float = 0.0
    backend: str = "cards"
    capabilities: Capabilities = field(default_factory=Capabilities)

    def serving(self) -> str:
        """Where it runs, for a status line: "on 4 cards", "from the upstream at http://…"."""
        return f"from the upstream at {self.path}" if self.backend == "upstream" else f"on {len(self.cards)} cards"


class EngineError(QuartetError, RuntimeError):
    """A failure to explain to a person: what happened, to which card or model, and what to do."""

    kind: FailureKind

    def __init__(self, message: str, *, card: str | None = None, kind: FailureKind | None = None) -> None:
        super().__init__(message, kind=kind or ("card" if card else "engine"), card=card)

    def failed(self) -> Failed:
        return Failed(str(self), self.card, self.kind)
