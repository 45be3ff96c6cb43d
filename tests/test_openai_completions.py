"""The rest of the OpenAI API that agents and editors use, with the official `openai` client on the demo
model: plain text completions (streamed too), log-probabilities, usage in the last streamed chunk, and
the words of an answer under `tool_choice: auto` streamed as they come."""

from __future__ import annotations

import math
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

from app.api.tools import Words
from tests.harness import API_KEY, Appliance

# The chat template of the demo model (Gemma 3) written out by hand: sent to /v1/completions, it must
# give the same tokens (BOS added, special tokens read as such) and so the same answer as chat does.
GEMMA_TURN = "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"
WEATHER: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def api(appliance: Appliance) -> openai.OpenAI:
    return openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def model(api: openai.OpenAI) -> str:
    return api.models.list().data[0].id


def twice(create: Any, **body: Any) -> Any:
    """The answer to a request sent a second time: both then read their prompt from the KV cache the same
    way (a prompt computed afresh can differ in the last bits from one reused, enough to change a tie)."""
    create(**body)
    return create(**body)


def test_a_completion_reads_the_prompt_as_written(api: openai.OpenAI) -> None:
    ask = "Name three colours."
    raw = api.completions.create(model=model(api), prompt=GEMMA_TURN.format(ask), max_tokens=20, temperature=0)
    chat = api.chat.completions.create(
        model=model(api), messages=[{"role": "user", "content": ask}], max_tokens=20, temperature=0
    )
    choice = raw.choices[0]
    assert raw.object == "text_completion" and raw.id.startswith("cmpl-") and choice.text
    assert raw.usage is not None and chat.usage is not None and raw.usage.completion_tokens <= 20
    assert raw.usage.prompt_tokens == chat.usage.prompt_tokens  # no template added around it
    # the same tokens: chat found the completion's prompt in the slot's KV (all but the one token fed again)
    assert chat.usage.prompt_tokens_details is not None
    assert chat.usage.prompt_tokens_details.cached_tokens == chat.usage.prompt_tokens - 1
    plain = api.completions.create(model=model(api), prompt=["The capital of France is"], max_tokens=6, temperature=0)
    assert plain.usage is not None and plain.usage.prompt_tokens < 10  # the bare text: no turn markers
    assert plain.usage.completion_tokens == 6 and plain.choices[0].finish_reason == "length"


def test_a_streamed_completion_is_the_same_text_in_pieces_with_usage_last(api: openai.OpenAI) -> None:
    prompt = "Once upon a time, in a small village,"
    whole = twice(api.completions.create, model=model(api), prompt=prompt, max_tokens=24, temperature=0)
    stream = api.completions.create(
        model=model(api),
        prompt=prompt,
        max_tokens=24,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert len(pieces) > 3 and "".join(pieces) == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None and last.usage.completion_tokens == 24
    assert all(c.usage is None for c in chunks[:-1])
    echoed = api.completions.create(model=model(api), prompt=prompt, max_tokens=24, temperature=0, echo=True)
    assert echoed.choices[0].text == prompt + whole.choices[0].text


def test_stop_ends_a_completion(api: openai.OpenAI) -> None:
    prompt = "Here is a list of fruits: apple, banana,"
    free = twice(api.completions.create, model=model(api), prompt=prompt, max_tokens=30, temperature=0).choices[0].text
    cut = next((w.strip(",.") for w in free.split()[1:] if len(w.strip(",.")) > 3), None)
    assert cut, free
    stopped = api.completions.create(model=model(api), prompt=prompt, max_tokens=30, temperature=0, stop=[cut])
    assert cut not in stopped.choices[0].text and free.startswith(stopped.choices[0].text)
    assert stopped.choices[0].finish_reason == "stop"


def test_chat_logprobs_are_the_models_own_streamed_or_not(api: openai.OpenAI) -> None:
    ask: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Write one sentence about rain."}]
    reply = twice(
        api.chat.completions.create,
        model=model(api),
        messages=ask,
        max_tokens=16,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
    )
    choice = reply.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content and reply.usage is not None
    entries = choice.logprobs.content
    assert len(entries) == reply.usage.completion_tokens  # one per token of the answer
    assert b"".join(bytes(e.bytes or []) for e in entries).decode() == choice.message.content
    for entry in entries:
        tops = entry.top_logprobs
        assert len(tops) == 3 and entry.logprob <= 0
        assert [t.logprob for t in tops] == sorted((t.logprob for t in tops), reverse=True)
        assert sum(math.exp(t.logprob) for t in tops) <= 1.0 + 1e-6
        assert tops[0].token == entry.token and tops[0].logprob == pytest.approx(entry.logprob)  # temperature 0
    stream = api.chat.completions.create(
        model=model(api), messages=ask, max_tokens=16, temperature=0, logprobs=True, top_logprobs=3, stream=True
    )
    streamed = [e for c in stream for ch in c.choices if ch.logprobs for e in ch.logprobs.content or []]
    assert [e.token for e in streamed] == [e.token for e in entries]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in entries], abs=1e-3)
    plain = api.chat.completions.create(model=model(api), messages=ask, max_tokens=4, temperature=0)
    assert plain.choices[0].logprobs is None


