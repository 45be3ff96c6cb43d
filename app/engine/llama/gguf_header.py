"""A GGUF header reader that reads only what the catalog needs and skips the rest.

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
