"""The model catalog: which GGUFs the appliance offers, what their headers say, and whether they fit.

Entries come from `assets/models.toml` (or the file the settings name). A model file must lie under
the models folder; paths never come from a browser. The fit check (`fit`) runs before every reload, so
a model or a setting (`parallel`, `n_ctx`, the KV type, the split) that does not fit is refused with
numbers instead of crashing halfway through a load: each card needs its real share of the weights
from the GGUF's tensor table (the last card also holds the output matrix), `parallel` × the context's
KV cache of its layers, and buffers.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import SecretStr

from app.engine.engine_config import KV_TYPE, N_CTX, EngineConfig
from app.engine.events import EngineError
from app.engine.llama.gguf_header import Header, HeaderError, read_header

_KV_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}  # bytes per element, block overhead included
_FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    32: "BF16",
}
_BUFFER_PER_CARD = 64 * 2**20  # scheduler and activation buffers besides the logits


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    name: str
    path: Path
    n_ctx: int
    kv_type: str = KV_TYPE
    chat_template: str | None = None
    description: str = ""
    upstream_url: str = ""  # an OpenAI-compatible server instead of a GGUF on the cards
    upstream_model: str = ""  # the model to ask it for (empty: the first it lists)
    upstream_key_env: str = ""  # the key by reference: the environment variable that holds it

    @property
    def is_upstream(self) -> bool:
        return bool(self.upstream_url)


@dataclass(frozen=True)
class GgufInfo:
    size_bytes: int
    architecture: str
    n_layers: int
    quantization: str
    context_length: int
    n_embd: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    weights_bytes: int


def load_catalog(path: Path, models_dir: Path) -> list[CatalogEntry]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = []
    for raw in data.get("models", []):
        file = Path(raw.get("path", ""))
        entries.append(
            CatalogEntry(
                id=raw["id"],
                name=raw["name"],
                path=file if file.is_absolute() else models_dir / file,
                n_ctx=int(raw.get("n_ctx", N_CTX)),
                kv_type=raw.get("kv_type", KV_TYPE),
                chat_template=raw.get("chat_template"),
                description=raw.get("description", ""),
                upstream_url=raw.get("upstream_url", ""),
                upstream_model=raw.get("upstream_model", ""),
                upstream_key_env=raw.get("upstream_key_env", ""),
            )
        )
    return entries


def config_for(entry: CatalogEntry, config: EngineConfig, *, models_dir: Path) -> EngineConfig:
    """The engine configuration a switch to `entry` loads, from the one loaded now: a GGUF on the cards (its
    file checked to lie in the models folder) or an upstream (its key read from the variable it names)."""
    if entry.is_upstream:
        key = os.environ.get(entry.upstream_key_env, "") if entry.upstream_key_env else ""
        return replace(
            config,
            backend="upstream",
            upstream_url=entry.upstream_url,
            upstream_model=entry.upstream_model,
            upstream_key=SecretStr(key),
            model_name=entry.name,
            n_ctx=entry.n_ctx,
        )
    check_location(entry.path, models_dir)
    if not config.cards:  # an upstream box: a GGUF has nowhere to load until cards are listed
        raise EngineError(
            f"{entry.name} loads onto the cards, and none are listed: add the card endpoints (engine.cards) "
            "on this page first",
            kind="request",
        )
    return replace(
        config,
        backend="cards",
        model_path=entry.path,
        model_name=entry.name,
        n_ctx=entry.n_ctx,
        kv_type=entry.kv_type,
        chat_template=entry.chat_template,
    )


def check_location(path: Path, models_dir: Path) -> Path:
    """The resolved path, if it lies under the models folder (symlinks and `..` resolved first)."""
    resolved, root = path.resolve(), models_dir.resolve()
    if not resolved.is_relative_to(root):
        raise EngineError(f"{path} is outside the models folder {root}; only models there load", kind="request")
    return resolved


def inspect_gguf(path: Path) -> GgufInfo:
    """Read a GGUF's header; a missing, truncated or malformed file is refused with the reason."""
    return _inspect(path, _header(path))


def _header(path: Path) -> Header:
    if not path.is_file():
        raise EngineError(f"the model file {path} is missing", kind="request")
    try:
        return read_header(path)
    except HeaderError as err:
        raise EngineError(f"{path.name} is damaged or truncated (not a readable GGUF): {err}", kind="request") from err


