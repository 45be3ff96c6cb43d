"""Which setting changes decode speed through the cards? Variants measured side by side, interleaved.

    .venv/bin/python bench/engine_factors.py --reps 5 \\
        --variant "a1 inproc threads=1" --variant "a2 inproc threads=2" \\
        --variant "b1 cards card_threads=1" --variant "b2 cards card_threads=2 card_env=GOMP_SPINCOUNT=10000"

A variant is `NAME inproc|cards key=value...`; keys: threads, n_batch, n_ubatch, n_ctx,
card_threads=N or a/b/c/d (one count per card), tensor_split=a/b/c/d, host_env=K=V, card_env=K=V
(repeatable), llama.ARG=int (an extra llama_cpp.Llama keyword, e.g. llama.flash_attn=1), n_cards=N
(split over the first N cards only), no_repack=1 (load
without llama.cpp's CPU weight repacking, as the cards hold the weights), backend_greedy=1 (greedy
sampling attached to the context with llama_set_sampler: computed in the graph on the last device).
A card variant restarts its worker (an RPC server serves one client at a time) and, when it needs
other card settings, the four card agents; every round measures each variant once, in rotating
order. Prints medians per variant. Reuses bench/engine.py's worker and card agents.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as bench  # bench/engine.py


@dataclass
class Variant:
    name: str
    cards: bool
    spec: dict[str, Any]
    card_threads: int | list[int] = 1  # one count for every card, or one per card (1/1/1/2)
    n_cards: int = 4
    card_env: dict[str, str] = field(default_factory=dict)
    host_env: dict[str, str] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def card_key(self) -> tuple[Any, ...]:
        return (str(self.card_threads), tuple(sorted(self.card_env.items())))


def factor_worker(spec: dict[str, Any]) -> int:
    """bench/engine.py's worker, with extra Llama keywords and optionally without CPU weight repacking."""
    import functools

    import llama_cpp

    if spec.get("llama_kwargs"):
        llama_cpp.Llama = functools.partial(llama_cpp.Llama, **spec["llama_kwargs"])  # type: ignore[misc,assignment]
    if spec.get("no_repack"):
        defaults = llama_cpp.llama_cpp.llama_model_default_params

        def no_repack() -> Any:
            params = defaults()
            params.use_extra_bufts = False
            return params

        llama_cpp.llama_cpp.llama_model_default_params = no_repack
    if spec.get("backend_greedy"):  # greedy sampling inside the graph, on the device holding the output layer
        from app.engine.llama.engine import Engine

        load = Engine.load

        def load_with_backend_sampler(self: Engine) -> Any:
            info = load(self)
            assert self._llm is not None
            chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
            if not llama_cpp.llama_set_sampler(self._llm._ctx.ctx, 0, chain):
                raise RuntimeError("llama_set_sampler refused the backend sampler")
            self._backend_chain = chain  # type: ignore[attr-defined]  # keep it alive
            return info

        Engine.load = load_with_backend_sampler  # type: ignore[method-assign]
    return bench.worker(spec)


