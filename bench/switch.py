"""Model switch: loading a model across four card agents cold, warm, and after the agents restarted.

    .venv/bin/python bench/switch.py [--reps 3] [--model PATH]

Each repetition starts four card agents of its own on loopback with an empty tensor cache folder,
then loads the model three times, each time in a fresh worker process (llama.cpp and ggml's device
registry are per process), closing it again before the next:
  cold:      the cards' tensor cache folders are empty, so every weight travels over RPC;
  warm:      the same card agents again, their cache now filled: for a tensor above ggml-rpc's
             hash threshold (10 MiB) the host sends its hash and the card reads the cache file;
  restarted: the card agents stopped and started again on the same cache folders (fresh processes).
Prints per-load numbers, medians and the ratios warm/cold and restarted/cold, the bytes llama put on
each card, the cache folder size per card after the cold load, and where the bytes went: what the
host sent each card over its RPC connection (from `ss`), what the card agents wrote to and read from
files (their /proc/PID/io: cache writes and reads; sockets are not counted there).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as bench  # bench/engine.py: the worker process driver and CPU / machine-noise readers

if TYPE_CHECKING:
    from launcher.cluster import CardProcesses

KINDS = ("cold", "warm", "restarted")
MIB = 1024 * 1024
_QUIET_PCT = 15  # a load is quiet when other processes used less than this share of the machine's CPU
_SS_BYTES = re.compile(r"\bbytes_(sent|received):(\d+)")


def worker(spec: dict[str, Any]) -> int:
    """Load the model onto the cards in `spec` and report; close it when stdin closes (the bench has
    read the connections' byte counts by then)."""
    from app.engine.lifecycle import die_with_parent

    die_with_parent()
    logging.basicConfig(level=logging.ERROR)  # llama's load-time warnings would interleave with the report
    engine = bench.engine_for(spec)
    wall, cpu = time.monotonic(), time.process_time()
    info = engine.load()
    result = {
        "load_s": info.load_s,
        "engine_load_s": time.monotonic() - wall,
        "host_load_cpu_s": time.process_time() - cpu,
        "layers": [len(c.layers) for c in info.cards],
        "buffer_bytes": [c.buffer_bytes for c in info.cards],
    }
    print(bench.RESULT + json.dumps(result), flush=True)
    sys.stdin.read()
    engine.close()
    return 0


def process_io(pid: int) -> tuple[int, int]:
    """(bytes read, bytes written) through read/write calls of a process so far: files, not sockets."""
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


def connection_bytes(port: int) -> tuple[int, int]:
    """(sent, received) bytes of the established loopback connections to `port`, as the client sees them."""
    out = subprocess.run(
        ["ss", "-tinH", "state", "established", "dst", f"127.0.0.1:{port}"], capture_output=True, text=True
    ).stdout
    found = {"sent": 0, "received": 0}
    for kind, value in _SS_BYTES.findall(out):
        found[kind] += int(value)
    return found["sent"], found["received"]


def folder_bytes(folder: Path) -> tuple[int, int]:
    """(total bytes, number of files) in a folder."""
    files = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    return sum(p.stat().st_size for p in files), len(files)


def evict_from_page_cache(folder: Path) -> None:
    """Write the cache files to disk and drop their pages from the page cache (only these files)."""
    for path in folder.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def measure(
    kind: str, spec: dict[str, Any], cards: CardProcesses, ports: list[int], quiet_wait: float
) -> dict[str, Any]:
    """One load in a fresh worker; what it took on the host, on the cards and on their connections."""
    bench.wait_quiet(quiet_wait)
    pids = [proc.pid for proc in cards.procs.values()]
    cpu0, io0 = [bench.cpu_s(pid) for pid in pids], [process_io(pid) for pid in pids]
    busy0, started = bench.machine_busy_s(), time.monotonic()
    w = bench.Worker(kind, spec, {}, script=Path(__file__))
    try:
        ready_s = time.monotonic() - started
        host_cpu = bench.cpu_s(w.proc.pid)
        cards_cpu = sum(bench.cpu_s(pid) - c for pid, c in zip(pids, cpu0, strict=True))
        busy = bench.machine_busy_s() - busy0
        io = [process_io(pid) for pid in pids]
        sent = [connection_bytes(port)[0] for port in ports]
        assert w.proc.stdin is not None
        w.proc.stdin.close()  # the worker closes the model and exits
        w.proc.wait(timeout=60)
    finally:
        w.stop()
    return {
        "kind": kind,
        **w.info,
        "ready_s": ready_s,
        "cards_cpu_s": cards_cpu,
        "sent_mib": sum(sent) / MIB,
        "cache_written_mib": sum(w1 - w0 for (_, w1), (_, w0) in zip(io, io0, strict=True)) / MIB,
        "cache_read_mib": sum(r1 - r0 for (r1, _), (r0, _) in zip(io, io0, strict=True)) / MIB,
        "sent_mib_per_card": [b / MIB for b in sent],
        "other_cpu_pct": 100 * max(0.0, busy - host_cpu - cards_cpu) / (ready_s * (os.cpu_count() or 1)),
    }


def show(rep: int, r: dict[str, Any]) -> None:
    print(
        f"  rep {rep} {r['kind']:>9}: load {r['load_s']:5.2f} s  spawn→ready {r['ready_s']:5.2f} s  "
        f"CPU s host {r['host_load_cpu_s']:4.2f} cards {r['cards_cpu_s']:4.2f}  sent {r['sent_mib']:5.1f} MiB  "
        f"cache wrote {r['cache_written_mib']:5.1f} read {r['cache_read_mib']:5.1f} MiB  "
        f"other {r['other_cpu_pct']:4.1f}%",
        flush=True,
    )


def run_rep(rep: int, args: argparse.Namespace, spec: dict[str, Any], cards: CardProcesses) -> list[dict[str, Any]]:
    """cold, warm and restarted loads on one set of card agents and one cache folder."""
    from app.endpoint import Endpoint

    ports = [Endpoint.parse(c).port for c in spec["cards"]]
    cache = cards.settings.local_cards.cache_dir
    runs: list[dict[str, Any]] = []
    for kind in KINDS:
        if kind == "restarted":
            cards.stop_all()
            if args.evict_cache:
                evict_from_page_cache(cache)
        if kind != "warm":
            cards.start_all()
        runs.append(measure(kind, spec, cards, ports, args.quiet_wait))
        if kind == "cold":
            runs[-1]["cache_dir_bytes"] = [folder_bytes(cache / f"card{i}") for i in range(len(ports))]
        show(rep, runs[-1])
    cards.stop_all()
    return runs


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    med: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        mine = [r for r in runs if r["kind"] == kind]
        med[kind] = {key: statistics.median(r[key] for r in mine) for key, _ in _COLUMNS}
        per_card = zip(*(r["sent_mib_per_card"] for r in mine), strict=True)
        med[kind]["sent_mib_per_card"] = [statistics.median(sent) for sent in per_card]
    return med


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    med = medians(runs)
    model = Path(args.model)
    print(
        f"\nmedians of {args.reps} reps; {model.name} ({model.stat().st_size / MIB:.0f} MiB); host CPU = the load only"
    )
    print(f"{'':22}" + "".join(f"{title:>{len(title) + 3}}" for _, title in _COLUMNS))
    for kind in KINDS:
        print(f"{kind:22}" + "".join(f"{med[kind][key]:{len(t) + 3}.2f}" for key, t in _COLUMNS))
    for kind in KINDS[1:]:
        cells = [_ratio(med[kind][key], med["cold"][key], len(title) + 3) for key, title in _COLUMNS]
        print(f"{'ratio ' + kind + '/cold':22}" + "".join(cells))
    report_cards(runs, med)
    quiet = {
        kind: [r["load_s"] for r in runs if r["kind"] == kind and r["other_cpu_pct"] < _QUIET_PCT] for kind in KINDS
    }
    print(
        f"{len(runs) - sum(map(len, quiet.values()))} of {len(runs)} loads had other processes above {_QUIET_PCT} % of "
        "the machine's CPU; median load s of the quiet ones: "
        + ", ".join(f"{k} {statistics.median(v):.2f} (n={len(v)})" if v else f"{k} - (n=0)" for k, v in quiet.items())
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs, "medians": med}, indent=1))


