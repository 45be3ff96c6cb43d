"""Whole-document mode end to end: summarise GeoTopo-komprimiert.pdf (117 pages) on four card agents.

    .venv/bin/python bench/summarize.py [--pdf PATH] [--n-ctx 4096] [--ports 30600 30601 30602 30603]

The real parts, composed as the app composes them: four card agents on loopback, the demo model in
the engine worker, the knowledge base (PDF loader, chunking, MiniLM, SQLite in a temporary folder) and
the Summariser's map-reduce. Prints each step as it starts (part k of n, pages), the time per part, the
whole run's time, the summary, and which pages it cites — the proof that a ~100-page document is read
to the end within the model's context. One run, not a ratio: this is a soak test, not a speed claim.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app.__main__ import PROMPTS  # noqa: E402
from app.database import Database  # noqa: E402
from app.engine.kinds import backend_kind  # noqa: E402
from app.engine.service import EngineService  # noqa: E402
from app.knowledge.embedder import Embedder  # noqa: E402
from app.knowledge.options import KnowledgeOptions  # noqa: E402
from app.knowledge.service import KnowledgeService  # noqa: E402
from app.knowledge.summary import Summariser  # noqa: E402
from app.settings import Settings  # noqa: E402
from launcher.cluster import CardProcesses  # noqa: E402

GEOTOPO = ROOT.parent / "shared" / "corpus" / "pdf" / "GeoTopo-komprimiert.pdf"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pdf", type=Path, default=GEOTOPO)
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--question", default="", help="ask about the whole document instead of summarising it")
    p.add_argument("--ports", type=int, nargs=4, default=[30600, 30601, 30602, 30603])
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="quartet-summarize-"))
    settings = Settings(
        data_dir=work,
        engine={"cards": [f"127.0.0.1:{port}" for port in args.ports], "n_ctx": args.n_ctx},
        knowledge={"dir": work / "kb"},
        local_cards={"cache_dir": work / "rpc-cache"},
    )
    cards = CardProcesses(settings, log_dir=work)
    cards.start_all()
    engine = EngineService(settings.engine, kinds=backend_kind)
    knowledge = KnowledgeService(
        Database(settings.db_path), Embedder.packaged(), kb_dir=None, options=KnowledgeOptions(watch=False)
    )
    try:
        engine.start()
        knowledge.start()
        started = time.monotonic()
        knowledge.ingest_paths([args.pdf])
        knowledge.wait_idle()
        (doc,) = knowledge.documents()
        print(
            f"indexed {doc.name}: {doc.status}, {doc.pages_total} pages, {doc.chunk_count} chunks "
            f"in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        assert engine.wait_ready(600), engine.status().message
        summariser = Summariser(knowledge, engine, PROMPTS)
        print(f"{len(summariser.groups(knowledge.document_chunks(doc.id)))} parts at n_ctx {args.n_ctx}", flush=True)
        started = last = time.monotonic()
        step, text, error = "", "", None
        for update in summariser.run(doc.id, question=args.question or None):
            if update.progress and update.progress != step:
                now = time.monotonic()
                print(f"[{now - started:7.1f} s, +{now - last:5.1f} s] {update.progress}", flush=True)
                step, last = update.progress, now
            text, error = update.text, update.error
        total = time.monotonic() - started
        pages = sorted({int(n) for n in re.findall(r"(?:p\.|pages?|S\.)\s*(\d+)", text)})
        print(f"\nwhole run: {total / 60:.1f} min; error: {error}; pages cited: {pages}\n\n{text}")
        return 0 if text.strip() and not error else 1
    finally:
        knowledge.stop()
        engine.stop()
        cards.stop_all()


if __name__ == "__main__":
    sys.exit(main())