def parse_variant(text: str, base: dict[str, Any]) -> Variant:
    name, mode, *items = text.split()
    v = Variant(name, mode == "cards", dict(base))
    for item in items:
        key, _, value = item.partition("=")
        if key in ("host_env", "card_env"):
            k, _, val = value.partition("=")
            getattr(v, key)[k] = val
        elif key == "card_threads":
            v.card_threads = [int(x) for x in value.split("/")] if "/" in value else int(value)
        elif key.startswith("llama."):
            v.spec.setdefault("llama_kwargs", {})[key[6:]] = int(value)
        elif key == "n_cards":
            v.n_cards = int(value)
        elif key == "backend_greedy":
            v.spec["backend_greedy"] = bool(int(value))
        elif key == "no_repack":
            v.spec["no_repack"] = bool(int(value))
        elif key == "tensor_split":
            v.spec["tensor_split"] = [float(x) for x in value.split("/")]
        else:
            v.spec[key] = int(value)
    return v


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--variant", action="append")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--ports", type=int, nargs=4, default=[50152, 50153, 50154, 50155])
    p.add_argument("--health-ports", type=int, nargs=4, default=[51152, 51153, 51154, 51155])
    p.add_argument("--cache-dir", default="/tmp/quartet-bench/rpc-cache")
    p.add_argument("--quiet-pct", type=float, default=5.0, help="'quiet' runs: other processes under this %% CPU")
    p.add_argument("--jsonl", help="append every run's numbers to this file as they come")
    p.add_argument("--quiet-wait", type=float, default=30.0, help="max s to wait for a quiet machine before a run")
    args = p.parse_args()
    if args.worker:
        return factor_worker(json.loads(args.worker))
    base = {
        "model": str(bench.MODEL),
        "n_ctx": 4096,
        "n_batch": 512,
        "n_ubatch": 512,
        "threads": 2,
        "max_tokens": args.max_tokens,
        "tensor_split": None,
    }
    variants = [parse_variant(t, base) for t in args.variant]
    cards = [f"127.0.0.1:{port}" for port in args.ports]
    procs: list[Any] = []
    card_key: tuple[Any, ...] | None = None
    workers: dict[str, bench.Worker] = {}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the cards and workers on SIGTERM too
    try:
        for rep in range(args.reps):
            order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
            for v in order:
                if v.cards:  # an RPC server serves one client at a time: one card worker alive at a time
                    for name in [n for n, w in workers.items() if w.info.get("cards") and n != v.name]:
                        workers.pop(name).stop()
                if v.cards and v.card_key != card_key:
                    bench.stop_procs(procs)
                    args.card_threads = v.card_threads
                    procs, card_key = bench.start_cards(args, v.card_env), v.card_key
                if v.name not in workers:
                    spec = {**v.spec, "cards": cards[: v.n_cards] if v.cards else []}
                    workers[v.name] = w = bench.Worker(v.name, spec, v.host_env, args.quiet_wait, Path(__file__))
                    w.info["cards"] = v.cards
                    w.run(procs, 32)  # warm-up
                r = workers[v.name].run(procs if v.cards else [])
                v.runs.append(r)
                if args.jsonl:
                    with open(args.jsonl, "a") as out:
                        out.write(json.dumps({"variant": v.name, "rep": rep, **r}) + "\n")
                print(
                    f"  rep {rep} {v.name:>12}: decode {r['decode_tps']:6.1f} tok/s  ttft {r['ttft_s']:.3f} s  "
                    f"cpu ms/token host {r['host_cpu_ms_tok']:5.1f} cards {r['card_cpu_ms_tok']}  "
                    f"other {r['other_cpu_pct']:4.1f}%  text {r['text_crc']:08x}",
                    flush=True,
                )
    finally:
        for w in workers.values():
            w.stop()
        bench.stop_procs(procs)
    print(
        f"\nmedians of {args.reps} interleaved runs, max_tokens {args.max_tokens}; 'quiet': the runs during which "
        f"other processes used under {args.quiet_pct} % of the machine's CPU"
    )
    print(
        f"{'variant':>12}{'decode tok/s':>14}{'quiet decode':>14}{'TTFT s':>9}{'quiet TTFT':>12}"
        f"{'CPU ms/tok host':>17}{'cards':>7}{'other %':>9}"
    )
    for v in variants:
        m = {k: statistics.median(r[k] for r in v.runs) for k in bench.METRICS}
        quiet = [r for r in v.runs if r["other_cpu_pct"] < args.quiet_pct]
        qd = f"{statistics.median(r['decode_tps'] for r in quiet):.1f} ({len(quiet)})" if quiet else "-"
        qt = f"{statistics.median(r['ttft_s'] for r in quiet):.3f}" if quiet else "-"
        print(
            f"{v.name:>12}{m['decode_tps']:14.1f}{qd:>14}{m['ttft_s']:9.3f}{qt:>12}"
            f"{m['host_cpu_ms_tok']:17.1f}{m['cards_cpu_ms_tok']:7.1f}{m['other_cpu_pct']:9.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
