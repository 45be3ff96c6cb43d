"""llama.cpp's own `llama-server` for bench/peer.py: built once from the llama-cpp-python sdist Quartet pins,
started over a set of card agents, and asked for answers over its HTTP API, timed from the client's side.

The build: `pip download --no-deps --no-binary :all: llama-cpp-python==<pin>` (the pin read from pyproject.toml),
its `vendor/llama.cpp` configured with `-DGGML_RPC=ON -DLLAMA_CURL=OFF` and the CPU flags launcher/setup.sh
builds the wheel with (this CPU's AVX/AVX2/FMA/F16C/BMI2/AVX-512 features, never AMX, no GGML_NATIVE),
statically linked, no web UI (nothing downloaded at build time), target `llama-server`, under `nice -n 10`
with `-j2`. The binary is kept in ~/.cache/quartet/llama-server/<version>-<flavour>/ (the flavour names the
flags, as the wheel's folder does), so a later run starts at once; nothing of llama.cpp enters the repository.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quartet"
# launcher/setup.sh's table: cpuinfo flags (all needed) → ggml option, in its order
FEATURES = (
    ("avx", "AVX"),
    ("avx2", "AVX2"),
    ("fma", "FMA"),
    ("f16c", "F16C"),
    ("bmi2", "BMI2"),
    ("avx512f,avx512cd,avx512vl,avx512dq,avx512bw", "AVX512"),
    ("avx512vbmi", "AVX512_VBMI"),
    ("avx512_vnni", "AVX512_VNNI"),
    ("avx512_bf16", "AVX512_BF16"),
    ("avx_vnni", "AVX_VNNI"),
)
SERVER_FLAGS = (
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # else the build downloads the web UI
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",  # one file to cache
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
)


def pinned_version() -> str:
    """The llama-cpp-python version pyproject.toml pins (launcher/setup.sh builds the wheel of the same)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name, _, version = dep.partition("==")
        if name.strip() == "llama-cpp-python":
            return version.strip()
    raise RuntimeError("pyproject.toml pins no llama-cpp-python version")


def cpu_flags() -> tuple[str, list[str]]:
    """(flavour, cmake flags) as launcher/setup.sh computes them for the wheel."""
    flags, flavour = ["-DGGML_RPC=ON"], "rpc"
    if platform.machine() == "x86_64":
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("flags"))
        have = set(line.partition(":")[2].split())
        flags.append("-DGGML_NATIVE=OFF")
        flavour = "rpc-x86"
        for names, option in FEATURES:
            on = all(name in have for name in names.split(","))
            flags.append(f"-DGGML_{option}={'ON' if on else 'OFF'}")
            flavour += f"-{names.split(',')[0]}" if on else ""
    return flavour, flags


def ensure_binary(version: str, *, jobs: int = 2) -> Path:
    """The cached llama-server of `version` for this CPU's flags, built first if missing (~15 min on 2 cores)."""
    flavour, flags = cpu_flags()
    home = CACHE / "llama-server" / f"{version}-{flavour}"
    binary = home / "llama-server"
    if binary.is_file():
        return binary
    print(f"building llama-server {version} ({flavour}) once; cached in {home}", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="llama-server-", dir=CACHE))
    try:
        source = _sdist(version, work)
        build = work / "build"
        nice = ["nice", "-n", "10"]
        cmake = [*nice, "cmake", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", *flags]
        _run([*cmake, *SERVER_FLAGS], work / "configure.log")
        _run([*nice, "cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"], work / "build.log")
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "bin" / "llama-server", home / "llama-server.part")
        (home / "llama-server.part").rename(binary)
        (home / "flags.txt").write_text(" ".join([*flags, *SERVER_FLAGS]) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def _sdist(version: str, work: Path) -> Path:
    """llama.cpp's source as llama-cpp-python `version`'s sdist from the package index carries it."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "--no-deps"]
    _run([*pip, "--no-binary", ":all:", "-d", str(work), f"llama-cpp-python=={version}"], work / "download.log")
    archive = next(work.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    return next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))


def _run(cmd: list[str], log: Path) -> None:
    with log.open("wb") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:4])}... failed with exit {code}:\n{tail}")


def start(binary: Path, *, port: int, cards: list[str], knobs: dict[str, Any], spec: str | None, log: Path) -> Any:
    """llama-server over `cards` with Quartet's knobs (n_ctx is per answer; -c holds `parallel` of them in one
    unified KV cache, as the engine's) and the chat template file Quartet's engine renders, loaded and healthy;
    `spec` a --spec-type (None: no speculation)."""
    from app.engine.lifecycle import die_with_parent

    model, parallel = knobs["model"], knobs["parallel"]
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--rpc", ",".join(cards)]
    cmd += ["-ngl", "99", "-c", str(knobs["n_ctx"] * parallel), "-np", str(parallel), "--kv-unified"]
    cmd += ["-b", str(knobs["n_batch"]), "-ub", str(knobs["n_ubatch"]), "-fa", "on", "--fit", "off"]
    cmd += ["-t", str(knobs["threads"]), "-tb", str(knobs["threads"]), "--no-webui"]
    cmd += ["--jinja", "--chat-template-file", str(knobs["template"])]
    cmd += ["--spec-type", spec] if spec else []
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with code {proc.returncode}; see {log}")
        try:
            if _get(port, "/health").get("status") == "ok":
                return proc
        except (OSError, ValueError):
            pass
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"llama-server did not load within 180 s; see {log}")


def _get(port: int, path: str) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return dict(json.loads(conn.getresponse().read()))
    finally:
        conn.close()


def chat(port: int, ask: dict[str, Any]) -> dict[str, Any]:
    """One streamed answer from /v1/chat/completions, timed as bench/peer_quartet.py times Quartet's: from the
    request to the first text (TTFT) and from the first text to the last chunk ((tokens - 1) ÷ that = decode)."""
    body: dict[str, Any] = {
        "messages": ask["messages"],
        "max_tokens": ask["max_tokens"],
        "temperature": 0.0,
        "seed": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ask.get("json_schema"):
        schema = json.loads(ask["json_schema"])
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "fields", "schema": schema}}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    text: list[str] = []
    last: dict[str, Any] = {}
    t0 = time.monotonic()
    first = 0.0
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"llama-server answered {response.status}: {response.read()[:500]!r}")
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices", []):
                piece = choice.get("delta", {}).get("content")
                if piece:
                    first = first or time.monotonic()
                    text.append(piece)
            last = chunk if "usage" in chunk or "timings" in chunk else last
    finally:
        conn.close()
    end = time.monotonic()
    usage, timings = last.get("usage", {}), last.get("timings", {})
    return measured(
        t0=t0,
        first=first or end,
        end=end,
        generated=int(usage.get("completion_tokens", 0)),
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        text="".join(text),
        engine_tps=float(timings.get("predicted_per_second", 0.0)),
        drafted=int(timings.get("draft_n", 0)),
        accepted=int(timings.get("draft_n_accepted", 0)),
    )


def measured(*, t0: float, first: float, end: float, generated: int, **more: Any) -> dict[str, Any]:
    """One answer's client-side numbers, the same for both sides."""
    decode_s = end - first
    return {
        "ttft_s": round(first - t0, 3),
        "decode_tps": round((generated - 1) / decode_s, 2) if generated > 1 and decode_s > 0 else 0.0,
        "total_s": round(end - t0, 3),
        "generated": generated,
        "t0": t0,
        "end": end,
        **more,
    }


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
