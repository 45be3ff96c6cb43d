"""The Engine in this process, on the demo model split across two real card agents."""

from __future__ import annotations

import threading
import time

import pytest

from app.engine.engine_config import EngineConfig
from app.engine.events import Done, EngineError, GenerationRequest, Message, Token
from app.settings import DEMO_MODEL
from launcher.cluster import CardProcesses
from tests.engine_host import EngineHost, run
from tests.harness import get_json


@pytest.fixture(scope="module")
def engine(engine_host: EngineHost) -> object:
    return engine_host.engine(n_ctx=2048)


def ask(text: str, **options: object) -> GenerationRequest:
    return GenerationRequest(messages=(Message("user", text),), temperature=0.0, **options)  # type: ignore[arg-type]


def test_every_layer_is_on_a_card(engine: object, engine_cards: CardProcesses) -> None:
    info = engine.info  # type: ignore[attr-defined]
    placed = sorted(layer for card in info.cards for layer in card.layers)
    assert info.n_layers == 18
    assert placed == list(range(info.n_layers + 1))  # the repeating layers and the output layer
    assert info.host_layers == ()
    for card in info.cards:
        assert card.layers, f"{card.endpoint} holds no layers"
        assert card.buffer_bytes > 1_000_000
        health = get_json(engine_cards.settings.health_url(card.endpoint))
        # The card process really holds the weights llama says it sent there.
        assert health["mem_used_bytes"] > card.buffer_bytes


def test_streams_tokens_with_stats(engine: object) -> None:
    text, done = run(engine, ask("Name three colours.", max_tokens=24))
    stats = done.stats
    assert text.strip()
    assert 1 <= stats.generated_tokens <= 24
    assert stats.prompt_tokens > 5
    assert stats.ttft_s > 0 and stats.decode_tps > 0 and stats.prompt_tps > 0
    assert stats.finish_reason in ("stop", "length")


def test_max_tokens_bounds_the_answer(engine: object) -> None:
    _, done = run(engine, ask("Count from one to one hundred in words.", max_tokens=5))
    assert done.stats.generated_tokens <= 5


def test_chinese_streams_whole_characters(engine: object) -> None:
    text, done = run(engine, ask("请用中文介绍一下你自己。", max_tokens=48))
    assert done.stats.generated_tokens > 0
    assert "\ufffd" not in text


def test_context_overflow_is_a_clear_error(engine: object) -> None:
    with pytest.raises(EngineError, match=r"context holds 2048"):
        run(engine, ask("word " * 3000))


def test_cancel_during_prompt_processing_frees_the_engine_fast(engine: object) -> None:
    # one step of prompt alone: with nothing streaming beside it a prompt is read n_batch (512) tokens a step
    _, step = run(engine, ask("The quick brown fox jumps over the lazy dog. " * 45, max_tokens=1))  # ~510 tokens
    assert step.stats.cached_tokens == 0
    flag = threading.Event()
    request = ask("The quick brown fox jumps over the lazy dog. " * 150, max_tokens=200)  # ~1,700 tokens
    timer = threading.Timer(0.15, flag.set)
    timer.start()
    started = time.monotonic()
    _, done = run(engine, request, cancelled=flag.is_set)
    freed = time.monotonic() - started - 0.15
    assert done.stats.finish_reason == "cancelled"
    assert done.stats.generated_tokens == 0  # it stopped while still reading the prompt
    # at most the rest of one such step (1.3 s here, quiet), against ~4.5 s for the whole prompt (with an answer
    # streaming beside it, prompt_chunk tokens a step: test_engine_service)
    assert freed < 1.5 * step.stats.total_s + 0.2, (freed, step.stats.total_s)
    _, after = run(engine, ask("Hello", max_tokens=4))  # and the engine still works
    assert after.stats.generated_tokens > 0


def test_cancel_during_decoding(engine: object) -> None:
    seen: list[Token] = []

    def cancelled() -> bool:
        return len(seen) >= 3

    for event in engine.generate(ask("Tell a long story about the sea.", max_tokens=200), cancelled=cancelled):  # type: ignore[attr-defined]
        if isinstance(event, Token):
            seen.append(event)
        elif isinstance(event, Done):
            assert event.stats.finish_reason == "cancelled"
            assert event.stats.generated_tokens <= 4


