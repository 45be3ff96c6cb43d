"""Quartet against llama.cpp's own llama-server on the same cards: issue 48's table, as Quartet ÷ llama-server.

    .venv/bin/python bench/peer.py [--rounds 2] [--rows decode,fresh,...] [--json out.json]

Builds llama-server once from the llama-cpp-python sdist the project pins (bench/peer_server.py; 15-20 min on two
cores, cached in ~/.cache/quartet/llama-server/), then runs, in one run, the two taking turns, several rounds:
  (a) Quartet's engine (app.engine.llama.engine.Engine) in a worker process (bench/peer_quartet.py), driven
      directly: Engine.generate for one answer, its batcher for four at once;
  (b) llama-server --rpc <its four cards> -ngl 99 over HTTP (/v1/chat/completions, streamed), plain, and
  (c) the same with --spec-type ngram-simple, for the rows where drafting from the context can pay (a quoting
      answer, an extraction) and plain decode (what drafting does to an ordinary answer; the demo model repeats
      its prompt, so there it copies too).
All with the demo model, the app's engine settings (n_ctx per answer × `parallel` answers in one unified KV cache,
n_batch, n_ubatch, host threads), flash attention on, temperature 0 and the same chat template: the one Quartet's
engine renders (the GGUF's own, or the one shipped for its architecture: the demo GGUF has none, and llama-server
left to itself falls back to ChatML) is handed to llama-server with --chat-template-file; both sides' counts of
prompt tokens are printed.

Each side has its own set of four card agents on loopback (RPC 26100-26111, health +1000, the servers' HTTP on
26121-26122; the app's cards are 25052+, the tests' 30252+ and 2,000 lower per test worker, their upstream 28081 and
26081), each loaded once: a card agent serves one host at a time, and loading a side again each
round would put a model load (and, for llama-server, the release of the other side's buffers) inside the rounds.
The sets are idle while the other side runs (an RPC server waits in a socket read), and the memory row reads each
set's own processes. Everything started here stops when the script ends, on Ctrl-C and on an exception too.

Timing, the same on both sides, from the client's side: TTFT from the call (Engine.generate; the HTTP request)
to the first text; decode tok/s = (tokens − 1) ÷ (last chunk − first text), tokens as the engine counted them
(Stats.generated_tokens; usage.completion_tokens); 4 streams: all tokens ÷ (last end − first start). Ratios are
oriented so that above 1.0 means Quartet better: Quartet ÷ peer for speeds, peer ÷ Quartet for times and memory,
against the peer's best setting for the row. The load average (1 min) is printed at each round: on a shared host
read the ratios, not the times.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import engine as bench  # bench/engine.py: the demo model's path, card agents
import peer_server
from peer_rows import NAMES, PEER, ROWS, SPEC, Q, Round, Row

ROOT = Path(__file__).resolve().parents[1]
RESULT = "RESULT "


class Quartet:
    """Quartet's engine in its worker process (bench/peer_quartet.py), loaded once over `cards`."""

    name = Q

    def __init__(self, spec: dict[str, Any]) -> None:
        script = Path(__file__).with_name("peer_quartet.py")
        cmd = [sys.executable, str(script), json.dumps(spec)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = self._read()

    def _read(self) -> Any:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(RESULT):
                return json.loads(line[len(RESULT) :])
        raise RuntimeError(f"Quartet's worker exited with code {self.proc.wait()}")

    def run(self, asks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"asks": asks}) + "\n")
        self.proc.stdin.flush()
        return list(self._read())

    def stop(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        bench.stop_procs([self.proc])


class Peer:
    """A llama-server, asked over HTTP; several asks at once go as parallel requests."""

    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port

    def run(self, asks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(asks) == 1:
            return [peer_server.chat(self.port, asks[0])]
        with ThreadPoolExecutor(len(asks)) as pool:
            return list(pool.map(lambda a: peer_server.chat(self.port, a), asks))


def card_memory(health_ports: list[int]) -> int:
    """Bytes the four card agents hold (each one's health `mem_used_bytes`: its resident memory)."""
    total = 0
    for port in health_ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            total += int(json.loads(response.read())["mem_used_bytes"])
    return total


def ratio(row: Row, values: dict[str, float]) -> float:
    peer = [values[p] for p in row.peers if p in values]
    best = max(peer) if row.higher else min(peer)
    return values[Q] / best if row.higher else best / values[Q]


def play(r: Round, rows: list[Row], results: dict[str, list[dict[str, Any]]]) -> None:
    for row in rows:
        values: dict[str, float] = {}
        notes: list[str] = []
        for side in r.order:
            if side == Q or side in row.peers:
                values[side], note = row.measure(r, side)
                notes.append(f"{side} {values[side]:.3g} {row.unit} ({note})")
        same = len({tuple(answer["text"] for answer in r.last[side]) for side in values}) == 1
        texts = {side: [answer["text"] for answer in r.last[side]] for side in values}
        results[row.name].append({"round": r.number, "values": values, "ratio": ratio(row, values), "texts": texts})
        alike = "same text on every side" if same else "texts differ"
        print(f"  {row.name:10} {ratio(row, values):5.2f}   " + "; ".join(notes) + f"; {alike}", flush=True)


def report(rows: list[Row], results: dict[str, list[dict[str, Any]]], loads: list[float]) -> None:
    print(f"\nQuartet ÷ llama-server (above 1.0: Quartet better), load average per round {loads}")
    for row in rows:
        runs = results[row.name]
        ratios = [run["ratio"] for run in runs]
        sides = [Q, *row.peers]
        raw = "; ".join(f"{s} " + "/".join(f"{run['values'][s]:.3g}" for run in runs) for s in sides)
        shown = " ".join(f"{x:.2f}" for x in ratios)
        print(f"{row.label:78} {statistics.median(ratios):5.2f}  (rounds {shown}; {raw} {row.unit})")
    if "memory" in results:
        m = results["memory"][0]["values"]
        print(f"{'the four cards memory after loading':78} {m[PEER] / m[Q]:5.2f}  ", end="")
        print(f"(quartet {m[Q] / 2**20:,.0f} MiB, llama-server {m[PEER] / 2**20:,.0f} MiB)")


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from app.engine.engine_config import EngineConfig

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=2, help="rounds, the sides taking turns (2 fit in ~15 min)")
    p.add_argument("--rows", default=",".join(NAMES), help=f"comma-separated, of {','.join(NAMES)}")
    p.add_argument("--model", default=str(bench.MODEL))
    p.add_argument("--first-port", type=int, default=26100, help="RPC port of the first card (12 cards, 2 servers)")
    p.add_argument("--cache-dir", default="/tmp/quartet-bench/rpc-cache", help="the card agents' tensor cache")
    p.add_argument("--json", help="also write every round's numbers to this file")
    args = p.parse_args()
    names = args.rows.split(",")
    unknown = set(names) - set(NAMES)
    if unknown:
        p.error(f"unknown rows {sorted(unknown)}; rows are {','.join(NAMES)}")
    rows = [row for row in ROWS if row.name in names]
    wanted = {Q, PEER} | {peer for row in rows for peer in row.peers}
    app = EngineConfig()
    knobs: dict[str, Any] = {"model": args.model, "n_ctx": app.n_ctx, "parallel": app.parallel, "n_batch": app.n_batch}
    knobs |= {"n_ubatch": app.n_ubatch, "threads": app.n_threads}
    binary = peer_server.ensure_binary(peer_server.pinned_version())

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally block on SIGTERM too
    cards: list[subprocess.Popen[bytes]] = []
    servers: list[subprocess.Popen[bytes]] = []
    quartet: Quartet | None = None
    try:
        sides: dict[str, Any] = {}
        health: dict[str, list[int]] = {}
        for i, name in enumerate(s for s in (Q, PEER, SPEC) if s in wanted):
            ports = [args.first_port + 4 * i + k for k in range(4)]
            health[name] = [port + 1000 for port in ports]
            opts = argparse.Namespace(ports=ports, health_ports=health[name], card_threads=[1, 1, 1, 2])
            opts.cache_dir = args.cache_dir
            cards += bench.start_cards(opts, {})
            endpoints = [f"127.0.0.1:{port}" for port in ports]
            if name == Q:
                quartet = Quartet({**knobs, "cards": endpoints})
                sides[name] = quartet
                print(f"quartet: layers per card {quartet.info['layers']}", flush=True)
                # the demo GGUF carries no chat template: the engine renders the one shipped for its architecture
                knobs["template"] = Path(f"/tmp/quartet-bench/peer-template-{os.getpid()}.jinja")
                knobs["template"].write_text(quartet.info["template"])
            else:
                port, spec = args.first_port + 20 + i, "ngram-simple" if name == SPEC else None
                log = Path(f"/tmp/quartet-bench/peer-{port}.log")
                servers.append(peer_server.start(binary, port=port, cards=endpoints, knobs=knobs, spec=spec, log=log))
                sides[name] = Peer(name, port)
                print(f"{name}: loaded over {endpoints} (log {log})", flush=True)
        results: dict[str, list[dict[str, Any]]] = {row.name: [] for row in rows}
        if "memory" in names:
            values = {side: float(card_memory(health[side])) for side in (Q, PEER)}
            results["memory"] = [{"round": 0, "values": values, "ratio": values[PEER] / values[Q]}]
        for side in sides.values():
            side.run([{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}])  # warm-up
        loads: list[float] = []
        started = time.monotonic()
        for number in range(1, args.rounds + 1):
            order = [s for s in (Q, PEER, SPEC) if s in sides]
            order = order if number % 2 else order[::-1]
            loads.append(round(os.getloadavg()[0], 1))
            print(f"round {number} (load average {loads[-1]}; {', '.join(order)} in turn):", flush=True)
            play(Round(number, sides, order), rows, results)
        print(f"{args.rounds} rounds in {time.monotonic() - started:.0f} s", flush=True)
        report(rows, results, loads)
        if args.json:
            Path(args.json).write_text(
                json.dumps({"knobs": knobs, "loads": loads, "results": results}, indent=1, default=str)
            )
    finally:
        if quartet is not None:
            quartet.stop()
        for server in servers:
            peer_server.stop(server)
        bench.stop_procs(cards)
        if "template" in knobs:
            knobs["template"].unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # everything started was stopped by main's finally
        sys.exit(130)
