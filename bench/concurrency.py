"""Aggregate decode tokens/s seen by 1, 2, 4 and 8 concurrent `openai` streaming clients ÷ 1 client.

    PYTHONPATH=. .venv/bin/python bench/concurrency.py [--max-tokens 128] [--parallel 8] [--rounds 1]

Starts four card agents and the app (engine worker, `parallel` slots) on loopback ports of its own,
then for each client count streams that many different prompts at once through
/v1/chat/completions (temperature 0). For each round: aggregate tokens/s = every client's completion
tokens ÷ the time from the first client's first token to the last client's last token, and each
client's time to first token. Prints the table and the ratios to one client, all from one run, with what
limits them on this machine: the cores the whole bench (cards, app, engine worker, clients) kept busy, of
the machine's, and the last card's CPU ms per generated token (it holds the 262k-token output matrix).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import openai

from app.settings import Settings
from launcher.cluster import CardProcesses

TOPICS = [
    "a lighthouse keeper",
    "a copper mine",
    "a bicycle race",
    "a lost cat",
    "a night train",
    "a mountain village",
    "a clockmaker",
    "a river ferry",
]


def start_app(
    cards: list[str], work: Path, port: int, parallel: int, settings: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """The app on `cards`; `settings` are more QUARTET_* variables (name without the prefix → value)."""
    env = {
        **os.environ,
        "QUARTET_PORT": str(port),
        "QUARTET_DATA_DIR": str(work / "var"),
        "QUARTET_CARDS": json.dumps(cards),
        "QUARTET_TEMPERATURE": "0",
        "QUARTET_PARALLEL": str(parallel),
        "QUARTET_KB_DIR": str(work / "kb"),
        **{f"QUARTET_{name.upper()}": value for name, value in (settings or {}).items()},
    }
    log = open(work / "app.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--die-with-parent"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
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


def client(url: str, topic: str, max_tokens: int, out: dict[str, float], started: float, text: str = "") -> None:
    """One streaming client asking for a story about `topic` (or sending `text` as it is)."""
    api = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)
    stream = api.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": text or f"{topic}: write a long, detailed story about it."}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.usage:
            out["tokens"] = chunk.usage.completion_tokens
            out["prompt_tokens"] = chunk.usage.prompt_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            now = time.perf_counter()
            out.setdefault("first", now)
            out["last"] = now
    out["ttft"] = out["first"] - started


def one_round(url: str, n: int, max_tokens: int, tag: str) -> tuple[float, list[float], int]:
    """`n` clients at once; `tag` leads every prompt so that no round finds another's prompt cached."""
    outs: list[dict[str, float]] = [{} for _ in range(n)]
    started = time.perf_counter()
    threads = [
        threading.Thread(target=client, args=(url, f"{tag}, {TOPICS[i % len(TOPICS)]}", max_tokens, outs[i], started))
        for i in range(n)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tokens = int(sum(o["tokens"] for o in outs))
    span = max(o["last"] for o in outs) - min(o["first"] for o in outs)
    return tokens / span, [o["ttft"] for o in outs], tokens


def cpu_seconds(root: int) -> float:
    """CPU time (user + system) of `root` and every process below it, from /proc."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += parents.get(pid, [])
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def measured(
    url: str, n: int, max_tokens: int, tag: str, cards: list[int]
) -> tuple[float, list[float], int, float, float]:
    """`one_round`, with the cores the whole bench kept busy over it and the last card's CPU ms per token."""
    before, last_card, wall = cpu_seconds(os.getpid()), cpu_seconds(cards[-1]), time.perf_counter()
    rate, ttfts, tokens = one_round(url, n, max_tokens, tag)
    busy = (cpu_seconds(os.getpid()) - before) / (time.perf_counter() - wall)
    return rate, ttfts, tokens, busy, 1000 * (cpu_seconds(cards[-1]) - last_card) / tokens


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--parallel", type=int, default=8, help="the app's slots (8: every client batched)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per client count (medians are shown)")
    parser.add_argument("--clients", default="1,2,4,8")
    parser.add_argument("--first-port", type=int, default=29100, help="first card RPC port (health +1000)")
    parser.add_argument("--app-port", type=int, default=29190)
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    results: dict[int, list[tuple[float, list[float], int, float, float]]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        settings = Settings(
            cards=[f"127.0.0.1:{args.first_port + i}" for i in range(4)], card_cache_dir=work / "cache", card_threads=1
        )
        cards = CardProcesses(settings, log_dir=work)
        cards.start_all()
        app = None
        try:
            app, url = start_app(settings.cards, work, args.app_port, args.parallel)
            client(url, "a warm-up", 16, {}, time.perf_counter())  # a topic no round asks about
            for r in range(args.rounds):
                for n in counts:
                    pids = [cards.procs[i].pid for i in sorted(cards.procs)]
                    results[n].append(measured(url, n, args.max_tokens, f"Round {r + 1} of {n}", pids))
        finally:
            if app is not None:
                app.terminate()
                app.wait(timeout=30)
            cards.stop_all()
    base = statistics.median(r[0] for r in results[counts[0]])
    print(
        f"{'clients':>7} {'tokens':>7} {'agg tok/s':>10} {'÷ 1 client':>11} {'TTFT p50':>9} {'TTFT p95':>9} "
        f"{'cores busy':>10} {'last card ms/tok':>16}"
    )
    for n in counts:
        rate = statistics.median(r[0] for r in results[n])
        ttfts = [t for r in results[n] for t in r[1]]
        tokens = int(statistics.median(r[2] for r in results[n]))
        print(
            f"{n:>7} {tokens:>7} {rate:>10.1f} {rate / base:>11.2f} {percentile(ttfts, 0.5):>9.2f} "
            f"{percentile(ttfts, 0.95):>9.2f} {statistics.median(r[3] for r in results[n]):>10.2f} "
            f"{statistics.median(r[4] for r in results[n]):>16.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
