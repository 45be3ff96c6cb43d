"""Engine: the model in-process on one device vs through four loopback cards, side by side.

    .venv/bin/python bench/engine.py [--reps 5] [--max-tokens 128] [--card-threads 1/1/1/2]

Starts its own four card agents, then two worker subprocesses that each load the model once
(ggml device registration is per process and cannot be undone):
  (a) inproc: the Engine with no cards, every layer on the host CPU;
  (b) cards:  the Engine with the layers split across the four cards (placement verified).
Both run the same Engine.generate loop on the same chat request (temperature 0, fixed max_tokens),
alternating a, b, a, b, ... after one warm-up each. Prints per-run numbers, medians and (b)/(a).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = Path.home() / ".cache/quartet/models/gemma-3-270m-q4_k_m.gguf"
PROMPT = (
    "Write a detailed, step-by-step guide to baking sourdough bread at home, from feeding the "
    "starter to cooling the loaf. Use numbered steps."
)
RESULT = "RESULT "
METRICS = ("decode_tps", "ttft_s", "prompt_tps", "host_cpu_ms_tok", "cards_cpu_ms_tok", "other_cpu_pct")


def worker(spec: dict[str, Any]) -> int:
    """Load the engine described by `spec`, then answer one generation per 'run' line on stdin."""
    sys.path.insert(0, str(ROOT))
    from app.engine.events import GenerationRequest, Message
    from app.engine.lifecycle import die_with_parent

    die_with_parent()
    engine = engine_for(spec)
    info = engine.load()
    placed = {c.endpoint: len(c.layers) for c in info.cards}
    print(RESULT + json.dumps({"loaded": True, "load_s": round(info.load_s, 2), "layers": placed}), flush=True)
    request = GenerationRequest(
        messages=(Message("user", PROMPT),), max_tokens=spec["max_tokens"], temperature=0.0, seed=0
    )
    for tokens in runs(engine, spec["max_tokens"]):
        text, stats = generate(engine, replace(request, max_tokens=tokens))
        print(RESULT + json.dumps({**stats, "text_crc": zlib.crc32(text.encode())}), flush=True)
    engine.close()
    return 0


def engine_for(spec: dict[str, Any]) -> Any:
    """The Engine (not loaded yet) a worker's `spec` describes: `model`, `cards` (none: every layer on the
    host, a placement the bench accepts) and those of n_ctx, n_batch, n_ubatch, threads, tensor_split it holds."""
    from app.engine.engine_config import EngineConfig
    from app.engine.llama import engine as engine_mod

    if not spec["cards"]:
        engine_mod.placement.place = lambda log, *, devices, n_layers: ((), tuple(range(n_layers)))  # type: ignore
    knobs: dict[str, Any] = {key: spec[key] for key in ("n_ctx", "n_batch", "n_ubatch") if key in spec}
    if "threads" in spec:
        knobs["n_threads"] = spec["threads"]
    if spec.get("tensor_split"):
        knobs["tensor_split"] = tuple(spec["tensor_split"])
    config = EngineConfig(model_path=Path(spec["model"]), model_name="bench", cards=tuple(spec["cards"]), **knobs)
    return engine_mod.Engine(config)


def runs(engine: Any, max_tokens: int) -> Iterator[int]:
    """The tokens of each run asked for on stdin ('run', or 'run N' for N instead of `max_tokens`, as for a
    warm-up), until a line that is not one; the engine's KV is cleared before each, so that every run
    evaluates its whole prompt (no prefix reuse between runs)."""
    for line in sys.stdin:
        words = line.split()
        if words[:1] != ["run"]:
            return
        forget(engine)
        yield int(words[1]) if len(words) > 1 else max_tokens


def forget(engine: Any) -> None:
    """Drop every KV the engine holds: each slot's sequence and the host KV cache (resetting the Llama alone
    left the batcher's slots holding the last prompt, and the next run reused all of it but one token)."""
    engine.batcher.forget()


def generate(engine: Any, request: Any) -> tuple[str, dict[str, Any]]:
    """One generation's text and its stats."""
    from app.engine.events import Done, Token

    text: list[str] = []
    stats: dict[str, Any] = {}
    for event in engine.generate(request, cancelled=lambda: False):
        if isinstance(event, Token):
            text.append(event.text)
        elif isinstance(event, Done):
            stats = event.stats.as_dict()
    return "".join(text), stats


