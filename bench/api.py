"""Tokens/s seen by an `openai` streaming client ÷ the engine's own tokens/s, on the same answers.

    .venv/bin/python bench/api.py [--runs 5] [--max-tokens 128]

Starts four card agents and the app on loopback ports of its own, streams the same prompt several
times through /v1/chat/completions, and compares each answer's client-side decode rate with the
rate the engine measured for that very answer (from the `status` endpoint). Prints medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from gradio_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from appliance import app, card_agents, stream  # bench/appliance.py

PROMPT = "Write a detailed story about a lighthouse keeper and four friends."


def one_run(url: str, status: Client, max_tokens: int) -> tuple[float, float, int]:
    seen = stream(url, PROMPT, max_tokens)
    engine = status.predict(api_name="/status")["last_stats"]
    if seen.first is None or seen.last is None or seen.tokens < 3 or seen.last <= seen.first:
        raise RuntimeError("the answer was too short to measure")
    return (seen.tokens - 1) / (seen.last - seen.first), float(engine["decode_tps"]), seen.tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--first-port", type=int, default=30352)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with card_agents(args.first_port, work) as cards, app(cards.endpoints, work) as url:
            status = Client(url, verbose=False)
            one_run(url, status, 16)  # warm-up
            rows = [one_run(url, status, args.max_tokens) for _ in range(args.runs)]
    print(f"{'run':>4} {'tokens':>7} {'client tok/s':>13} {'engine tok/s':>13} {'ratio':>7}")
    for i, (client_tps, engine_tps, tokens) in enumerate(rows, 1):
        print(f"{i:>4} {tokens:>7} {client_tps:>13.1f} {engine_tps:>13.1f} {client_tps / engine_tps:>7.3f}")
    ratios = [c / e for c, e, _ in rows]
    print(
        f"median client {statistics.median(r[0] for r in rows):.1f} tok/s, engine "
        f"{statistics.median(r[1] for r in rows):.1f} tok/s, ratio {statistics.median(ratios):.3f} (target ≥ 0.97)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
