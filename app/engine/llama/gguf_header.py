"""A GGUF header reader that reads only what the catalog needs and skips the rest, and what it says of the model
(`inspect`: size, architecture, layers, KV shape, sliding windows).

The `gguf` package's reader builds an array per vocabulary entry: 22 s on the demo model's 262k
tokens here, for a page an admin opens. This one skips arrays by length and reads the same facts in
a fraction of a second.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from app.engine.events import EngineError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# ggml type → (elements per block, bytes per block), for the types GGUF models use
_BLOCKS = {
    0: (1, 4),
    1: (1, 2),
    2: (32, 18),
    3: (32, 20),
    6: (32, 22),
    7: (32, 24),
    8: (32, 34),
    9: (32, 36),
    10: (256, 84),
    11: (256, 110),
    12: (256, 144),
    13: (256, 176),
    14: (256, 210),
    15: (256, 292),
    30: (1, 2),
}


class HeaderError(ValueError):
    pass


@dataclass(frozen=True)
class Header:
    fields: dict[str, Any]  # scalars and strings; arrays as their length
    tensors: list[tuple[str, int, int, int | None]]  # name, ggml type, offset in data, bytes (None: unknown type)
    data_start: int


# Headers read, by file identity: a GGUF's header holds its whole vocabulary (the demo model's 262,144 tokens:
# 0.15 s of CPU on the 2-core test machine to walk), and the admin's catalog reads every entry's header at
# each listing. A file replaced or rewritten has another inode, size or mtime, and is read again.
_READ: dict[tuple[str, int, int, int], Header] = {}
_KEEP = 16
_LOCK = threading.Lock()  # Gradio handlers list the catalog from several threads


def read_header(path: Path) -> Header:
    """The GGUF header of `path`, read once while the file stays the same."""
    st = path.stat()
    key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    with _LOCK:
        found = _READ.get(key)
    if found is None:  # read outside the lock, so one big file does not hold up the others' listings; two
        found = _read(path)  # threads may then read the same file once each, which costs time, not correctness
        with _LOCK:
            if len(_READ) >= _KEEP:
                _READ.pop(next(iter(_READ)), None)
            _READ[key] = found
    return found


def _read(path: Path) -> Header:
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise HeaderError("it does not start with the GGUF magic bytes")
        version, n_tensors, n_fields = _unpack(f, "<IQQ")
        if version < 2 or n_tensors > 1_000_000 or n_fields > 1_000_000:
            raise HeaderError(f"implausible header (version {version}, {n_tensors} tensors, {n_fields} fields)")
        fields = {_string(f): _value(f, _unpack(f, "<I")[0]) for _ in range(n_fields)}
        tensors = [_tensor(f) for _ in range(n_tensors)]
        align = int(fields.get("general.alignment", 32))
        start = -(-f.tell() // align) * align
    return Header(fields, tensors, start)


def _unpack(f: BinaryIO, fmt: str) -> tuple[Any, ...]:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise HeaderError("the file ends inside its header")
    return struct.unpack(fmt, data)


def _string(f: BinaryIO) -> str:
    (length,) = _unpack(f, "<Q")
    if length > 1 << 24:
        raise HeaderError("implausible string length in the header")
    data = f.read(length)
    if len(data) != length:
        raise HeaderError("the file ends inside its header")
    return data.decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind in _SCALARS:
        return _unpack(f, _SCALARS[kind])[0]
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        item, count = _unpack(f, "<IQ")
        if item in _SCALARS:
            f.seek(struct.calcsize(_SCALARS[item]) * count, 1)
        else:
            for _ in range(count):
                _value(f, item)
        return count
    raise HeaderError(f"unknown value type {kind} in the header")


def _tensor(f: BinaryIO) -> tuple[str, int, int, int | None]:
    name = _string(f)
    (n_dims,) = _unpack(f, "<I")
    if n_dims > 8:
        raise HeaderError(f"tensor {name} has {n_dims} dimensions")
    dims = _unpack(f, f"<{n_dims}Q")
    kind, offset = _unpack(f, "<IQ")
    elements = 1
    for dim in dims:
        elements *= dim
    block = _BLOCKS.get(kind)
    return name, kind, offset, (elements // block[0] * block[1]) if block else None


# Which layers attend to the whole context where the GGUF does not say (llama.cpp's own defaults by architecture:
# every 6th in Gemma 3, every 2nd in Gemma 2); an architecture not listed is counted at full size everywhere
SWA_EVERY = {"gemma3": 6, "gemma2": 2}
FILE_TYPES = {
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
    n_swa: int = 0  # the sliding window of its sliding-window layers (0: none)
    swa_every: int = 0  # every swa_every-th layer attends to the whole context, the others to the window

    def is_swa(self, layer: int) -> bool:
        return self.n_swa > 0 and self.swa_every > 0 and layer % self.swa_every < self.swa_every - 1


def inspect(path: Path, header: Header) -> GgufInfo:
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
        quantization=FILE_TYPES.get(int(fields.get("general.file_type", -1)), "unknown"),
        context_length=int(fields.get(f"{arch}.context_length", 0)),
        n_embd=n_embd,
        n_head_kv=int(fields.get(f"{arch}.attention.head_count_kv", n_head)),
        head_dim=int(fields.get(f"{arch}.attention.key_length", n_embd // n_head)),
        n_vocab=int(fields.get("tokenizer.ggml.tokens", 0)),
        weights_bytes=size - header.data_start,
        n_swa=int(fields.get(f"{arch}.attention.sliding_window", 0)),
        swa_every=int(fields.get(f"{arch}.attention.sliding_window_pattern", SWA_EVERY.get(arch, 0))),
    )