class Worker:
    """A worker subprocess (`script --worker SPEC`), driven one generation at a time over a pipe."""

    def __init__(
        self,
        name: str,
        spec: dict[str, Any],
        env: dict[str, str],
        quiet_wait_s: float = 0.0,
        script: Path = Path(__file__),
    ) -> None:
        self.name = name
        self.quiet_wait_s = quiet_wait_s
        cmd = [sys.executable, str(script.resolve()), "--worker", json.dumps(spec)]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(RESULT):
                return dict(json.loads(line[len(RESULT) :]))
        raise RuntimeError(f"worker {self.name} exited with code {self.proc.wait()}")

    def run(self, cards: list[subprocess.Popen[bytes]], tokens: int | None = None) -> dict[str, Any]:
        """One generation, plus CPU ms per generated token (worker, each card) over the whole run and
        the share of the machine's CPU that other processes used meanwhile (noise)."""
        assert self.proc.stdin is not None
        wait_quiet(self.quiet_wait_s)
        pids = [self.proc.pid, *(c.pid for c in cards)]
        before, busy0, t0 = [cpu_s(pid) for pid in pids], machine_busy_s(), time.monotonic()
        self.proc.stdin.write(f"run {tokens}\n" if tokens else "run\n")
        self.proc.stdin.flush()
        result = self._read()
        used = [cpu_s(pid) - b for pid, b in zip(pids, before, strict=True)]
        other, capacity = machine_busy_s() - busy0 - sum(used), (time.monotonic() - t0) * (os.cpu_count() or 1)
        ms = [round(1000 * u / max(1, result["generated_tokens"]), 2) for u in used]
        result.update(host_cpu_ms_tok=ms[0], card_cpu_ms_tok=ms[1:], cards_cpu_ms_tok=round(sum(ms[1:]), 2))
        result["other_cpu_pct"] = round(100 * max(0.0, other) / capacity, 1)
        return result

    def stop(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()  # the worker exits at EOF
        stop_procs([self.proc])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds all processes of the machine have been busy (not idle/iowait) so far."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_wait_s: float, busy_pct: float = 15.0) -> None:
    """Wait (at most max_wait_s) for one second of the shared machine under busy_pct % CPU."""
    for _ in range(int(max_wait_s)):
        busy0 = machine_busy_s()
        time.sleep(1.0)
        if 100 * (machine_busy_s() - busy0) / (os.cpu_count() or 1) < busy_pct:
            return


def start_cards(args: argparse.Namespace, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "launcher.card_agent",
                "--card",
                str(i),
                "--listen",
                f"127.0.0.1:{port}",
                "--threads",
                str(_threads(args.card_threads, i)),
                "--cache-dir",
                args.cache_dir,
                "--health-port",
                str(hport),
                "--die-with-parent",
            ],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
        )
        for i, (port, hport) in enumerate(zip(args.ports, args.health_ports, strict=True))
    ]
    deadline = time.monotonic() + 60
    for proc, hport in zip(procs, args.health_ports, strict=True):
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{hport}/health", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    stop_procs(procs)
                    raise RuntimeError(f"card agent with health port {hport} did not come up") from None
                time.sleep(0.2)
    return procs


def _threads(card_threads: int | list[int], index: int) -> int:
    """One count for every card, or one per card."""
    return card_threads[index] if isinstance(card_threads, list) else card_threads


