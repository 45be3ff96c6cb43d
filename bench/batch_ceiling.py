"""What batching can give on this machine's CPU at all: one llama_decode of n sequences ÷ one of 1.

    PYTHONPATH=. .venv/bin/python bench/batch_ceiling.py [--steps 40] [--threads 1,2]

The demo model in this process on the CPU, no cards, no RPC, no app: the whole model in one place, as
fast as llama.cpp runs it here. Eight sequences read the same short prompt; then for n = 1, 2, 4 and 8,
`--steps` decode steps each hold one token of each of n sequences (logits for every one, as the
batcher asks), timed one by one. The sizes take turns twice, so drift shows as a difference between the
two passes. Prints the median step, the tokens/s it gives and the ratio to n = 1 with the same threads.
bench/concurrency.py's ratios for the appliance cannot beat these: they add the cards' RPC on top.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as bench  # bench/engine.py: the demo model's path

SEQUENCES = 8
PROMPT = b"Write a long, detailed story about a lighthouse keeper."


class Decoder:
    """One context of SEQUENCES sequences, made and filled as the engine does (its `_widen_context` and
    `Batch`: unified KV cache, flash attention, one sequence id per token)."""

    def __init__(self, threads: int) -> None:
        import llama_cpp

        from app.engine.llama.engine import _widen_context
        from app.engine.llama.slots import Batch

        self.llama_cpp = llama_cpp
        self.llm = llama_cpp.Llama(
            str(bench.MODEL), n_ctx=2048, n_threads=threads, n_threads_batch=threads, flash_attn=True, verbose=False
        )
        _widen_context(self.llm, parallel=SEQUENCES, n_ctx=2048)
        self.batch = Batch(512)
        prompt = self.llm.tokenize(PROMPT)
        for seq in range(SEQUENCES):
            self.decode([(token, i, seq, i == len(prompt) - 1) for i, token in enumerate(prompt)])
        self.pos = [len(prompt)] * SEQUENCES

    def decode(self, items: list[tuple[int, int, int, bool]]) -> float:
        self.batch.clear()
        for token, pos, seq, logits in items:
            self.batch.add(token, pos=pos, seq=seq, logits=logits)
        started = time.perf_counter()
        code = self.llama_cpp.llama_decode(self.llm._ctx.ctx, self.batch.raw)
        if code != 0:
            raise SystemExit(f"llama_decode returned {code}")
        return time.perf_counter() - started

    def step(self, n: int, token: int) -> float:
        took = self.decode([(token, self.pos[seq], seq, True) for seq in range(n)])
        for seq in range(n):
            self.pos[seq] += 1
        return took

    def close(self) -> None:
        self.batch.close()
        self.llm.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="decode steps per size and pass")
    parser.add_argument("--threads", default="1,2", help="CPU threads to try, one context each")
    args = parser.parse_args()
    sizes = [1, 2, 4, 8]
    print(f"{'threads':>7} {'n':>3} {'step ms':>8} {'tok/s':>7} {'÷ n=1':>6}")
    for threads in [int(t) for t in args.threads.split(",")]:
        decoder = Decoder(threads)
        times: dict[int, list[float]] = {n: [] for n in sizes}
        try:
            for _ in range(2):
                for n in sizes:
                    times[n] += [decoder.step(n, 100 + k) for k in range(args.steps)]
        finally:
            decoder.close()
        rates: dict[int, Any] = {n: n / statistics.median(times[n]) for n in sizes}
        for n in sizes:
            step = 1000 * statistics.median(times[n])
            print(f"{threads:>7} {n:>3} {step:>8.1f} {rates[n]:>7.1f} {rates[n] / rates[1]:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
