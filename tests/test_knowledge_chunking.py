"""Chunking with MiniLM's own tokenizer: exact page slices that fit the model, fast on long texts."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.knowledge.chunking import Chunk, chunk_pages
from app.knowledge.embedder import Embedder
from app.knowledge.loaders import Page
from app.knowledge.loaders.text import paginate
from tests.documents import all_chinese, chinese_prose


@pytest.fixture(scope="module")
def embedder() -> Iterator[Embedder]:
    yield Embedder.packaged()


def check_invariants(pages: list[Page], chunks: list[Chunk], embedder: Embedder, target: int) -> None:
    texts = {p.number: p.text for p in pages}
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert texts[chunk.page][chunk.start : chunk.end] == chunk.text, "a chunk is not a slice of its page"
        assert chunk.text == chunk.text.strip() and chunk.text
    real = embedder.count_tokens([c.text for c in chunks])
    assert max(real) <= target, "a chunk is larger than the target"
    assert max(real) <= embedder.max_tokens
    for page in pages:  # every word of every page is in some chunk
        covered = [False] * len(page.text)
        for chunk in (c for c in chunks if c.page == page.number):
            covered[chunk.start : chunk.end] = [True] * (chunk.end - chunk.start)
        missing = [ch for ch, hit in zip(page.text, covered, strict=True) if not hit and not ch.isspace()]
        assert not missing, f"page {page.number} lost {''.join(missing)[:40]!r}"


def test_chinese_article_chunks_fit_and_end_at_sentences(embedder: Embedder) -> None:
    check_chinese_chunks(paginate(chinese_prose(), page_chars=1500), embedder)


def test_a_real_chinese_article_chunks_fit_and_end_at_sentences(embedder: Embedder, corpus: Path) -> None:
    text = (corpus / "zh" / "rk1828-llamacpp-rpc.txt").read_text(encoding="utf-8")
    check_chinese_chunks(paginate(text, page_chars=3000), embedder)


def check_chinese_chunks(pages: list[Page], embedder: Embedder) -> None:
    chunks = chunk_pages(pages, embedder, target_tokens=200, overlap_tokens=30)
    check_invariants(pages, chunks, embedder, 200)
    ends = sum(c.text[-1] in "。！？；.!?;”" for c in chunks)
    assert ends / len(chunks) > 0.8, "chunks should end at sentence ends"
    overlapping = sum(1 for a, b in itertools.pairwise(chunks) if a.page == b.page and b.start < a.end)
    assert overlapping / len(chunks) > 0.5, "neighbouring chunks should share a sentence"


def test_headings_start_chunks(embedder: Embedder) -> None:
    sentence = "The card agent serves one host and reports its temperature every second. "
    text = "\n\n".join(f"## Section {n}\n\n" + sentence * 6 for n in range(1, 6))
    pages = [Page(1, text)]
    chunks = chunk_pages(pages, embedder, target_tokens=120, overlap_tokens=15)
    check_invariants(pages, chunks, embedder, 120)
    starts = [c.text for c in chunks if c.text.startswith("## Section")]
    assert len(starts) == 5, "every section should start a chunk"
    assert not any(c.text.endswith(tuple(f"## Section {n}" for n in range(1, 6))) for c in chunks)


def test_a_sentence_longer_than_a_chunk_is_windowed(embedder: Embedder) -> None:
    words = " ".join(f"token{n}" for n in range(600))
    pages = [Page(1, "Short intro. " + words + " End."), Page(2, "Second page.")]
    chunks = chunk_pages(pages, embedder, target_tokens=100, overlap_tokens=20)
    check_invariants(pages, chunks, embedder, 100)
    assert {c.page for c in chunks} == {1, 2} and chunks[-1].text == "Second page."
    long_parts = [c for c in chunks if "token" in c.text]
    assert all(b.start < a.end for a, b in itertools.pairwise(long_parts)), "windows overlap"


def test_chunking_a_long_mixed_text_covers_it_all(embedder: Embedder) -> None:
    base = all_chinese()
    english = "The four cards split the layers; each token passes card 0, 1, 2 and 3 in turn. " * 40
    pages = paginate((base + "\n\n" + english) * 16, page_chars=3000)
    chunks = chunk_pages(pages, embedder)  # its speed is measured by bench/knowledge.py, not here
    assert len(chunks) > 100
    assert {c.page for c in chunks} == {p.number for p in pages}
