"""Loaders: the reader process kept between documents vs one per document; pagination, old vs new.

    .venv/bin/python bench/loaders.py [--files 50] [--sizes 5 10 20]

1. Reading `--files` small text files, round by round side by side: (a) a reader process started
   for each document (`read_document`), (b) one `Reader` kept between documents (as each indexing
   lane does). Prints ms per file of both and the ratio (a)/(b).
2. Cutting text of `--sizes` MB (one line of words: the worst case, no paragraph to cut at) into
   3,000-character pages: (a) the cut used before issue 10, which copied the rest of the text at
   each page, (b) `Paginator`. Prints seconds and seconds per MB of both, and the ratio (a)/(b).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.knowledge.loaders import Reader, ReadLimits  # noqa: E402
from app.knowledge.loaders.reader import read_document  # noqa: E402
from app.knowledge.loaders.text import _cut_point, paginate  # noqa: E402

MB = 2**20


def old_paginate(text: str, *, page_chars: int) -> int:
    """The pagination before issue 10 (pages counted): `part = part[cut:]` copies the rest at each cut."""
    pages = 0
    for part in text.split("\f"):
        while len(part) > page_chars:
            cut = _cut_point(part[:page_chars], page_chars)
            pages += 1
            part = part[cut:]
        pages += 1
    return pages


def readers(files: int) -> None:
    limits = ReadLimits()
    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / f"ticket-{n:03d}.txt" for n in range(files)]
        for n, path in enumerate(paths):
            path.write_text(f"Ticket {n:03d}: card {n % 4} reported code E{n:04d}.")
        kept = Reader()
        apart_s = kept_s = 0.0
        for path in paths:  # interleaved: both see the same load on the machine
            started = time.perf_counter()
            read_document(path, format="text", password=None, limits=limits)
            apart_s += time.perf_counter() - started
            started = time.perf_counter()
            kept.read(path, format="text", password=None, limits=limits)
            kept_s += time.perf_counter() - started
        kept.close()
    print(
        f"reading {files} small text files: a process per document {apart_s / files * 1000:.1f} ms/file, "
        f"a kept reader {kept_s / files * 1000:.1f} ms/file — ratio {apart_s / kept_s:.1f}×"
    )


def pagination(sizes: list[int]) -> None:
    for size in sizes:
        text = "abcdefghij " * (size * MB // 11)
        started = time.perf_counter()
        old_pages = old_paginate(text, page_chars=3000)
        old_s = time.perf_counter() - started
        started = time.perf_counter()
        new_pages = len(paginate(text, page_chars=3000))
        new_s = time.perf_counter() - started
        assert old_pages == new_pages, (old_pages, new_pages)
        print(
            f"paginating {size} MB ({new_pages} pages): before {old_s:.2f} s ({old_s / size:.3f} s/MB), "
            f"Paginator {new_s:.2f} s ({new_s / size:.3f} s/MB) — ratio {old_s / new_s:.1f}×"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20])
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    readers(args.files)
    pagination(args.sizes)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