def _ratio(value: float, cold: float, width: int) -> str:
    return f"{value / cold:{width}.2f}" if cold else f"{'-':>{width}}"


def report_cards(runs: list[dict[str, Any]], med: dict[str, dict[str, Any]]) -> None:
    first = runs[0]
    print("per card: layers and bytes as llama placed them (Engine.info cards' buffer_bytes), the cache folder")
    print("after the cold load, and the bytes the host sent it (median) cold / warm / restarted:")
    for i, (layers, placed) in enumerate(zip(first["layers"], first["buffer_bytes"], strict=True)):
        size, files = first["cache_dir_bytes"][i]
        sent = " / ".join(f"{med[kind]['sent_mib_per_card'][i]:.1f}" for kind in KINDS)
        print(
            f"  card {i}: {layers} layers, {placed / MIB:6.2f} MiB placed; cache {size / MIB:6.2f} MiB in {files} "
            f"file(s); sent {sent} MiB"
        )
    same = all(r["buffer_bytes"] == first["buffer_bytes"] for r in runs)
    caches = {json.dumps(r["cache_dir_bytes"]) for r in runs if "cache_dir_bytes" in r}
    print(f"placement the same in all {len(runs)} loads: {same}; cache alike after every cold load: {len(caches) == 1}")


_COLUMNS = (
    ("load_s", "load s"),
    ("ready_s", "spawn→ready s"),
    ("host_load_cpu_s", "host CPU s"),
    ("cards_cpu_s", "cards CPU s"),
    ("sent_mib", "sent MiB"),
    ("cache_written_mib", "cache wrote MiB"),
    ("cache_read_mib", "cache read MiB"),
)


