"""What OpenAI's clients expect of any server, at their defaults: a `model` this appliance does not serve
is 404 `model_not_found` (its id, the loaded model's name and its catalog entry are aliases), answers carry
a `system_fingerprint`, and `tool_choice` asking for a call without tools is a 400 naming it."""

from __future__ import annotations

import math
from typing import Any

import httpx
import openai
import pytest

from app.api.token_ids import cl100k
from tests.engine_host import vocab_only
from tests.harness import API_KEY, Appliance

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
SAY: Any = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def api(appliance: Appliance) -> openai.OpenAI:
    return openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/chat/completions", {"messages": SAY, "max_tokens": 2}),
        ("/completions", {"prompt": "Hi", "max_tokens": 2}),
        ("/responses", {"input": "Hi", "max_output_tokens": 2}),
        ("/embeddings", {"input": "Hi"}),
    ],
)
def test_a_model_this_appliance_does_not_serve_is_404_model_not_found(
    appliance: Appliance, route: str, body: dict[str, Any]
) -> None:
    response = httpx.post(f"{appliance.url}/v1{route}", json=body | {"model": "gpt-4o"}, headers=HEADERS, timeout=30)
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("model_not_found", "model") and "gpt-4o" in error["message"]


@pytest.mark.parametrize("name", ["gemma-3-270m-demo", "demo", "Gemma 3 270M (demo)"])
def test_the_served_id_the_models_name_and_its_catalog_id_are_aliases(api: openai.OpenAI, name: str) -> None:
    reply = api.chat.completions.create(model=name, messages=SAY, max_tokens=2)
    assert reply.model == "gemma-3-270m-demo" and reply.choices[0].message.content is not None
    assert api.models.retrieve(name).id == "gemma-3-270m-demo"


def test_answers_carry_a_system_fingerprint_that_stays_for_the_model(api: openai.OpenAI) -> None:
    chat = api.chat.completions.create(model="demo", messages=SAY, max_tokens=2)
    completion = api.completions.create(model="demo", prompt="Hi", max_tokens=2)
    chunks = list(api.chat.completions.create(model="demo", messages=SAY, max_tokens=2, stream=True))
    assert chat.system_fingerprint and chat.system_fingerprint.startswith("fp_")
    assert completion.system_fingerprint == chat.system_fingerprint
    assert {chunk.system_fingerprint for chunk in chunks} == {chat.system_fingerprint}


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_tool_choice_asking_for_a_call_without_tools_is_refused(api: openai.OpenAI, choice: Any) -> None:
    with pytest.raises(openai.BadRequestError, match="no tools") as caught:
        api.chat.completions.create(model="demo", messages=SAY, tool_choice=choice, max_tokens=2)
    assert caught.value.body["param"] == "tool_choice"  # type: ignore[index]


def test_an_explicit_null_for_any_optional_field_means_not_given(appliance: Appliance) -> None:
    nulls = dict.fromkeys(("stream", "logprobs", "n", "parallel_tool_calls", "temperature", "stop", "seed", "tools"))
    chat = httpx.post(
        f"{appliance.url}/v1/chat/completions",
        json={"model": "demo", "messages": SAY, "max_tokens": 2} | nulls | {"tool_choice": None},
        headers=HEADERS,
        timeout=30,
    )
    assert chat.status_code == 200 and chat.json()["object"] == "chat.completion", chat.text
    completion = httpx.post(
        f"{appliance.url}/v1/completions",
        json={
            "model": "demo",
            "prompt": "Hi",
            "max_tokens": 2,
            "echo": None,
            "n": None,
            "stream": None,
            "logprobs": None,
        },
        headers=HEADERS,
        timeout=30,
    )
    assert completion.status_code == 200, completion.text
    embedding = httpx.post(
        f"{appliance.url}/v1/embeddings",
        json={"model": "all-minilm-l6-v2", "input": "Hi", "encoding_format": None, "dimensions": None, "user": None},
        headers=HEADERS,
        timeout=30,
    )
    assert embedding.status_code == 200 and len(embedding.json()["data"][0]["embedding"]) == 384, embedding.text


def test_embeddings_take_cl100k_token_ids_and_long_texts_and_refuse_a_text_above_the_bound_and_other_dimensions(
    api: openai.OpenAI,
) -> None:
    as_text = api.embeddings.create(model="all-minilm-l6-v2", input=["Hello world", "四张卡"]).data
    as_ids = api.embeddings.create(model="all-minilm-l6-v2", input=[[9906, 1917], cl100k().encode("四张卡")]).data
    flat = api.embeddings.create(model="all-minilm-l6-v2", input=[9906, 1917]).data  # one text as a flat list
    for text, ids in zip([*as_text, as_text[0]], [*as_ids, flat[0]], strict=True):
        assert _cosine(text.embedding, ids.embedding) > 0.9999, (text.embedding[:4], ids.embedding[:4])
    with pytest.raises(openai.BadRequestError, match="100256 is not in cl100k_base") as caught:
        api.embeddings.create(model="all-minilm-l6-v2", input=[[9906], [1917, 100256]])
    assert caught.value.body["param"] == "input" and "input[1]" in caught.value.body["message"]  # type: ignore[index]
    long = "The lighthouse keeper counted the ships that passed the rocks each night. " * 40  # ~600 word pieces
    windowed = api.embeddings.create(model="all-minilm-l6-v2", input=["short", long])  # windows, pooled
    assert len(windowed.data[1].embedding) == 384 and windowed.usage.prompt_tokens > 254
    long_ids = api.embeddings.create(model="all-minilm-l6-v2", input=[cl100k().encode(long)]).data  # as ids: the same
    assert _cosine(windowed.data[1].embedding, long_ids[0].embedding) > 0.9999
    too_long = "word " * 8193  # above the bound (tests/test_embeddings_long.py has the rest, in-process)
    with pytest.raises(openai.BadRequestError, match=r"at most 8192") as caught:
        api.embeddings.create(model="all-minilm-l6-v2", input=["short", too_long])
    assert caught.value.body["param"] == "input" and "input[1]" in caught.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="384") as caught:
        api.embeddings.create(model="all-minilm-l6-v2", input="Hi", dimensions=128)
    assert caught.value.body["param"] == "dimensions"  # type: ignore[index]
    assert len(api.embeddings.create(model="all-minilm-l6-v2", input="Hi", dimensions=384).data[0].embedding) == 384


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_a_completion_prompt_of_token_ids_is_read_as_those_tokens(api: openai.OpenAI) -> None:
    text = "The capital of France is"
    vocab = vocab_only()
    ids = vocab.tokenize(text.encode(), add_bos=True, special=True)
    as_text = api.completions.create(model="demo", prompt=text, max_tokens=4, temperature=0)
    for prompt in (ids, [ids]):
        as_ids = api.completions.create(model="demo", prompt=prompt, max_tokens=4, temperature=0)
        assert as_ids.choices[0].text == as_text.choices[0].text
        assert as_ids.usage is not None and as_text.usage is not None
        assert as_ids.usage.prompt_tokens == as_text.usage.prompt_tokens == len(ids)
    with pytest.raises(openai.BadRequestError, match="vocabulary"):
        api.completions.create(model="demo", prompt=[10**9], max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="one prompt per request") as caught:
        api.completions.create(model="demo", prompt=[ids, ids], max_tokens=2)
    assert caught.value.body["param"] == "prompt"  # type: ignore[index]
