"""Tokens/s seen by an `openai` streaming client ÷ the engine's own tokens/s, on the same answers.

    .venv/bin/python bench/api.py [--runs 5] [--max-tokens 128]

Starts four card agents and the app on loopback ports of its own, streams the same prompt several
times through /v1/chat/completions, and compares each answer's client-side decode rate with the
rate the engine measured for that very answer (from the `status` endpoint). Prints medians.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import openai
from gradio_client import Client

from app.settings import Settings
from launcher.cluster import CardProcesses

PROMPT = "Write a detailed story about a lighthouse keeper and four friends."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_app(cards: list[str], work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "QUARTET_WEB__PORT": str(port),
        "QUARTET_DATA_DIR": str(work / "var"),
        "QUARTET_ENGINE__CARDS": json.dumps(cards),
        "QUARTET_ENGINE__TEMPERATURE": "0",
    }
    log = open(work / "app.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "app"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).json().get("engine") == "ready":
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit(f"the app did not become ready; see {work / 'app.log'}")


def one_run(api: openai.OpenAI, status: Client, max_tokens: int) -> tuple[float, float, int]:
    stream = api.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    first = last = None
    tokens = 0
    for chunk in stream:
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            last = time.perf_counter()
            first = first or last
    engine = status.predict(api_name="/status")["last_stats"]
    if first is None or last is None or tokens < 3 or last <= first:
        raise RuntimeError("the answer was too short to measure")
    return (tokens - 1) / (last - first), float(engine["decode_tps"]), tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--first-port", type=int, default=30352)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        settings = Settings(
            engine={"cards": [f"127.0.0.1:{args.first_port + i}" for i in range(4)]},
            local_cards={"cache_dir": work / "cache", "threads": 1},
        )
        cards = CardProcesses(settings, log_dir=work)
        cards.start_all()
        app = None
        try:
            app, url = start_app(cards.endpoints, work)
            api = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
            status = Client(url, verbose=False)
            one_run(api, status, 16)  # warm-up
            rows = [one_run(api, status, args.max_tokens) for _ in range(args.runs)]
        finally:
            if app is not None:
                app.terminate()
                app.wait(timeout=30)
            cards.stop_all()
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
