"""The app's memory after small uploads and searches, and what giving the heap back at idle changes.

    PYTHONPATH=. .venv/bin/python bench/app_memory.py [--rounds 3] [--idle-s 60] [--trace]

Each variant gets a fresh process with the launcher's environment (launcher/cluster.py's APP_ENVIRONMENT)
that builds the knowledge service as app/__main__.py does (a SQLite file, the packaged MiniLM, a kb folder),
then: the first search (the embedder loads: torch, sentence-transformers, MiniLM), `--rounds` rounds of 12
uploads of the tests' small library files (PDFs, DOCX, HTML, CSV, Markdown, Chinese text, an encrypted,
a broken and an unsupported file), each followed by 3 searches, then `--idle-s` seconds idle. At each step:
resident memory (/proc/self/status: all, anonymous, file-backed) and glibc's heap (`mallinfo2`: bytes in
use, bytes free but kept). The variants run one after the other in one run: "kept" as before issue 47
item 9 (the trim disabled), "given back" as the app now runs (app/heap.py's trim when the ingest queue goes
idle). `--trace` adds tracemalloc's top Python allocations of the upload rounds by file:line (started after
the embedder loaded, so its import is not traced).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from launcher.cluster import APP_ENVIRONMENT  # noqa: E402

CHILD = """
import ctypes, gc, json, sys, tempfile, time, tracemalloc
from pathlib import Path
from app import heap
from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService
from tests.library import QUESTIONS, write_library

variant, rounds, idle_s, trace = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Mallinfo2

def step(name):
    gc.collect()
    lines = open("/proc/self/status").read().splitlines()
    keys = ("VmRSS", "RssAnon", "RssFile")
    status = {l.split(":")[0]: int(l.split()[1]) // 1024 for l in lines if l.startswith(keys)}
    info = libc.mallinfo2()
    print(json.dumps({"step": name, "rss": status["VmRSS"], "anon": status["RssAnon"], "file": status["RssFile"],
                      "heap_used": info.uordblks >> 20, "heap_free": info.fordblks >> 20}), flush=True)

if variant == "kept":
    heap.give_back = lambda: False  # as before: the service's queue is built with this
tmp = Path(tempfile.mkdtemp())
files = sorted(write_library(tmp / "library").iterdir())[:12]
service = KnowledgeService(Database(tmp / "quartet.db"), Embedder.packaged(), kb_dir=tmp / "kb",
                           options=KnowledgeOptions(watch=False))
service.start()
step("services built")
service.search("warm up")
step("embedder loaded")
if trace:
    tracemalloc.start(8)
    before = tracemalloc.take_snapshot()
for n in range(rounds):
    for path in files:
        service.upload(f"{n}-{path.name}", path.read_bytes())
        service.wait_idle(600)
        time.sleep(0.2)  # the queue's idle hook runs just after wait_idle returns
        for question in QUESTIONS[:3]:
            service.search(question.question)
    step(f"after round {n + 1} (12 uploads, 36 searches)")
if trace:
    after = tracemalloc.take_snapshot()
    for stat in after.compare_to(before, "lineno")[:12]:
        print(json.dumps({"trace": str(stat)}), flush=True)
    tracemalloc.stop()
time.sleep(idle_s)
step(f"after {idle_s:.0f} s idle")
service.stop()
"""

VARIANTS = ("kept", "given back")


def run(variant: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    clean = {k: v for k, v in os.environ.items() if k not in APP_ENVIRONMENT}
    env = {**clean, **APP_ENVIRONMENT, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", CHILD, variant, str(args.rounds), str(args.idle_s), "1" if args.trace else "0"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _cells(row: dict[str, Any]) -> str:
    return " / ".join(str(row[key]) for key in ("rss", "anon", "file", "heap_used", "heap_free"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of 12 uploads and 36 searches")
    parser.add_argument("--idle-s", type=float, default=60.0, help="seconds idle after the last round")
    parser.add_argument("--trace", action="store_true", help="tracemalloc's top allocations of the rounds")
    args = parser.parse_args()
    rows = {variant: run(variant, args) for variant in VARIANTS}
    results = {variant: [row for row in rows[variant] if "step" in row] for variant in VARIANTS}
    print(f"{'step':<42}" + "".join(f"{v + ': RSS / anon / file / heap used / free MB':>50}" for v in VARIANTS))
    for at, row in enumerate(results[VARIANTS[0]]):
        cells = [_cells(results[variant][at]) for variant in VARIANTS]
        print(f"{row['step']!s:<42}" + "".join(f"{cell:>50}" for cell in cells))
    kept, given = (int(results[v][-1]["anon"]) - int(results[v][1]["anon"]) for v in VARIANTS)
    print(f"anonymous memory after the embedder loaded, at the end: kept {kept:+} MB, given back {given:+} MB", end="")
    print(f", ratio {given / kept:.2f}" if kept > 0 else "")
    for variant in VARIANTS:
        for row in rows[variant]:
            if "trace" in row:
                print(f"[{variant}] {row['trace']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
