"""Time to first token of a 2,000-token prompt with and without prompt pipelining across the cards.

    PYTHONPATH=. .venv/bin/python bench/pipeline.py [--rounds 2] [--prompt-tokens 2000]

llama.cpp pipelines one llama_decode over the layer split when it holds more than one micro-batch
(`n_ubatch`): micro-batch k+1 enters card 0 while k is on card 1 (docs/design.md). A step of the batcher
holds up to `prompt_chunk` prompt tokens, so a prompt flows as a pipeline only when prompt_chunk > n_ubatch.
Starts four card agents once, then for each variant (one app each, same cards, one after another, the
variants taking turns every round) sends prompts of about `--prompt-tokens` tokens that no earlier
prompt shares (a new first line each), one at a time, and prints the median TTFT and its ratio to the
first variant. The card agents, the app and the streaming client are bench/appliance.py's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from appliance import app, card_agents, stream  # bench/appliance.py

# name → (settings, what it shows)
VARIANTS = {  # n_batch 512 each; a step holds up to 508 prompt tokens (512 - parallel) or prompt_chunk
    "chunk 508, ubatch 512": ({"engine.n_ubatch": "512", "engine.prompt_chunk": "512"}, "one micro-batch a step"),
    "chunk 508, ubatch 128": ({"engine.n_ubatch": "128", "engine.prompt_chunk": "512"}, "4 micro-batches pipelined"),
    "chunk 128, ubatch 512": ({"engine.n_ubatch": "512", "engine.prompt_chunk": "128"}, "small steps, no pipeline"),
}


def long_prompt(tag: str, tokens: int) -> str:
    line = "Inspection note {i}: conveyor {a} in bay {b} showed {c} mm of belt wear; the roller was greased.\n"
    lines = [line.format(i=i, a=i % 9, b=i % 4, c=2 + i % 6) for i in range(tokens // 26)]
    return f"{tag}.\n" + "".join(lines) + "Which conveyor needs attention first?"


def measure(url: str, tag: str, tokens: int, repeats: int) -> list[tuple[float, int]]:
    times = []
    for k in range(repeats):
        seen = stream(url, long_prompt(f"{tag}, prompt {k}", tokens), 2)
        times.append((seen.ttft, seen.prompt_tokens))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="turns of every variant (each starts its app)")
    parser.add_argument("--repeats", type=int, default=2, help="prompts per variant per round")
    parser.add_argument("--prompt-tokens", type=int, default=2000)
    parser.add_argument("--first-port", type=int, default=29300, help="first card RPC port (health +1000)")
    parser.add_argument("--app-port", type=int, default=29390)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with card_agents(args.first_port, work) as cards:
            for r in range(args.rounds):
                for name, (knobs, _) in VARIANTS.items():
                    with app(cards.endpoints, work, args.app_port, {"engine.parallel": "4", **knobs}) as url:
                        stream(url, "A warm-up: write a long, detailed story about it.", 4)
                        results[name] += measure(url, f"Round {r + 1}, {name}", args.prompt_tokens, args.repeats)
    base = statistics.median(t for t, _ in results[next(iter(VARIANTS))])
    print(f"{'variant':<24} {'prompt':>7} {'TTFT p50':>9} {'÷ first':>8}  what it shows")
    for name, (_, shows) in VARIANTS.items():
        ttft = statistics.median(t for t, _ in results[name])
        tokens = int(statistics.median(n for _, n in results[name]))
        print(f"{name:<24} {tokens:>7} {ttft:>9.2f} {ttft / base:>8.2f}  {shows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
