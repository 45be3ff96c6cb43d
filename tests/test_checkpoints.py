"""Windowed sliding-window layers and their checkpoints (app/engine/llama/checkpoints.py, batcher.py) on the
demo model split across two real card agents.

The demo's window is 512 tokens; with one slot its window layers hold 512 + 512 cells (a step's worth of slack),
so a prompt cut back by less than about 512 tokens still finds its window. An agent re-sending its conversation
with a new last message of 700 tokens cuts back further: only the checkpoint at the last message's start lets it
keep the turns before; without one the prompt is read whole."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.engine.events import GenerationRequest, Message, Token
from app.engine.llama import checkpoints
from tests.engine_host import EngineHost
from tests.engine_host import run as answer
from tests.harness import COUNTED


def log(first: int, lines: int) -> str:
    return "\n".join(
        f"Card {n} of rack {n % 7} reads {40 + n % 30} degrees Celsius and serves {n * 3} tokens a second."
        for n in range(first, first + lines)
    )


@pytest.fixture(scope="module")
def engine(engine_host: EngineHost) -> Any:
    return engine_host.engine(n_ctx=2048, parallel=1)


def conversation(last_log: int, task: str, *, lines: int = 40, max_tokens: int = 16) -> GenerationRequest:
    """A conversation about one log whose last message brings another (40 lines: about 700 tokens) and a task."""
    messages = (
        Message("user", f"Keep this log in mind.\n\n{log(1, 36 * lines // 40)}"),
        Message("assistant", "I have read the log."),
        Message("user", f"{log(last_log, lines)}\n\nContinue: {task}"),
    )
    return GenerationRequest(messages=messages, temperature=0.0, max_tokens=max_tokens)


def first_token(engine: Any, request: GenerationRequest) -> dict[str, float]:
    """The likeliest first tokens of the answer and their log-probabilities."""
    for event in engine.generate(replace(request, max_tokens=1, logprobs=5), cancelled=lambda: False):
        if isinstance(event, Token):
            return {top[0]: top[1] for top in event.logprobs[0].top}
    raise AssertionError("no token")


def test_the_window_layers_are_windowed_with_checkpoints(engine: Any) -> None:
    assert engine.batcher.kv.ctx_checkpoints == 3 and engine.batcher.kv.host.n_swa == 512


def test_a_new_last_message_keeps_everything_before_it(engine: Any) -> None:
    first, second = conversation(100, COUNTED[0]), conversation(200, COUNTED[2])
    engine.batcher.forget()
    _, done = answer(engine, first)
    slot = engine.batcher.slots[0]
    marks = [c.n_tokens for c in slot.checkpoints]
    assert len(marks) == 2 and marks[1] == done.stats.prompt_tokens, marks  # the last message, the end
    last_message = marks[0]
    assert done.stats.prompt_tokens - last_message > 600, (done.stats, marks)  # a long last message
    assert engine.batcher.kv.host.pos_min(slot.seq) > last_message - 512  # its window is gone from the cells
    _, resent = answer(engine, second)
    assert resent.stats.cached_tokens == last_message, (resent.stats, marks)  # the turns before it, kept


def test_the_window_written_back_gives_the_models_own_distribution(engine: Any) -> None:
    """The demo model is unsure on this prompt (its two likeliest first tokens within 0.1), so the text is no
    test; the distribution is. Read afresh, after a checkpoint was written back, and with the window left short
    (the checkpoint's write skipped): the first two agree within the rounding of other batch shapes and cell
    placements (0.24 to 0.30 seen; bound 0.5), the third is off by more than a whole nat (1.3 seen)."""
    first, second = conversation(100, COUNTED[2]), conversation(200, COUNTED[2])
    engine.batcher.forget()
    fresh = first_token(engine, second)
    engine.batcher.forget()
    answer(engine, first)
    restored = first_token(engine, second)
    engine.batcher.forget()
    answer(engine, first)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoints, "restore", lambda *_: True)
        short = first_token(engine, second)
    shared = fresh.keys() & restored.keys()
    assert len(shared) >= 3 and max(abs(fresh[t] - restored[t]) for t in shared) < 0.5, (fresh, restored)
    assert max(abs(fresh[t] - short.get(t, -99.0)) for t in list(fresh)[:2]) > 1.0, (fresh, short)


def test_an_answer_asked_again_keeps_all_but_its_last_token(engine: Any) -> None:
    """The same request again: the window still holds the 512 tokens before the prompt's end (the answer was
    short), so the slot keeps all of it but the token read for logits, no checkpoint needed."""
    request = conversation(100, COUNTED[1])
    engine.batcher.forget()
    answer(engine, request)
    _, again = answer(engine, request)
    assert again.stats.cached_tokens == again.stats.prompt_tokens - 1, again.stats


@pytest.mark.parametrize("kept", [3, 0])
def test_asked_again_after_a_long_answer_the_end_checkpoint_keeps_the_prompt(engine: Any, kept: int) -> None:
    """A 600-token answer moves the window past the prompt's end: asked again, the prompt is kept from the
    checkpoint taken at its end (with none, it is read whole)."""
    batcher = engine.batcher
    batcher.kv.ctx_checkpoints = kept
    try:
        batcher.forget()
        _, done = answer(engine, conversation(100, COUNTED[0], lines=10, max_tokens=600))
        assert done.stats.generated_tokens > 520, done.stats  # the demo model runs on: the window moved
        assert batcher.kv.host.pos_min(batcher.slots[0].seq) > done.stats.prompt_tokens - 512
        _, again = answer(engine, conversation(100, COUNTED[0], lines=10, max_tokens=1))
        assert again.stats.cached_tokens == (again.stats.prompt_tokens - 1 if kept else 0), again.stats
    finally:
        batcher.kv.ctx_checkpoints = 3


def test_the_mark_falls_at_the_last_messages_turn() -> None:
    """Gemma's prompt ends `<start_of_turn>user ... <end_of_turn> <start_of_turn>model`: the opener of the
    answer's turn (the last control token) stood before, at the last message's start."""
    start, end, user, model = 105, 106, 2364, 4368  # stand-ins: only which are control tokens matters
    prompt = [2, start, user, *range(500, 540), end, start, user, *range(600, 620), end, start, model, 10]
    opener = len(prompt) - 3
    last_message = max(i for i in range(opener) if prompt[i] == start)
    control = {start, end, 2}.__contains__
    assert checkpoints.marks(prompt, held=0, is_control=control) == [last_message]
    assert checkpoints.marks(prompt, held=last_message, is_control=control) == []  # held already
    assert checkpoints.marks(prompt[:3], held=0, is_control=control) == []  # one turn: no earlier opener
    assert checkpoints.marks(list(range(500, 540)), held=0, is_control=control) == []  # no turns


def test_without_checkpoints_such_a_prompt_is_read_whole(engine: Any) -> None:
    batcher = engine.batcher
    batcher.kv.ctx_checkpoints = 0
    try:
        batcher.forget()
        answer(engine, conversation(100, COUNTED[0]))
        assert batcher.slots[0].checkpoints == []
        _, resent = answer(engine, conversation(200, COUNTED[2]))
        assert resent.stats.cached_tokens == 0, resent.stats
    finally:
        batcher.kv.ctx_checkpoints = 3
