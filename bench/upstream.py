"""What a client sees through Quartet ÷ straight from the same upstream: decode tokens/s and first token.

    .venv/bin/python bench/upstream.py [--runs 6] [--max-tokens 128]

Starts llama-cpp-python's OpenAI-compatible server with the demo model on loopback, and the app with
`engine.backend = upstream` in front of it (no cards). Then streams the same prompt (temperature 0)
alternately straight from the server and through Quartet's /v1, each answer timed by its client, and
prints the medians side by side and their ratios. Both go through one server, one answer at a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(ROOT))
from appliance import app  # bench/appliance.py  # noqa: E402

from tests.upstream_server import LlamaCppServer  # noqa: E402

PROMPT = "Write a detailed story about a lighthouse keeper and four friends."


def timed(base: str, max_tokens: int) -> tuple[float, float, int]:
    """(first token s, decode tokens/s, pieces) of one streamed answer from `base`/chat/completions."""
    body = {
        "model": "demo",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 7,
        "stream": True,
    }
    started = time.perf_counter()
    first = last = 0.0
    pieces = 0
    with httpx.stream("POST", f"{base}/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]" and _text(json.loads(line[5:])):
                last = time.perf_counter()
                first = first or last
                pieces += 1
    if pieces < 3:
        raise RuntimeError(f"the answer from {base} was too short to measure ({pieces} pieces)")
    return first - started, (pieces - 1) / (last - first), pieces


def _text(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--port", type=int, default=28181, help="the upstream's port (below 32768)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = LlamaCppServer(args.port, work)
        server.start()
        try:
            settings = {"engine.backend": "upstream", "engine.upstream_url": server.url, "engine.n_ctx": "2048"}
            with app([], work, settings=settings) as url:
                direct, through = [], []
                timed(server.url, 16), timed(url + "/v1", 16)  # warm both paths
                for _ in range(args.runs):
                    direct.append(timed(server.url, args.max_tokens))
                    through.append(timed(url + "/v1", args.max_tokens))
        finally:
            server.kill()
    report(direct, through)
    return 0


def report(direct: list[tuple[float, float, int]], through: list[tuple[float, float, int]]) -> None:
    def median(rows: list[tuple[float, float, int]], i: int) -> float:
        return statistics.median(row[i] for row in rows)

    ttft_d, ttft_q = median(direct, 0), median(through, 0)
    tps_d, tps_q = median(direct, 1), median(through, 1)
    print(f"{'':22}{'straight':>12}{'through Quartet':>18}{'ratio':>10}")
    print(f"{'decode tok/s':22}{tps_d:>12.1f}{tps_q:>18.1f}{tps_q / tps_d:>10.3f}")
    added = f"+{(ttft_q - ttft_d) * 1000:.0f} ms"
    print(f"{'first token ms':22}{ttft_d * 1000:>12.0f}{ttft_q * 1000:>18.0f}{added:>10}")
    pieces = f"{median(direct, 2):.0f} straight, {median(through, 2):.0f} through"
    print(f"pieces per answer: {pieces}; {len(direct)} runs each")


if __name__ == "__main__":
    sys.exit(main())
