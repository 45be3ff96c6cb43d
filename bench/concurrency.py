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
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from appliance import Streamed, app, card_agents, stream  # bench/appliance.py

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


def one_round(url: str, n: int, max_tokens: int, tag: str) -> tuple[float, list[float], int]:
    """`n` clients at once; `tag` leads every prompt so that no round finds another's prompt cached."""
    seen: list[Streamed | None] = [None] * n
    started = time.perf_counter()

    def client(i: int) -> None:
        topic = f"{tag}, {TOPICS[i % len(TOPICS)]}"
        seen[i] = stream(url, f"{topic}: write a long, detailed story about it.", max_tokens, started=started)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done = [s for s in seen if s is not None]
    firsts, lasts = [s.first for s in done if s.first], [s.last for s in done if s.last]
    assert len(firsts) == len(lasts) == n, "a client got no text"
    tokens = sum(s.tokens for s in done)
    return tokens / (max(lasts) - min(firsts)), [s.ttft for s in done], tokens


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
    url: str, n: int, max_tokens: int, tag: str, last_card: int
) -> tuple[float, list[float], int, float, float]:
    """`one_round`, with the cores the whole bench kept busy over it and the last card's CPU ms per token."""
    before, card_before, wall = cpu_seconds(os.getpid()), cpu_seconds(last_card), time.perf_counter()
    rate, ttfts, tokens = one_round(url, n, max_tokens, tag)
    busy = (cpu_seconds(os.getpid()) - before) / (time.perf_counter() - wall)
    return rate, ttfts, tokens, busy, 1000 * (cpu_seconds(last_card) - card_before) / tokens


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
    parser.add_argument("--card-threads", type=int, help="CPU threads of each card agent (default: the app's)")
    parser.add_argument("--last-card-threads", type=int, help="... of the last one (default: the app's)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.NAME=VALUE", help="another setting")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    knobs = {"engine.parallel": str(args.parallel), **dict(item.split("=", 1) for item in args.set)}
    results: dict[int, list[tuple[float, list[float], int, float, float]]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cards_at = card_agents(args.first_port, work, threads=args.card_threads, last_threads=args.last_card_threads)
        with cards_at as cards, app(cards.endpoints, work, args.app_port, knobs) as url:
            last_card = cards.procs[len(cards.procs) - 1].pid
            stream(url, "A warm-up: write a long, detailed story about it.", 16)  # a topic no round asks about
            for r in range(args.rounds):
                for n in counts:
                    results[n].append(measured(url, n, args.max_tokens, f"Round {r + 1} of {n}", last_card))
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
