"""Knowledge base: ingestion end to end vs its raw parts, and hybrid search latency at scale.

    .venv/bin/python bench/knowledge.py [--threads 1] [--sizes 10000 100000] [--queries 200] [--skip-ingestion]

1. Ingestion of GeoTopo-komprimiert.pdf (117 pages), side by side in one process:
   (a) raw: pypdf extracts every page in-process, then SentenceTransformer.encode embeds the very
       chunks the app makes (same model, same torch threads, normalised, batch 16);
   (b) app: KnowledgeService.ingest_paths → wait_idle on a fresh database (PDF reader child
       process, chunking, embedding, one SQLite transaction).
   Prints pages/s and chunks/s of both and the throughput ratio (b)/(a); the target is ≥ 0.90.
2. Hybrid search over synthetic indexes of 10k and 100k chunks (text: random windows of the
   corpus; vectors: the topic mixture of tests/test_knowledge_vectors.py, whose neighbourhoods are
   a little harder for the index than real MiniLM embeddings'; the questions of
   tests/data/knowledge/questions.json as queries). Prints, interleaved query by query:
   - the vector side alone (50 nearest), the app's index beside an exact scan of the same vectors,
     the ratio of their times, and the share of the exact top 50 the index finds (recall@50) for
     vectors drawn like the data and for the questions (which are unrelated to these synthetic
     vectors: their 50 nearest are a near-tie, the worst case for any approximate index);
   - the full-text side alone (FTS5 BM25; the synthetic text repeats the corpus ~400 times at 100k,
     so even its rarest terms match hundreds of chunks);
   - p50/p95 of the retrieval (vector k-NN + FTS5 BM25 + fusion, the query vector given) and of the
     whole search (with embedding the query); the target is p95 ≤ 15 ms at 100k.
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

from app.database import Database  # noqa: E402
from app.knowledge.chunking import Chunk  # noqa: E402
from app.knowledge.embedder import Embedder  # noqa: E402
from app.knowledge.fts import text_search  # noqa: E402
from app.knowledge.loaders import Page  # noqa: E402
from app.knowledge.search import fused_search, hybrid_search  # noqa: E402
from app.knowledge.service import KnowledgeService  # noqa: E402
from app.knowledge.store import FileState, KnowledgeStore  # noqa: E402
from app.knowledge.vectors import Block, VectorIndex  # noqa: E402
from tests.test_knowledge_vectors import topic_mixture  # noqa: E402

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
    service = KnowledgeService(Database(folder / "bench.db"), embedder, kb_dir=None)
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


def build_index(store: KnowledgeStore, mixture: np.ndarray, rng: np.random.Generator) -> list[Block]:
    """A chunk of random corpus text for each vector, in documents of 1,000; returns the blocks."""
    text = corpus_text()
    size, per_doc = len(mixture), 1000
    blocks = []
    for doc in range(size // per_doc):
        doc_id = store.add(f"/synthetic/{size}/doc-{doc}.txt", name=f"doc-{doc}.txt", collection="default")
        starts = rng.integers(0, len(text) - 400, size=per_doc)
        chunks = [Chunk(i // 10 + 1, i, 0, 400, text[s : s + 400], 100) for i, s in enumerate(starts)]
        pages = [Page(n, "synthetic page") for n in range(1, per_doc // 10 + 1)]
        vectors = mixture[doc * per_doc : (doc + 1) * per_doc]
        state = FileState(f"{size}-{doc}", 0, 0.0)
        store.replace_content(doc_id, state, pages=pages, chunks=chunks, vectors=vectors, note=None)
        blocks.append((doc_id, np.array([c.id for c in store.chunks(doc_id)], dtype=np.int64), vectors))
    return blocks


def quantile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def percentiles(times: list[float]) -> str:
    return f"p50 {statistics.median(times) * 1000:6.1f} ms  p95 {quantile(times, 0.95) * 1000:6.1f} ms"


def bench_search(embedder: Embedder, sizes: list[int], queries: int) -> None:
    questions = [q["question"] for q in json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]]
    asked = [questions[i % len(questions)] for i in range(queries)]
    vectors = embedder.embed(asked)
    rng = np.random.default_rng(1828)
    print(f"2. hybrid search, {queries} queries (the question set, repeated), k=5")
    for size in sizes:
        with tempfile.TemporaryDirectory() as folder:
            store = KnowledgeStore(Database(Path(folder) / "bench.db"), model=embedder.name)
            started = time.perf_counter()
            mixture = topic_mixture(size + queries, rng)
            blocks = build_index(store, mixture[:size], rng)
            index = store.ensure_vectors()
            print(f"  {size:>7} chunks (built in {time.perf_counter() - started:5.1f} s)")
            exact = VectorIndex(approximate_from=sys.maxsize)
            exact.load(blocks)
            vector_side(index, exact, vectors, mixture[size:])
            del exact
            whole_search(store, embedder, asked, vectors)


def vector_side(index: VectorIndex, exact: VectorIndex, questions: np.ndarray, lookalikes: np.ndarray) -> None:
    """The app's index beside an exact scan of the same vectors, query by query: times and recall@50
    for the questions and for vectors drawn like the data (but not in it)."""
    times: dict[str, list[float]] = {"exact": [], "index": []}
    found: dict[str, list[float]] = {"data": [], "questions": []}
    for question, lookalike in zip(questions, lookalikes, strict=True):
        for kind, probe in (("questions", question), ("data", lookalike)):
            t0 = time.perf_counter()
            truth = {cid for cid, _ in exact.search(probe, limit=50)}
            t1 = time.perf_counter()
            got = {cid for cid, _ in index.search(probe, limit=50)}
            times["exact"].append(t1 - t0)
            times["index"].append(time.perf_counter() - t1)
            found[kind].append(len(truth & got) / max(len(truth), 1))
    ratio = [statistics.median(times["exact"]) / statistics.median(times["index"])]
    ratio.append(quantile(times["exact"], 0.95) / quantile(times["index"], 0.95))
    rerank = max(index.rerank_min, round(index.rerank_share * len(index)))
    how = f"signs, {rerank} re-ranked" if index.approximate else "exact below the threshold"
    print(f"    vector side, exact scan:            {percentiles(times['exact'])}")
    print(f"    vector side, the index:             {percentiles(times['index'])}  ({how})")
    print(f"      exact / index: p50 {ratio[0]:.1f}×, p95 {ratio[1]:.1f}×")
    data, asked = statistics.mean(found["data"]), statistics.mean(found["questions"])
    print(f"      recall@50 vs exact: {data:.3f} (vectors drawn like the data), {asked:.3f} (the questions)")


def whole_search(store: KnowledgeStore, embedder: Embedder, asked: list[str], vectors: np.ndarray) -> None:
    """The full-text side alone, the retrieval (query vector given) and the whole search, query by query."""
    pool = ThreadPoolExecutor(max_workers=2)  # as KnowledgeService does: full text beside the vectors
    fused_search(store, asked[0], vectors[0], vector_weight=1.0, k=5, scope=None, pool=pool)  # warm up
    times: dict[str, list[float]] = {"text": [], "retrieval": [], "whole": []}
    for query, vector in zip(asked, vectors, strict=True):
        weight = embedder.readable_share(query) ** 2
        t0 = time.perf_counter()
        text_search(store, query, limit=50, documents=None)
        t1 = time.perf_counter()
        fused_search(store, query, vector, vector_weight=weight, k=5, scope=None, pool=pool)
        t2 = time.perf_counter()
        hybrid_search(store, embedder, query, k=5, pool=pool)
        times["text"].append(t1 - t0)
        times["retrieval"].append(t2 - t1)
        times["whole"].append(time.perf_counter() - t2)
    pool.shutdown()
    print(f"    full-text side (FTS5 BM25):         {percentiles(times['text'])}")
    print(f"    retrieval (vector + FTS5 + fusion): {percentiles(times['retrieval'])}")
    print(f"    with embedding the query:           {percentiles(times['whole'])}")


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