def test_completion_logprobs_in_the_legacy_shape(api: openai.OpenAI) -> None:
    reply = api.completions.create(model=model(api), prompt="One, two, three,", max_tokens=5, temperature=0, logprobs=2)
    lp = reply.choices[0].logprobs
    assert lp is not None and lp.tokens and len(lp.tokens) == 5
    assert "".join(lp.tokens) == reply.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(5)]
    assert lp.token_logprobs and all(v <= 0 for v in lp.token_logprobs)
    assert lp.top_logprobs and all(len(top) == 2 for top in lp.top_logprobs)


def test_a_streamed_answer_in_words_under_auto_arrives_in_pieces(api: openai.OpenAI) -> None:
    ask: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Write a short poem about the sea."}]
    whole = twice(
        api.chat.completions.create, model=model(api), messages=ask, tools=[WEATHER], max_tokens=48, temperature=0
    )
    assert whole.choices[0].message.tool_calls is None and whole.choices[0].message.content  # words, at temp 0
    stream = api.chat.completions.create(
        model=model(api), messages=ask, tools=[WEATHER], max_tokens=48, temperature=0, stream=True
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 3  # not one piece at the end
    assert "".join(pieces) == whole.choices[0].message.content
    assert not pieces[0].lstrip().startswith("{")  # the words, not the JSON around them


def test_what_the_completions_api_cannot_honour_is_refused_by_name(api: openai.OpenAI) -> None:
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"prompt": ["one", "two"]}, "prompt"),
        ({"prompt": "x", "suffix": "y"}, "suffix"),
        ({"prompt": "x", "n": 2}, "n"),
        ({"prompt": "x", "best_of": 3}, "best_of"),
        ({"prompt": "x", "logit_bias": {"1": 3}}, "logit_bias"),
        ({"prompt": "x", "echo": True, "logprobs": 1}, "echo"),
    ]
    for body, param in refusals:
        with pytest.raises(openai.BadRequestError) as caught:
            api.completions.create(model=model(api), max_tokens=2, **body)
        assert caught.value.body["param"] == param, body  # type: ignore[index]
    ask: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hi"}]
    with pytest.raises(openai.BadRequestError) as caught:
        api.chat.completions.create(model=model(api), messages=ask, top_logprobs=2, max_tokens=2)
    assert caught.value.body["param"] == "top_logprobs"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as caught:
        api.chat.completions.create(model=model(api), messages=ask, tools=[WEATHER], logprobs=True, max_tokens=2)
    assert caught.value.body["param"] == "logprobs"  # type: ignore[index]


def test_words_are_decoded_from_the_json_string_as_it_arrives() -> None:
    answer = '{"content": "Caf\\u00e9 \\"Bleu\\"\\n\\ud83d\\ude00 ok"}'
    words = Words()
    pieces = [words.feed(ch) for ch in answer]
    assert "".join(pieces) == 'Café "Bleu"\n😀 ok' and words.speaking
    calls = Words()
    assert "".join(calls.feed(ch) for ch in '{"tool_calls": [{"name": "a", "arguments": {}}]}') == ""
    assert calls.speaking is False
