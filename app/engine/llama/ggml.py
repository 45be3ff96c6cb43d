"""ctypes bindings to ggml's backend registry and RPC backend: the only ctypes code in Quartet.

Two traps (docs/design.md, engine facts 2-3): `Llama(rpc_servers=...)` is silently ignored, so the cards are
registered here by hand; and ggml must be loaded by the soname libllama links against
(`libggml.so.0`), or a second copy with its own registry is mapped and llama never sees the cards.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

_vp, _cp, _sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
_DEVICE_TYPE_CPU = 0


def lib_dir() -> Path:
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


@functools.cache
def _ggml() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(lib_dir() / "libggml.so.0"), mode=ctypes.RTLD_GLOBAL)
    for name, res, args in [
        ("ggml_backend_load_all", None, []),
        ("ggml_backend_reg_by_name", _vp, [_cp]),
        ("ggml_backend_reg_get_proc_address", _vp, [_vp, _cp]),
        ("ggml_backend_register", None, [_vp]),
        ("ggml_backend_dev_by_type", _vp, [ctypes.c_int]),
        ("ggml_backend_dev_count", _sz, []),
        ("ggml_backend_dev_get", _vp, [_sz]),
        ("ggml_backend_dev_name", _cp, [_vp]),
        ("ggml_backend_dev_description", _cp, [_vp]),
        ("ggml_backend_dev_memory", None, [_vp, ctypes.POINTER(_sz), ctypes.POINTER(_sz)]),
    ]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    lib.ggml_backend_load_all()
    return lib


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    free_bytes: int
    total_bytes: int


def devices() -> list[Device]:
    """Every device ggml knows, in registry order (RPC cards first once registered)."""
    lib = _ggml()
    found = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = _sz(0), _sz(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        found.append(
            Device(
                name=(lib.ggml_backend_dev_name(dev) or b"").decode(),
                description=(lib.ggml_backend_dev_description(dev) or b"").decode(),
                free_bytes=free.value,
                total_bytes=total.value,
            )
        )
    return found


def register_rpc_cards(endpoints: list[str]) -> None:
    """Register each `host:port` as an RPC device, as llama.cpp's own `--rpc` flag does.

    Registration is per process and cannot be undone; call it once per engine process.
    """
    lib = _ggml()
    reg = lib.ggml_backend_reg_by_name(b"RPC")
    if not reg:
        raise RuntimeError(
            "llama-cpp-python was built without the RPC backend; rebuild it with "
            'CMAKE_ARGS="-DGGML_RPC=ON" (make setup does this)'
        )
    address = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server")
    add_server = ctypes.CFUNCTYPE(_vp, _cp)(address)
    for endpoint in endpoints:
        card_reg = add_server(endpoint.encode())
        if not card_reg:
            raise RuntimeError(f"ggml could not add RPC card {endpoint}")
        lib.ggml_backend_register(card_reg)


def serve_rpc(endpoint: str, *, cache_dir: Path | None, threads: int) -> None:
    """Serve this machine's CPU as one RPC card on `endpoint`. Blocks for the life of the process."""
    lib = _ggml()
    rpc = ctypes.CDLL(str(lib_dir() / "libggml-rpc.so.0"), mode=ctypes.RTLD_GLOBAL)
    rpc.ggml_backend_rpc_start_server.argtypes = [_cp, _cp, _sz, _sz, ctypes.POINTER(_vp)]
    rpc.ggml_backend_rpc_start_server.restype = None
    cpu = lib.ggml_backend_dev_by_type(_DEVICE_TYPE_CPU)
    devs = (_vp * 1)(cpu)
    cache = str(cache_dir).encode() if cache_dir else None
    rpc.ggml_backend_rpc_start_server(endpoint.encode(), cache, threads, 1, devs)


def cpu_memory() -> tuple[int, int]:
    """(free, total) bytes of the CPU device, as ggml reports it."""
    lib = _ggml()
    dev = lib.ggml_backend_dev_by_type(_DEVICE_TYPE_CPU)
    free, total = _sz(0), _sz(0)
    lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    return free.value, total.value
