"""Knowledge base: ingestion end to end vs its raw parts, and hybrid search latency at scale.

    .venv/bin/python bench/knowledge.py [--threads 1] [--sizes 10000 100000] [--queries 200]

1. Ingestion of GeoTopo-komprimiert.pdf (117 pages), side by side in one process:
   (a) raw: pypdf extracts every page in-process, then SentenceTransformer.encode embeds the very
       chunks the app makes (same model, same torch threads, normalised, batch 16);
   (b) app: KnowledgeService.ingest_paths → wait_idle on a fresh database (PDF reader child
       process, chunking, embedding, one SQLite transaction).
   Prints pages/s and chunks/s of both and the throughput ratio (b)/(a); the target is ≥ 0.90.
2. Hybrid search over synthetic indexes of 10k and 100k chunks (text: random windows of the
   corpus; vectors: random unit vectors; the questions of tests/data/knowledge/questions.json as
   queries). Prints p50/p95 of the retrieval (vector k-NN + FTS5 BM25 + fusion, the query vector
   given) and of the whole search (with embedding the query); the target is p95 ≤ 15 ms at 100k.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app.database import Locked, open_database  # noqa: E402
from app.knowledge.chunking import Chunk  # noqa: E402
from app.knowledge.embedder import Embedder  # noqa: E402
from app.knowledge.loaders import Page  # noqa: E402
from app.knowledge.search import fused_search, hybrid_search  # noqa: E402
from app.knowledge.service import KnowledgeService  # noqa: E402
from app.knowledge.store import FileState, KnowledgeStore  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
GEOTOPO = CORPUS / "pdf" / "GeoTopo-komprimiert.pdf"
QUESTIONS = ROOT / "tests" / "data" / "knowledge" / "questions.json"


def raw_ingestion(embedder: Embedder, chunks: list[str]) -> float:
    """pypdf in-process, then plain SentenceTransformer.encode of the app's own chunks: seconds."""
    import pypdf
    from sentence_transformers import SentenceTransformer

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    model = SentenceTransformer(str(embedder.model_dir), device="cpu")
    model.encode(["warm up"])
    started = time.perf_counter()
    pages = [page.extract_text() or "" for page in pypdf.PdfReader(GEOTOPO).pages]
    extract_s = time.perf_counter() - started
    started = time.perf_counter()
    model.encode(chunks, batch_size=16, normalize_embeddings=True, show_progress_bar=False)
    encode_s = time.perf_counter() - started
    print(f"  raw: pypdf {len(pages)} pages {extract_s:.1f} s + encode {len(chunks)} chunks {encode_s:.1f} s")
    return extract_s + encode_s


def app_ingestion(embedder: Embedder, folder: Path) -> tuple[float, int, list[str]]:
    """KnowledgeService end to end on a fresh database: (seconds, pages, chunk texts)."""
    service = KnowledgeService(Locked(open_database(folder / "bench.db")), embedder, kb_dir=None)
    service.start()
    started = time.perf_counter()
    service.ingest_paths([GEOTOPO])
    service.wait_idle()
    elapsed = time.perf_counter() - started
    service.stop()
    (doc,) = service.documents()
    assert doc.status == "ok", doc.error
    return elapsed, doc.pages_total, [c.text for c in service.document_chunks(doc.id)]


def bench_ingestion(embedder: Embedder, reps: int) -> None:
    print(f"1. ingesting {GEOTOPO.name} (torch threads: {embedder.threads}; app and raw alternate, {reps}× each)")
    embedder.embed(["warm up"])
    app_runs, raw_runs = [], []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as folder:
            app_s, pages, chunks = app_ingestion(embedder, Path(folder))
        app_runs.append(app_s)
        raw_runs.append(raw_ingestion(embedder, chunks))
    app_s, raw_s = statistics.median(app_runs), statistics.median(raw_runs)
    print(f"  raw: {raw_s:6.1f} s  {pages / raw_s:5.2f} pages/s  {len(chunks) / raw_s:5.2f} chunks/s  (median)")
    print(f"  app: {app_s:6.1f} s  {pages / app_s:5.2f} pages/s  {len(chunks) / app_s:5.2f} chunks/s  (median)")
    print(f"  ratio app/raw (throughput): {raw_s / app_s:.2f}  (target ≥ 0.90)")


def corpus_text() -> str:
    texts = [p.read_text(encoding="utf-8") for p in sorted((CORPUS / "zh").glob("*.txt"))]
    texts.append((CORPUS / "pdf" / "LICENSE-CC-BY-SA-4.0.txt").read_text(encoding="utf-8"))
    return "\n".join(texts)


def build_index(store: KnowledgeStore, size: int, dim: int, rng: np.random.Generator) -> None:
    text = corpus_text()
    per_doc = 1000
    for doc in range(size // per_doc):
        doc_id = store.add(f"/synthetic/{size}/doc-{doc}.txt", name=f"doc-{doc}.txt", collection="default")
        starts = rng.integers(0, len(text) - 400, size=per_doc)
        chunks = [Chunk(i // 10 + 1, i, 0, 400, text[s : s + 400], 100) for i, s in enumerate(starts)]
        pages = [Page(n, "synthetic page") for n in range(1, per_doc // 10 + 1)]
        vectors = rng.normal(size=(per_doc, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        state = FileState(f"{size}-{doc}", 0, 0.0)
        store.replace_content(doc_id, state, pages=pages, chunks=chunks, vectors=vectors, note=None)


def percentiles(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):6.1f} ms  p95 {p95:6.1f} ms"


def bench_search(embedder: Embedder, sizes: list[int], queries: int) -> None:
    questions = [q["question"] for q in json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]]
    asked = [questions[i % len(questions)] for i in range(queries)]
    vectors = embedder.embed(asked)
    weights = [embedder.readable_share(q) ** 2 for q in asked]
    rng = np.random.default_rng(1828)
    print(f"2. hybrid search, {queries} queries (the question set, repeated), k=5")
    for size in sizes:
        with tempfile.TemporaryDirectory() as folder:
            store = KnowledgeStore(Locked(open_database(Path(folder) / "bench.db")), model=embedder.name)
            started = time.perf_counter()
            build_index(store, size, embedder.dim, rng)
            store.ensure_vectors()
            built_s = time.perf_counter() - started
            pool = ThreadPoolExecutor(max_workers=2)  # as KnowledgeService does: full text beside the vectors
            fused_search(store, asked[0], vectors[0], vector_weight=1.0, k=5, scope=None, pool=pool)  # warm up
            retrieval, whole = [], []
            for query, vector, weight in zip(asked, vectors, weights, strict=True):
                t0 = time.perf_counter()
                fused_search(store, query, vector, vector_weight=weight, k=5, scope=None, pool=pool)
                t1 = time.perf_counter()
                hybrid_search(store, embedder, query, k=5, pool=pool)
                retrieval.append(t1 - t0)
                whole.append(time.perf_counter() - t1)
            print(f"  {size:>7} chunks (built in {built_s:5.1f} s)")
            print(f"    retrieval (vector + FTS5 + fusion): {percentiles(retrieval)}")
            print(f"    with embedding the query:           {percentiles(whole)}")
            pool.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the embedder (the app's default: 1)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--reps", type=int, default=2, help="ingestion runs of each side")
    parser.add_argument("--skip-ingestion", action="store_true")
    args = parser.parse_args()
    embedder = Embedder.packaged(threads=args.threads)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if not args.skip_ingestion:
        bench_ingestion(embedder, args.reps)
    bench_search(embedder, args.sizes, args.queries)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