def test_follow_up_reuses_the_cached_prefix(engine: object) -> None:
    first = ask("Remember the number seven.", max_tokens=8)
    text, _ = run(engine, first)
    follow = GenerationRequest(
        messages=(*first.messages, Message("assistant", text), Message("user", "What number?")),
        max_tokens=8,
        temperature=0.0,
    )
    _, done = run(engine, follow)
    assert done.stats.cached_tokens > 0


def test_tensor_split_mode_is_refused_before_llama_aborts(engine_cards: CardProcesses) -> None:
    from app.engine.llama.engine import Engine

    config = EngineConfig(
        model_path=DEMO_MODEL, model_name="demo", cards=tuple(engine_cards.endpoints), split_mode="tensor"
    )
    with pytest.raises(EngineError, match=r"not supported over RPC"):
        Engine(config)


def test_missing_model_file_is_named(engine_cards: CardProcesses, tmp_path: object) -> None:
    from pathlib import Path

    from app.engine.llama.engine import Engine

    missing = Path(str(tmp_path)) / "absent.gguf"
    engine = Engine(EngineConfig(model_path=missing, model_name="x", cards=tuple(engine_cards.endpoints)))
    with pytest.raises(EngineError, match=r"absent\.gguf does not exist"):
        engine.load()


def test_a_card_that_does_not_answer_is_named_before_ggml_aborts(engine_cards: CardProcesses) -> None:
    from app.engine.cards import check_cards

    with pytest.raises(EngineError, match=r"card 1 \(127\.0\.0\.1:1\) does not answer: connection refused"):
        check_cards([engine_cards.endpoints[0], "127.0.0.1:1"])


def test_json_schema_constrains_the_answer(engine: object) -> None:
    import json

    import jsonschema

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "cards": {"type": "integer"}},
        "required": ["name", "cards"],
        "additionalProperties": False,
    }
    text, done = run(engine, ask("Describe the appliance as JSON.", max_tokens=96, json_schema=json.dumps(schema)))
    assert done.stats.finish_reason == "stop"
    jsonschema.validate(json.loads(text), schema)


def test_an_unusable_schema_is_refused_plainly(engine: object) -> None:
    with pytest.raises(EngineError, match="JSON schema cannot be used"):
        run(engine, ask("x", max_tokens=4, json_schema='{"type": "no-such-type"}'))


def test_llama_logs_after_load_reach_a_live_callback(engine: object) -> None:
    """llama.cpp keeps calling the log callback set during load (warnings, freeing a context): it must
    outlive the load, or llama calls freed memory (this crashed the suite at teardown)."""
    import gc

    import llama_cpp

    from app.engine.llama import engine as engine_module

    gc.collect()
    before = len(engine_module._CAPTURE.lines)
    params = llama_cpp.llama_model_default_params()
    assert not llama_cpp.llama_model_load_from_file(b"/nonexistent/quartet.gguf", params)
    logged = "".join(engine_module._CAPTURE.lines[before:])
    assert "quartet.gguf" in logged


def test_checking_the_picked_token_gives_the_same_json_as_the_grammar_over_every_token(engine: object) -> None:
    import json

    schema = {
        "type": "object",
        "properties": {"colour": {"type": "string", "maxLength": 12}, "count": {"type": "integer"}},
        "required": ["colour", "count"],
    }
    request = ask("Describe one colour and a count as JSON.", max_tokens=64, json_schema=json.dumps(schema))
    texts = {}
    for check in (True, False):
        engine.check_picked_token = check  # type: ignore[attr-defined]
        texts[check], done = run(engine, request)
        assert done.stats.finish_reason == "stop"
    engine.check_picked_token = True  # type: ignore[attr-defined]
    assert texts[True] == texts[False]  # temperature 0: the same tokens, picked the cheap way
    json.loads(texts[True])
    refused = engine.last_refused  # type: ignore[attr-defined]
    assert refused > 0, "the free pick was never refused: the grammar check was not exercised"
