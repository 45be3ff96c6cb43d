"""What one upstream answer has given, against what it may give.

An upstream is not trusted to stop: one that ignores `max_tokens`, or sends a whole book as one "token",
is cut here. An answer may pass `max_tokens` pieces of text (the upstream's chunks that carry text, or the
tokens its usage reports, whichever is more) and `TEXT_PER_TOKEN` characters per token it may generate;
at either bound it ends with finish "length" and its request is closed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from app.engine.events import FinishReason, Stats
from app.engine.upstream.stream import delta_text, finish_of

TEXT_PER_TOKEN = 32  # characters per token an answer may hold: a tokenizer's average is about 4 (English)
_FINISH: dict[str, FinishReason] = {"length": "length", "cancelled": "cancelled"}  # the rest end as "stop"


@dataclass
class Budget:
    max_tokens: int
    began: float = field(default_factory=time.monotonic)
    pieces: int = 0  # chunks that carried text
    chars: int = 0
    first: float | None = None  # when the first text came
    finish: str | None = None  # the upstream's finish_reason, or "length" where a bound ended the answer
    done: bool = False  # the stream's [DONE] came
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def max_chars(self) -> int:
        return self.max_tokens * TEXT_PER_TOKEN

    def take(self, chunk: dict[str, Any]) -> str:
        """The text of `chunk` that may pass: all of it, the part within the bound, or none (after a finish)."""
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        text = "" if self.finish else delta_text(chunk)[: self.max_chars - self.chars]
        if text:
            self.first = self.first or time.monotonic()
            self.pieces += 1
            self.chars += len(text)
        self.finish = self.finish or finish_of(chunk)
        if self.finish is None and self.full():
            self.finish = "length"
        return text

    def full(self) -> bool:
        return self.tokens() >= self.max_tokens or self.chars >= self.max_chars

    def complete(self) -> bool:
        """The upstream ended the answer (a finish_reason, or [DONE]), or a bound did."""
        return self.finish is not None or self.done

    def tokens(self) -> int:
        reported = self.usage.get("completion_tokens")
        return max(self.pieces, reported if isinstance(reported, int) else 0)

    def stats(self, prompt_tokens: int, finish: str | None = None) -> Stats:
        now = time.monotonic()
        first = self.first or now
        ttft = first - self.began
        generated = self.tokens()
        details = self.usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else 0
        prompt = self.usage.get("prompt_tokens")
        prompt = prompt if isinstance(prompt, int) and prompt > 0 else prompt_tokens
        decode_s = now - first
        return Stats(
            prompt_tokens=prompt,
            cached_tokens=cached if isinstance(cached, int) else 0,
            generated_tokens=generated,
            ttft_s=ttft,
            prompt_tps=prompt / ttft if ttft > 0 else 0.0,
            decode_tps=(generated - 1) / decode_s if decode_s > 0 and generated > 1 else 0.0,
            total_s=now - self.began,
            finish_reason=_FINISH.get(finish or self.finish or "stop", "stop"),
        )