def parse_args(demo_model: Path) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--model", default=str(demo_model), help="GGUF file to load (default: the demo model)")
    p.add_argument("--reps", type=int, default=3, help="repetitions of cold, warm, restarted")
    p.add_argument("--first-port", type=int, default=30500, help="RPC port of card 0; the cards use 4 ports from here")
    p.add_argument("--health-offset", type=int, default=1000, help="a card's health port is its RPC port + this")
    p.add_argument("--card-threads", type=int, default=1, help="threads per card agent")
    p.add_argument("--n-ctx", type=int, default=4096, help="context size (its KV cache is allocated on the cards)")
    p.add_argument("--threads", type=int, default=2, help="n_threads of the engine")
    p.add_argument("--quiet-wait", type=float, default=10.0, help="max s to wait for a quiet machine before a load")
    p.add_argument(
        "--evict-cache",
        action="store_true",
        help="drop the cache files from the page cache before 'restarted' (as after a reboot of the cards)",
    )
    p.add_argument("--work-dir", help="folder for cache folders and card logs (default: a temporary one, removed)")
    p.add_argument("--json", help="also write every load's numbers to this file")
    return p.parse_args()


def card_agents(folder: Path, endpoints: list[str], args: argparse.Namespace) -> CardProcesses:
    """Four card agents (not started yet) with their tensor caches and logs in `folder`."""
    from app.settings import Settings
    from launcher.cluster import CardProcesses

    folder.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        engine={"cards": endpoints, "health_offset": args.health_offset},
        local_cards={"cache_dir": folder / "cache", "threads": args.card_threads},
    )
    return CardProcesses(settings, log_dir=folder)


def read_through(path: Path) -> None:
    """Read a file once, so that it is in the page cache for every load alike."""
    with path.open("rb") as f:
        while f.read(16 * MIB):
            pass


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        return worker(json.loads(sys.argv[2]))
    # imported here, not at the top: a worker imports only what the engine needs (spawn→ready stays its own)
    from app.settings import DEMO_MODEL

    args = parse_args(DEMO_MODEL)
    if not Path(args.model).is_file():
        print(f"model file {args.model} does not exist; give a GGUF with --model", file=sys.stderr)
        return 2
    endpoints = [f"127.0.0.1:{args.first_port + i}" for i in range(4)]
    spec = {"model": args.model, "cards": endpoints, "n_ctx": args.n_ctx, "n_batch": 512, "n_ubatch": 512}
    spec["threads"] = args.threads
    read_through(Path(args.model))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks on SIGTERM too
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="quartet-switch-"))
    runs: list[dict[str, Any]] = []
    try:
        for rep in range(args.reps):
            cards = card_agents(work / f"rep{rep}", endpoints, args)  # a fresh, empty cache folder per repetition
            try:
                runs += run_rep(rep, args, spec, cards)
            finally:
                cards.stop_all()
        report(runs, args)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # card agents and workers were stopped by the finally blocks
        sys.exit(130)
