"""What an engine configuration needs on each card, and whether it fits: the fit check runs before every reload,
so a model or a setting (`parallel`, `n_ctx`, the KV type, the split) that does not fit is refused with numbers
instead of crashing halfway through a load. Each card needs its real share of the weights from the GGUF's tensor
table (the last card also holds the output matrix), the KV cache of its layers (sliding-window layers windowed,
as llama.cpp makes them), and buffers: the attention masks of a step over a full cache, the last card's logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.endpoint import Endpoint
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError
from app.engine.llama.catalog import GgufInfo, header_of, info_of
from app.engine.llama.gguf_header import Header, read_header

_KV_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}  # bytes per element, block overhead included
_BUFFER_PER_CARD = 64 * 2**20  # scheduler and activation buffers besides the logits and masks
_MASK_BYTES = 6  # an attention mask's cell for each token of a step: F32, and the F16 copy flash attention reads


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
    """What each card of `config` must hold: its weights as llama's layer split places them, its layers' KV
    cache and buffers (`kv_cells`, `buffers`)."""
    if config.kv_type not in _KV_BYTES:
        raise EngineError(f"KV cache type {config.kv_type!r} is not one of {', '.join(_KV_BYTES)}", kind="request")
    header = header_of(config.model_path)
    info = info_of(config.model_path, header)
    full, window = kv_cells(info, config)
    per_cell = 2 * info.n_head_kv * info.head_dim * _KV_BYTES[config.kv_type]  # K and V of one layer
    shares = _shares(header, len(config.cards), config.tensor_split)
    logits = info.n_vocab * config.n_ubatch * 4
    last = len(shares) - 1
    cards = []
    for k, (weights, layers) in enumerate(shares):
        n_window = sum(info.is_swa(layer) for layer in layers)
        n_full = len(layers) - n_window
        kv = per_cell * (n_full * full + n_window * window)
        # the attention masks of a step over a full cache: one for the full layers, one for the window's
        masks = _MASK_BYTES * config.n_ubatch * ((full if n_full else 0) + (window if n_window else 0))
        cards.append(CardNeed(weights, int(kv), _BUFFER_PER_CARD + masks + (logits if k == last else 0)))
    return info, cards


def kv_cells(info: GgufInfo, config: EngineConfig) -> tuple[int, int]:
    """The KV cells llama.cpp makes for `config`'s one unified cache: `parallel` × `n_ctx` for full-attention
    layers, and for sliding-window layers the window of every sequence plus a step's tokens, rounded up to 256
    (`llama_kv_cache_iswa`), unless `swa_full` keeps them full-size too."""
    full = config.parallel * config.n_ctx
    if info.n_swa <= 0 or config.swa_full:
        return full, full
    return full, min(full, -(-(info.n_swa * config.parallel + config.n_ubatch) // 256) * 256)


def fit(config: EngineConfig, memory: dict[str, CardMemory]) -> Fit:
    """Whether `config` fits the cards' memory (by endpoint; a card without a reading is not judged).

    Cards at one address are agents on one machine (the demo's four on loopback): they draw on the same
    memory, which each reports whole, so besides each card's own need their sum must fit too — four card
    agents each under the host's free memory had together taken the host's last gigabytes."""
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
    if not short:
        short = _shared_hosts_short(config, need, memory)
    return Fit(info, need, short)


def _shared_hosts_short(config: EngineConfig, need: list[CardNeed], memory: dict[str, CardMemory]) -> list[str]:
    """One sentence per address whose cards' needs together exceed its machine's free memory."""
    hosts: dict[str, list[int]] = {}
    for index, endpoint in enumerate(config.cards):
        if endpoint in memory and memory[endpoint].free is not None:
            hosts.setdefault(Endpoint.parse(endpoint).host, []).append(index)
    short = []
    for host, indexes in hosts.items():
        if len(indexes) < 2:
            continue
        readings = [memory[config.cards[k]] for k in indexes]
        # one machine's memory, read once per agent: its least free reading, with what each card holds now
        free = min(int(m.total or 0) - int(m.used or 0) for m in readings) + sum(m.held for m in readings)
        total = sum(need[k].total for k in indexes)
        if total > free:
            kv = sum(need[k].kv for k in indexes)
            short.append(
                f"cards {', '.join(map(str, indexes))} share the memory of {host} and need {_gib(total)} GiB "
                f"together but it has {_gib(free)} GiB free (KV cache {_gib(kv)} GiB for {config.parallel} "
                f"× {config.n_ctx} tokens)"
            )
    return short


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


def _shares(header: Header, n_cards: int, split: tuple[float, ...] | None) -> list[tuple[int, list[int]]]:
    """Per card: the bytes of weights it receives and the repeating layers it holds, as llama.cpp's
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
    per_card: list[tuple[int, list[int]]] = [(0, []) for _ in range(n_cards)]
    for layer, size in sorted(layers.items()):
        k = next(k for k, bound in enumerate(bounds) if layer / units < bound)
        per_card[k] = (per_card[k][0] + size, [*per_card[k][1], layer])
    tail = output if output > 1_000_000 else output + embeddings  # no output matrix: tied
    per_card[-1] = (per_card[-1][0] + tail, per_card[-1][1])
    return per_card
