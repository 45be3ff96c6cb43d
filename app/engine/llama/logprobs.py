"""Log-probabilities of generated tokens, read from the logits an answer's step produced.

Only answers that ask for them pay for this: one pass over the vocabulary per token (a softmax, and a
partial sort for the alternatives: about 0.4 ms + 1 ms with Gemma's 262,144 tokens and a top 20, on the
shared 2-core test machine). They are the model's own distribution, before temperature, top_p or a
grammar narrow it (as llama-server reports them by default)."""

from __future__ import annotations

from typing import Any

import llama_cpp
import numpy as np

from app.engine.events import TokenLogprob

MAX_TOP = 20  # the most alternatives OpenAI's API allows (top_logprobs ≤ 20)


def distribution(llm: Any, index: int) -> np.ndarray:
    """The log-softmax of the logits at `index` of the last batch (a copy: sampling may reuse them)."""
    pointer = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, index)
    logits = np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).copy()  # float32 is enough
    peak = logits.max()
    return logits - (peak + np.log(np.exp(logits - peak).sum()))


def of(llm: Any, logprobs: np.ndarray, token: int, top: int) -> TokenLogprob:
    """The picked token's entry, with the `top` likeliest tokens of the same step."""
    top = max(0, min(top, MAX_TOP))
    best: list[int] = []
    if top:
        ids = np.argpartition(-logprobs, top)[:top]
        best = [int(i) for i in ids[np.argsort(-logprobs[ids])]]
    alternatives = []
    for i in best:
        text, raw = _piece(llm, i)
        alternatives.append((text, float(logprobs[i]), raw))
    text, raw = _piece(llm, token)
    return TokenLogprob(text, float(logprobs[token]), raw, tuple(alternatives))


def _piece(llm: Any, token: int) -> tuple[str, tuple[int, ...]]:
    raw = bytes(llm.detokenize([token], special=True))
    return raw.decode("utf-8", errors="replace"), tuple(raw)