def _inspect(path: Path, header: Header) -> GgufInfo:
    size = path.stat().st_size
    known = [(offset, n) for _, _, offset, n in header.tensors if n is not None]
    end = header.data_start + max((offset + n for offset, n in known), default=0)
    if end > size:
        raise EngineError(f"{path.name} is damaged or truncated: {size:,} bytes of {end:,}", kind="request")
    fields = header.fields
    arch = str(fields.get("general.architecture", "unknown"))
    n_embd = int(fields.get(f"{arch}.embedding_length", 0))
    n_head = int(fields.get(f"{arch}.attention.head_count", 1)) or 1
    return GgufInfo(
        size_bytes=size,
        architecture=arch,
        n_layers=int(fields.get(f"{arch}.block_count", 0)),
        quantization=_FILE_TYPES.get(int(fields.get("general.file_type", -1)), "unknown"),
        context_length=int(fields.get(f"{arch}.context_length", 0)),
        n_embd=n_embd,
        n_head_kv=int(fields.get(f"{arch}.attention.head_count_kv", n_head)),
        head_dim=int(fields.get(f"{arch}.attention.key_length", n_embd // n_head)),
        n_vocab=int(fields.get("tokenizer.ggml.tokens", 0)),
        weights_bytes=size - header.data_start,
    )


@dataclass(frozen=True)
class CardNeed:
    """What one card must hold for an engine configuration."""

    weights: int  # its share of the weights, from the GGUF's tensor table
    kv: int  # the KV cache of its layers, for every slot
    buffers: int  # compute buffers (the last card: the output layer's logits too)

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.buffers


@dataclass(frozen=True)
class CardMemory:
    """A card's memory as its agent reports it, and what the loaded model holds there now (given back
    when it is unloaded first, as every switch does)."""

    total: int | None
    used: int | None
    held: int = 0

    @property
    def free(self) -> int | None:
        return None if self.total is None or self.used is None else self.total - self.used + self.held


@dataclass(frozen=True)
class Fit:
    info: GgufInfo
    needs: list[CardNeed]
    short: list[str]  # one sentence per card that lacks the memory

    @property
    def problem(self) -> str:
        return "the model does not fit: " + "; ".join(self.short) if self.short else ""

    def check(self) -> None:
        """Refuse, with the numbers, a configuration that would not fit on every card."""
        if self.short:
            raise EngineError(self.problem, kind="request")


def needs(config: EngineConfig) -> tuple[GgufInfo, list[CardNeed]]:
    """What each card of `config` must hold: its weights as llama's layer split places them, its
    layers' KV cache for `parallel` slots of `n_ctx` tokens (every layer at full context: with several
    sequences in one cache llama.cpp keeps sliding-window layers full-size too — "using full-size SWA
    cache" in its load log) and buffers."""
    if config.kv_type not in _KV_BYTES:
        raise EngineError(f"KV cache type {config.kv_type!r} is not one of {', '.join(_KV_BYTES)}", kind="request")
    header = _header(config.model_path)
    info = _inspect(config.model_path, header)
    per_layer = 2 * config.parallel * config.n_ctx * info.n_head_kv * info.head_dim * _KV_BYTES[config.kv_type]
    shares = _shares(header, len(config.cards), config.tensor_split)
    logits = info.n_vocab * config.n_ubatch * 4
    last = len(shares) - 1
    return info, [
        CardNeed(weights, int(per_layer * layers), _BUFFER_PER_CARD + (logits if k == last else 0))
        for k, (weights, layers) in enumerate(shares)
    ]


def fit(config: EngineConfig, memory: dict[str, CardMemory]) -> Fit:
    """Whether `config` fits the cards' memory (by endpoint; a card without a reading is not judged)."""
    info, need = needs(config)
    short = []
    for index, (endpoint, card) in enumerate(zip(config.cards, need, strict=True)):
        free = memory[endpoint].free if endpoint in memory else None
        if free is not None and card.total > free:
            short.append(
                f"card {index} ({endpoint}) needs {_gib(card.total)} GiB but has {_gib(free)} GiB free "
                f"(weights {_gib(card.weights)} GiB, KV cache {_gib(card.kv)} GiB for {config.parallel} "
                f"× {config.n_ctx} tokens, buffers {_gib(card.buffers)} GiB)"
            )
    return Fit(info, need, short)


def held(config: EngineConfig, placed: dict[str, int]) -> dict[str, int]:
    """What the loaded `config` holds on each card: the weights llama placed there (`placed`, by
    endpoint) and, where it holds any, its KV cache and buffers as `needs` counts them."""
    try:
        _, need = needs(config)
    except EngineError:  # the loaded model's file is gone: count the weights alone
        return dict(placed)
    counted = dict(zip(config.cards, need, strict=True))
    return {
        endpoint: weights
        + ((counted[endpoint].kv + counted[endpoint].buffers) if weights and endpoint in counted else 0)
        for endpoint, weights in placed.items()
    }


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f}"


def weights_per_card(path: Path, n_cards: int, split: tuple[float, ...] | None = None) -> list[int]:
    """Bytes of weights each card receives, as llama.cpp's layer split places them (see `_shares`)."""
    return [weights for weights, _ in _shares(read_header(path), n_cards, split)]


def _shares(header: Header, n_cards: int, split: tuple[float, ...] | None) -> list[tuple[int, int]]:
    """Per card: the bytes of weights it receives and how many repeating layers it holds, as llama.cpp's
    layer split places them: the repeating layers by cumulative share (n_layers + 1 units, the last one
    being the output layer), and the output matrix (or, tied, a copy of the token embeddings) on the
    last card. Without a split, every card's share is equal."""
    shares = list(split or [1.0] * n_cards)
    bounds = [sum(shares[: k + 1]) / sum(shares) for k in range(n_cards)]
    layers: dict[int, int] = {}
    output = embeddings = 0
    for name, _, _, size in header.tensors:
        if name.startswith("blk."):
            layer = int(name.split(".")[1])
            layers[layer] = layers.get(layer, 0) + (size or 0)
        elif name.startswith("output."):
            output += size or 0
        elif name == "token_embd.weight":
            embeddings = size or 0
    units = len(layers) + 1
    per_card = [[0, 0] for _ in range(n_cards)]
    for layer, size in layers.items():
        card = per_card[next(k for k, bound in enumerate(bounds) if layer / units < bound)]
        card[0] += size
        card[1] += 1
    per_card[-1][0] += output if output > 1_000_000 else output + embeddings  # no output matrix: tied
    return [(weights, count) for weights, count in per_card]
