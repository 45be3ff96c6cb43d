"""The model catalog: which GGUFs the appliance offers, what their headers say, and whether they fit.

Entries come from `assets/models.toml` (or the file the settings name). A model file must lie under
the models folder; paths never come from a browser. The fit check runs before any switch, so a model
that does not fit is refused with numbers instead of crashing halfway through a load.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from app.engine.events import EngineError
from app.engine.gguf_header import HeaderError, read_header

_KV_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}  # bytes per element, block overhead included
_FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
               12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
               32: "BF16"}
_BUFFER_PER_CARD = 64 * 2**20  # scheduler and activation buffers besides the logits


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    name: str
    path: Path
    n_ctx: int
    kv_type: str = "f16"
    chat_template: str | None = None
    description: str = ""


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
        file = Path(raw["path"])
        entries.append(
            CatalogEntry(
                id=raw["id"], name=raw["name"], path=file if file.is_absolute() else models_dir / file,
                n_ctx=int(raw.get("n_ctx", 4096)), kv_type=raw.get("kv_type", "f16"),
                chat_template=raw.get("chat_template"), description=raw.get("description", ""),
            )
        )
    return entries


def check_location(path: Path, models_dir: Path) -> Path:
    """The resolved path, if it lies under the models folder (symlinks and `..` resolved first)."""
    resolved, root = path.resolve(), models_dir.resolve()
    if not resolved.is_relative_to(root):
        raise EngineError(f"{path} is outside the models folder {root}; only models there load", kind="request")
    return resolved


def inspect_gguf(path: Path) -> GgufInfo:
    """Read a GGUF's header; a missing, truncated or malformed file is refused with the reason."""
    if not path.is_file():
        raise EngineError(f"the model file {path} is missing", kind="request")
    try:
        header = read_header(path)
    except HeaderError as err:
        raise EngineError(f"{path.name} is damaged or truncated (not a readable GGUF): {err}", kind="request") from err
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


def estimate_per_card(info: GgufInfo, *, n_ctx: int, kv_type: str, n_cards: int, n_ubatch: int) -> list[int]:
    """Bytes each card needs: its share of the weights and of the KV cache, plus buffers; the last
    card also holds the output layer's logits buffer."""
    if kv_type not in _KV_BYTES:
        raise EngineError(f"KV cache type {kv_type!r} is not one of {', '.join(_KV_BYTES)}", kind="request")
    kv = 2 * info.n_layers * n_ctx * info.n_head_kv * info.head_dim * _KV_BYTES[kv_type]
    share = (info.weights_bytes + kv) / n_cards
    logits = info.n_vocab * n_ubatch * 4
    return [int(share + _BUFFER_PER_CARD + (logits if i == n_cards - 1 else 0)) for i in range(n_cards)]


def check_fit(need: list[int], free: list[int | None], cards: list[str]) -> None:
    """Refuse, with the numbers, a model that would not fit on every card."""
    short = [
        f"card {i} ({cards[i]}) needs {need[i] / 2**30:.1f} GiB but has {have / 2**30:.1f} GiB free"
        for i, have in enumerate(free)
        if have is not None and need[i] > have
    ]
    if short:
        raise EngineError("the model does not fit: " + "; ".join(short), kind="request")


def weights_per_card(path: Path, n_cards: int, split: tuple[float, ...] | None = None) -> list[int]:
    """Bytes of weights each card receives, as llama.cpp's layer split places them: the repeating
    layers by cumulative share (n_layers + 1 units, the last one being the output layer), and the
    output matrix (or, tied, a copy of the token embeddings) on the last card."""
    header = read_header(path)
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
    per_card = [0] * n_cards
    for layer, size in layers.items():
        per_card[next(k for k, bound in enumerate(bounds) if layer / units < bound)] += size
    per_card[-1] += output if output > 1_000_000 else output + embeddings  # no output matrix: tied
    return per_card
