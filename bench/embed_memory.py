"""What embedding costs the app's memory, under each allocator setting the launcher can give it.

    PYTHONPATH=. .venv/bin/python bench/embed_memory.py [--chunks 1500]

Each setting gets a fresh process that loads the packaged MiniLM and embeds `--chunks` passages of CSV
rows (numbers: many word pieces each) in the indexer's way — sorted by length, batches of 16, in a
thread of its own — and reports its resident memory before and after (after a gc: what the process
keeps). The settings run one after another in one run, so their growths compare; the launcher starts
the app with the last one (launcher/cluster.py's APP_ENVIRONMENT).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from launcher.cluster import APP_ENVIRONMENT  # noqa: E402

SETTINGS: dict[str, dict[str, str]] = {
    "glibc defaults": {},
    "MALLOC_ARENA_MAX=2": {"MALLOC_ARENA_MAX": "2"},
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY=16": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "16"},
    "the launcher's (both)": dict(APP_ENVIRONMENT),
}

CHILD = """
import gc, json, sys, threading, time
from app.knowledge.embedder import Embedder

def rss_mb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) // 1024

embedder = Embedder.packaged()
embedder.embed(["warm up"] * 4)
before = rss_mb()
rows = (range(i, i + 5 + i % 60) for i in range(int(sys.argv[1])))
texts = sorted((" ".join(f"{j},{j % 4},{40 + j % 30}" for j in row) for row in rows), key=len)
def index():
    for at in range(0, len(texts), 16):
        embedder.embed(texts[at:at + 16], background=True)
thread = threading.Thread(target=index)
thread.start()
thread.join()
gc.collect()
time.sleep(1)
print(json.dumps({"before": before, "after": rss_mb()}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=1500, help="passages embedded per setting")
    args = parser.parse_args()
    clean = {k: v for k, v in os.environ.items() if k not in {"MALLOC_ARENA_MAX", "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}}
    base = {**clean, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    print(f"{'setting':<36} {'before MB':>9} {'after MB':>8} {'growth':>7} {'÷ default':>9}")
    first = None
    for name, extra in SETTINGS.items():
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.chunks)], env={**base, **extra}, capture_output=True, text=True
        )
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        result = json.loads(done.stdout.strip().splitlines()[-1])
        growth = result["after"] - result["before"]
        first = first or growth
        print(f"{name:<36} {result['before']:>9} {result['after']:>8} {growth:>+7} {growth / first:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
