"""CPU of `import gradio` with Gradio's type-stub writer ÷ without it (app/gradio_import.py).

    .venv/bin/python bench/gradio_import.py [--runs 5]

Each run imports Gradio in a fresh process, once as it comes and once after `skip_stub_writer()`, one after the
other (this machine is noisy: the pairs are interleaved); prints each process's CPU seconds (user + sys, from
the child's rusage) and wall seconds, their medians and the ratio. Every start of the app and every process of
the suite that imports Gradio pays the difference.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAIN = "import gradio"
HOOKED = (
    f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
    "from app.gradio_import import skip_stub_writer; skip_stub_writer(); import gradio"
)


def one(code: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    one(PLAIN)  # warm the file cache and the .pyc files
    plain: list[tuple[float, float]] = []
    hooked: list[tuple[float, float]] = []
    for _ in range(runs):
        plain.append(one(PLAIN))
        hooked.append(one(HOOKED))
    for name, rows in (("as it comes", plain), ("stub writer skipped", hooked)):
        cpu = statistics.median(r[0] for r in rows)
        wall = statistics.median(r[1] for r in rows)
        print(
            f"import gradio, {name:<20} CPU {cpu:5.2f} s  wall {wall:5.2f} s  (runs: {[round(r[0], 2) for r in rows]})"
        )
    ratio = statistics.median(r[0] for r in hooked) / statistics.median(r[0] for r in plain)
    print(f"CPU ratio skipped / as it comes: {ratio:.2f}")


if __name__ == "__main__":
    main()