def stop_procs(procs: list[subprocess.Popen[Any]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--model", default=str(MODEL))
    for flag, default, text in (
        ("--reps", 5, "measured runs per side (after one warm-up each)"),
        ("--max-tokens", 128, "tokens per answer"),
        ("--n-ctx", 4096, "context size"),
        ("--n-batch", 512, "n_batch"),
        ("--n-ubatch", 512, "n_ubatch"),
        ("--threads", 2, "n_threads of (a), the in-process model"),
        ("--host-threads", None, "n_threads of (b)'s host process (default: --threads)"),
    ):
        p.add_argument(flag, type=int, default=default, help=text)
    p.add_argument(
        "--card-threads",
        type=lambda t: [int(x) for x in t.split("/")] if "/" in t else int(t),
        default=[1, 1, 1, 2],
        help="threads per card agent: N, or a/b/c/d (default 1/1/1/2, as the app)",
    )
    p.add_argument("--tensor-split", type=float, nargs=4, default=None, help="share of layers per card")
    p.add_argument("--ports", type=int, nargs=4, default=[50152, 50153, 50154, 50155])
    p.add_argument("--health-ports", type=int, nargs=4, default=[51152, 51153, 51154, 51155])
    p.add_argument("--cache-dir", default="/tmp/quartet-bench/rpc-cache")
    p.add_argument("--card-env", action="append", default=[], metavar="K=V", help="env of the card agents")
    p.add_argument("--host-env", action="append", default=[], metavar="K=V", help="env of both workers")
    p.add_argument("--quiet-wait", type=float, default=30.0, help="max s to wait for a quiet machine before a run")
    p.add_argument("--json", help="also write every run's numbers to this file")
    args = p.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))

    spec = {k: getattr(args, k) for k in ("model", "n_ctx", "n_batch", "n_ubatch", "threads", "max_tokens")}
    spec["tensor_split"] = args.tensor_split
    host_env = dict(item.split("=", 1) for item in args.host_env)
    procs: list[subprocess.Popen[bytes]] = []
    workers: list[Worker] = []
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C even when started with SIGINT ignored
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally block on SIGTERM too
    try:
        procs = start_cards(args, dict(item.split("=", 1) for item in args.card_env))
        cards = [f"127.0.0.1:{port}" for port in args.ports]
        b_threads = args.host_threads or args.threads
        workers = [
            Worker("a", {**spec, "cards": []}, host_env, args.quiet_wait),
            Worker("b", {**spec, "cards": cards, "threads": b_threads}, host_env, args.quiet_wait),
        ]
        print(
            f"(b) layers per card: {workers[1].info['layers']}; load a {workers[0].info['load_s']} s, "
            f"b {workers[1].info['load_s']} s",
            flush=True,
        )
        runs: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        for w in workers:
            w.run(procs, 32)  # warm-up
        for rep in range(args.reps):
            for w in workers if rep % 2 == 0 else workers[::-1]:
                r = w.run(procs)
                runs[w.name].append(r)
                print(
                    f"  rep {rep} {w.name}: decode {r['decode_tps']:6.1f} tok/s  ttft {r['ttft_s']:.3f} s  "
                    f"prompt {r['prompt_tps']:6.1f} tok/s  cpu ms/token host {r['host_cpu_ms_tok']:5.1f} "
                    f"cards {r['cards_cpu_ms_tok']:5.1f}  other {r['other_cpu_pct']:4.1f}%  text {r['text_crc']:08x}",
                    flush=True,
                )
        report(runs, args)
    finally:
        for w in workers:
            w.stop()
        stop_procs(procs)
    return 0


def report(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    med = {k: {m: statistics.median(r[m] for r in v) for m in METRICS} for k, v in runs.items()}
    a, b = med["a"], med["b"]
    print(
        f"\nmedians of {args.reps} alternating runs, prompt {runs['a'][0]['prompt_tokens']} tokens, "
        f"max_tokens {args.max_tokens}; threads (a) {args.threads}, (b) host {args.host_threads or args.threads} + "
        f"{args.card_threads} per card; card env {args.card_env or '-'}; host env {args.host_env or '-'}"
    )
    print(f"{'':28}{'decode tok/s':>14}{'TTFT s':>10}{'prompt tok/s':>14}{'CPU ms/token host+cards':>26}")
    for label, m in (("(a) in-process, 1 device", a), ("(b) 4 loopback cards", b)):
        print(
            f"{label:28}{m['decode_tps']:14.1f}{m['ttft_s']:10.3f}{m['prompt_tps']:14.1f}"
            f"{m['host_cpu_ms_tok']:16.1f} + {m['cards_cpu_ms_tok']:.1f}"
        )
    print(
        f"{'ratio (b)/(a)':28}{b['decode_tps'] / a['decode_tps']:14.2f}{b['ttft_s'] / a['ttft_s']:10.2f}"
        f"{b['prompt_tps'] / a['prompt_tps']:14.2f}"
    )
    noisy = sum(r["other_cpu_pct"] > 15 for v in runs.values() for r in v)
    texts = {k: {r["text_crc"] for r in v} for k, v in runs.items()}
    print(
        f"{noisy} of {2 * args.reps} runs had other processes above 15 % of the machine's CPU; texts per side: "
        f"{ {k: len(v) for k, v in texts.items()} }, same on both sides: {texts['a'] == texts['b']} (they differ "
        "when llama.cpp repacks q4_K weights in-process: the cards' RPC buffers are not repacked)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs, "medians": med}, indent=1))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # card agents and workers were stopped by main's finally
        sys.exit(130)
