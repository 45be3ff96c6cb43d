"""Speculative decoding from the answer's own context (prompt lookup): plain token lists, no model.

An answer that quotes its sources — a grounded reply, an extraction copying a value from its document, an
agent re-writing a file — repeats runs of tokens that stand earlier in its prompt or in what it wrote. When
the last `ngram` tokens stood somewhere before, the tokens that followed them there are a draft: the step
feeds them after the answer's next token, and one llama_decode gives the logits at every drafted position.
The answer then samples position by position, as it would have one step at a time, and keeps each drafted
token its sampler picks; the first it does not pick ends the draft (that sampled token is the answer's next
one). Each kept token cost a fraction of a step. What is emitted is exactly what the sampler picks, in the
same order, with the same random draws (the draft is a fixed function of the context, so comparing a
sample with it keeps the distribution: llama-server's `ngram-simple` and vLLM's `ngram` do the same).

`Ngrams` indexes the context as it grows; `Pace` sizes the next draft from how the last ones fared (a
draft the model keeps rejecting costs a wider step and gains nothing); `accepted` walks a verified draft.
The batcher (batcher.py) owns the llama.cpp side: the batch, the logits, the KV cells of rejected drafts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DraftConfig:
    """How drafts are made: the n-gram that must match, and the longest draft (0: no speculation)."""

    ngram: int = 4
    max_tokens: int = 16
    min_tokens: int = 2  # a shorter draft is not worth the wider step

    @property
    def on(self) -> bool:
        return self.max_tokens > 0


class Ngrams:
    """Where each `n`-token run of an answer's context last stood with a known next token.

    `tokens` is the prompt, then every token the answer has taken. The latest earlier occurrence of the
    last `n` tokens is where a draft is copied from (the most recent is usually the one being quoted)."""

    def __init__(self, tokens: Sequence[int], *, n: int) -> None:
        self.n = max(1, n)
        self.tokens: list[int] = []
        self._last: dict[tuple[int, ...], int] = {}  # n-gram → index just after its latest indexed occurrence
        self.extend(tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            self.tokens.append(token)
            end = len(self.tokens) - 1  # the n-gram ending before this token now has a known continuation
            if end >= self.n:
                self._last[tuple(self.tokens[end - self.n : end])] = end

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens that followed the latest earlier occurrence of the last n tokens ([] if none)."""
        if limit <= 0 or len(self.tokens) < self.n:
            return []
        start = self._last.get(tuple(self.tokens[-self.n :]))
        if start is None:
            return []
        return self.tokens[start : min(start + limit, len(self.tokens))]


class Pace:
    """The next draft's length: the longest after a draft kept whole, about what was kept after one cut short
    (and at least `min_tokens`: a draft of one token saves little and widens the step)."""

    def __init__(self, config: DraftConfig) -> None:
        self.config = config
        self.length = config.max_tokens

    def next(self) -> int:
        return self.length if self.length >= self.config.min_tokens else 0

    def after(self, drafted: int, kept: int) -> None:
        if drafted == 0:
            return
        if kept == drafted:
            self.length = min(self.config.max_tokens, max(self.length * 2, self.config.min_tokens))
        else:
            self.length = max(self.config.min_tokens, kept + 1)


def accepted(draft: Sequence[int], sample: Callable[[int], int | None]) -> tuple[list[int], int]:
    """Sample position by position over a verified draft: (the tokens taken, how many drafted ones were kept).

    `sample(i)` is the token the answer takes from the logits after draft position i (position 0: after its
    next token), or None when the answer ended there. The walk stops at the first sampled token that differs
    from the draft, after the bonus token past a whole draft, or when the answer ends."""
    taken: list[int] = []
    for i in range(len(draft) + 1):
        token = sample(i)
        if token is None:
            break
        taken.append(token)
        if i == len(draft) or token != draft[i]:
            break
    kept = sum(1 for a, b in zip(taken, draft, strict=False) if a == b)
    return taken, min(kept, len(taken))
