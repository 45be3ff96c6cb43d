"""The shared definitions: which characters are Chinese, where sentences end, and the one way a file
too large for the knowledge base is refused (upload and indexing alike)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from app.knowledge.loaders import LoadError, load
from app.knowledge.script import SENTENCE_END, has_cjk, is_cjk
from app.knowledge.uploads import UploadError, save_upload


def test_cjk_is_the_han_ideographs() -> None:
    assert all(is_cjk(ch) for ch in "中文㐀龥豈")  # unified, extension A, compatibility
    assert not any(is_cjk(ch) for ch in "aZ9。，ーかカ한䷀")  # punctuation, kana, hangul, Yijing symbols
    assert has_cjk("Q4_K_M 是什么?") and not has_cjk("Q4_K_M, llama.cpp")


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Card 2 ran hot. Then it cooled!", ["Card 2 ran hot.", " Then it cooled!"]),
        ("Version 3.5 of e.g.x is out", ["Version 3.5 of e.g.x is out"]),
        ("显卡很热。然后冷却了！好", ["显卡很热。", "然后冷却了！", "好"]),
        ('He said "stop." Then?! Wait… ok', ['He said "stop."', " Then?!", " Wait…", " ok"]),
        ("「好的。」下一句；最后", ["「好的。」", "下一句；", "最后"]),
    ],
)
def test_sentences_end_where_chunking_and_pagination_cut(text: str, sentences: list[str]) -> None:
    cuts = [0, *(m.end() for m in SENTENCE_END.finditer(text))]
    if cuts[-1] != len(text):
        cuts.append(len(text))
    assert [text[a:b] for a, b in itertools.pairwise(cuts)] == sentences


def test_a_file_too_large_is_refused_in_the_same_words_on_upload_and_indexing(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * 2_000)  # 10,000 bytes
    with pytest.raises(UploadError) as from_bytes:
        save_upload(tmp_path / "kb", "big.txt", big.read_bytes(), max_bytes=5_000)
    with pytest.raises(UploadError) as from_file:
        save_upload(tmp_path / "kb", "big.txt", big, max_bytes=5_000)
    with pytest.raises(LoadError) as indexing:
        load(big, max_bytes=5_000)
    said = "big.txt (10,000 bytes) is larger than 5,000 bytes, the limit for one file"
    assert str(from_bytes.value).startswith(said) and str(indexing.value).startswith(said)
    assert indexing.value.kind == "too_large" and "setting knowledge.max_file_mb" in indexing.value.message
    # a streamed upload stops at the first block over the limit, before its whole size is known
    assert str(from_file.value).startswith("big.txt is larger than 5,000 bytes, the limit for one file")
    assert all(str(e.value).endswith("It was not saved.") for e in (from_bytes, from_file))
    assert not list((tmp_path / "kb").iterdir()), "nothing was left behind"
