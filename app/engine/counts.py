"""Exact token counts asked of the engine across threads (and, in the worker, across the pipe): the
counts come from the loaded model's tokenizer, between two batching steps."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from app.engine.events import EngineError, GenerationRequest

Countable = GenerationRequest | str  # a request (its prompt as the model reads it) or a piece of text
MIN_ROOM = 8  # tokens an answer needs at least after its prompt


def overflow(prompt_tokens: int, n_ctx: int) -> EngineError:
    """A prompt that leaves no room for an answer in the model's context, in the words every backend uses."""
    return EngineError(
        f"the conversation is {prompt_tokens} tokens long and the model's context holds "
        f"{n_ctx}; start a new chat or shorten the message",
        kind="context",
    )


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
