"""Exact token counts asked of the engine across threads (and, in the worker, across the pipe): the
counts come from the loaded model's tokenizer, between two batching steps."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from app.engine.events import EngineError, GenerationRequest

Countable = GenerationRequest | str  # a request (its prompt as the model reads it) or a piece of text
MIN_ROOM = 8  # tokens an answer needs at least after its prompt


MAX_TOKEN_BYTES = 128  # no token of a usual vocabulary covers more bytes of text (the demo model's longest: 32)


def overflow(prompt_tokens: int, n_ctx: int, *, at_least: bool = False) -> EngineError:
    """A prompt that leaves no room for an answer in the model's context, in the words every backend uses."""
    return EngineError(
        f"the conversation is {'at least ' if at_least else ''}{prompt_tokens} tokens long and the model's "
        f"context holds {n_ctx}; start a new chat or shorten the message",
        kind="context",
    )


def bounded(request: GenerationRequest, *, n_ctx: int, max_tokens_limit: int) -> GenerationRequest:
    """The request as the engine takes it (max_tokens within the limit), or refused at once when its text alone
    is longer than any prompt that fits — before anyone tokenises megabytes between two engine steps."""
    texts = [request.prompt] if request.prompt is not None else [m.content for m in request.messages]
    size = sum(len(text.encode("utf-8", "replace")) for text in [*texts, request.tools_text])
    if size // MAX_TOKEN_BYTES > n_ctx:
        raise overflow(size // MAX_TOKEN_BYTES, n_ctx, at_least=True)
    return replace(request, max_tokens=max(1, min(request.max_tokens, max_tokens_limit)))


class Call:
    """One token count asked across threads: its answer (counts, or the error to raise) once it comes."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: list[int] | EngineError = EngineError("no answer", kind="engine")

    def answer(self, value: list[int] | EngineError) -> None:
        self._value = value
        self._done.set()

    def result(self, timeout: float) -> list[int]:
        if not self._done.wait(timeout):
            raise EngineError(f"the engine did not count the tokens within {timeout:g} s", kind="timeout")
        if isinstance(self._value, EngineError):
            raise self._value
        return self._value


def counted(engine: Any, items: Sequence[Countable]) -> list[int] | EngineError:
    """The engine's exact counts, or the error (a chat template refusing the conversation) to raise."""
    try:
        return [engine.count_tokens(item) for item in items]
    except EngineError as err:
        return err
