"""The model catalog: which GGUFs the appliance offers, what their headers say, and whether they fit.

Entries come from `assets/models.toml` (or the file the settings name). A model file must lie under
the models folder; paths never come from a browser. Whether an entry fits the cards is card_fit.py's.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from app.engine.engine_config import KV_TYPE, N_CTX, EngineConfig
from app.engine.events import EngineError
from app.engine.llama.gguf_header import Header, HeaderError, read_header

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
# Sliding-window layers: llama.cpp's default pattern per architecture (`load_swa_pattern` in its models), used
# where the GGUF names a window but no pattern; of every `n` layers the last is full (global) attention.
_SWA_PATTERNS = {"gemma3": 6, "gemma2": 2, "gemma-embedding": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2}


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
    n_swa: int = 0  # the sliding window in tokens (0: none)
    swa_layers: frozenset[int] = frozenset()  # the layers that attend within the window only

    def is_swa(self, layer: int) -> bool:
        return self.n_swa > 0 and layer in self.swa_layers


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
    return info_of(path, header_of(path))


def header_of(path: Path) -> Header:
    if not path.is_file():
        raise EngineError(f"the model file {path} is missing", kind="request")
    try:
        return read_header(path)
    except HeaderError as err:
        raise EngineError(f"{path.name} is damaged or truncated (not a readable GGUF): {err}", kind="request") from err


def info_of(path: Path, header: Header) -> GgufInfo:
    size = path.stat().st_size
    known = [(offset, n) for _, _, offset, n in header.tensors if n is not None]
    end = header.data_start + max((offset + n for offset, n in known), default=0)
    if end > size:
        raise EngineError(f"{path.name} is damaged or truncated: {size:,} bytes of {end:,}", kind="request")
    fields = header.fields
    arch = str(fields.get("general.architecture", "unknown"))
    n_embd = int(fields.get(f"{arch}.embedding_length", 0))
    n_head = int(fields.get(f"{arch}.attention.head_count", 1)) or 1
    n_swa, swa_layers = _window(fields, arch)
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
        n_swa=n_swa,
        swa_layers=swa_layers,
    )


def _window(fields: dict[str, Any], arch: str) -> tuple[int, frozenset[int]]:
    """The sliding window and its layers, as llama.cpp reads them: the GGUF's window, and its pattern (one
    full-attention layer in every `n`) or the architecture's default. A pattern llama.cpp reads as a list
    (the header keeps only its length here) or an architecture not known here counts every layer full."""
    n_swa = fields.get(f"{arch}.attention.sliding_window", 0)
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern", _SWA_PATTERNS.get(arch, 1))
    if not isinstance(n_swa, int) or n_swa <= 0 or not isinstance(pattern, int) or pattern <= 1:
        return 0, frozenset()
    n_layers = int(fields.get(f"{arch}.block_count", 0))
    return n_swa, frozenset(k for k in range(n_layers) if k % pattern < pattern - 1)
