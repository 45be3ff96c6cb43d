"""A prompt's tokens (app/engine/llama/prompt_tokens.py) on the demo model's vocabulary: a long text is refused
from a count in pieces before llama.cpp's tokenizer spends minutes on it, and a text that fits is read whole."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from app.engine.events import EngineError
from app.engine.llama.prompt_tokens import tokenize
from tests.engine_host import vocab_only

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def llm() -> Any:
    return vocab_only()


@pytest.mark.slow
def test_a_megabyte_of_short_lines_is_refused_in_seconds_not_minutes(llm: Any) -> None:
    text = ("hi hi hi\n\n" * 100_000).encode()  # whole, llama.cpp's tokenizer took 92 s over it here
    started = time.monotonic()
    with pytest.raises(EngineError, match=r"at least \d+ tokens long and the model's context holds 16384") as err:
        tokenize(llm, text, add_bos=False, n_ctx=16384)
    assert err.value.kind == "context"
    assert time.monotonic() - started < 10


def test_a_long_text_that_fits_is_tokenized_whole_and_exactly(llm: Any) -> None:
    text = (DOCS / "design.md").read_bytes()[:60_000]  # over the size that is counted in pieces first
    whole = llm.tokenize(text, add_bos=True, special=True)
    assert tokenize(llm, text, add_bos=True, n_ctx=len(whole)) == whole


def test_counted_in_pieces_a_text_is_refused_only_when_surely_too_long(llm: Any) -> None:
    """The pieces' count less the slack at each cut never refuses a text that fits: at exactly its own length
    the design doc (prose, tables, code, line breaks) and a Chinese article pass."""
    for text in (
        (DOCS / "design.md").read_bytes(),
        ("第一段。这是一篇很长的中文文章，讲述设备的四张卡。\n" * 2000).encode(),
    ):
        exact = len(llm.tokenize(text, add_bos=False, special=True))
        assert len(tokenize(llm, text, add_bos=False, n_ctx=exact)) == exact
