"""The OpenAI-compatible API, driven by the official `openai` client against the shared appliance."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest

from tests.harness import API_KEY, Appliance, api_client, metric


@pytest.fixture(scope="module")
def api(appliance: Appliance) -> openai.OpenAI:
    return openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def test_lists_the_loaded_model(api: openai.OpenAI) -> None:
    models = [m.id for m in api.models.list()]
    assert models == ["gemma-3-270m-demo"]


def test_non_streaming_chat(api: openai.OpenAI) -> None:
    reply = api.chat.completions.create(
        model="gemma-3-270m-demo", messages=[{"role": "user", "content": "Say hi."}], max_tokens=12, temperature=0
    )
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage is not None and 0 < reply.usage.completion_tokens <= 12
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_a_quoting_answer_reports_its_drafts_in_usage_and_metrics(api: openai.OpenAI, appliance: Appliance) -> None:
    """Speculative decoding (docs/design.md): the drafted tokens the model kept are reported as OpenAI's
    accepted prediction tokens (as vLLM reports its own), with Quartet's steps, and counted in /metrics."""
    before = metric(appliance, "quartet_engine_accepted_tokens_total")
    passage = "The cards throttle at 85 degrees Celsius and shut down at 95 degrees Celsius, whatever the load."
    reply = api.chat.completions.create(
        model="gemma-3-270m-demo",
        messages=[{"role": "user", "content": f"Repeat this passage exactly, word for word:\n\n{passage}"}],
        max_tokens=40,
        temperature=0,
    )
    usage = reply.usage
    assert usage is not None and usage.completion_tokens_details is not None
    accepted = usage.completion_tokens_details.accepted_prediction_tokens or 0
    extras = (usage.model_extra or {})["quartet"]
    assert accepted == extras["accepted_tokens"] > 0, usage
    assert extras["steps"] < usage.completion_tokens  # several tokens in some steps
    assert metric(appliance, "quartet_engine_accepted_tokens_total") >= before + accepted


def test_streaming_chat_arrives_in_pieces(api: openai.OpenAI) -> None:
    stream = api.chat.completions.create(
        model="gemma-3-270m-demo",
        messages=[{"role": "user", "content": "Count to five."}],
        max_tokens=24,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    assert len(pieces) > 3
    assert finish in ("stop", "length")
    assert usage is not None and usage.completion_tokens <= 24


def test_stop_sequences_end_the_answer(api: openai.OpenAI) -> None:
    free = (
        api.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "Write a short poem."}], max_tokens=40, temperature=0
        )
        .choices[0]
        .message.content
        or ""
    )
    cut = next((w for w in free.split()[2:] if len(w) > 2), None)
    assert cut, free
    stopped = api.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "Write a short poem."}],
        max_tokens=40,
        temperature=0,
        stop=[cut],
    ).choices[0]
    assert cut not in (stopped.message.content or "")
    assert stopped.finish_reason == "stop"


def test_json_schema_response_validates(api: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}, "population": {"type": "integer"}},
        "required": ["city", "population"],
        "additionalProperties": False,
    }
    reply = api.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "Give a city and its population as JSON."}],
        max_tokens=80,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}},
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), schema)


def test_a_wrong_key_is_refused_with_401(appliance: Appliance) -> None:
    bad = openai.OpenAI(base_url=appliance.url + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        bad.models.list()
    assert refused.value.status_code == 401


def test_a_prompt_longer_than_the_context_is_refused_with_400(api: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        api.chat.completions.create(model="demo", messages=[{"role": "user", "content": "word " * 20000}], max_tokens=8)
    assert refused.value.status_code == 400
    assert refused.value.code == "context_length_exceeded"
    assert "context holds 16384" in str(refused.value)


def test_a_streamed_prompt_too_long_also_gets_400(api: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        api.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "word " * 20000}], max_tokens=8, stream=True
        )


def test_malformed_requests_get_openai_shaped_400s(appliance: Appliance) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    for body in ({"model": "demo"}, {"model": "demo", "messages": []}, {"model": "demo", "messages": [{"role": "x"}]}):
        response = httpx.post(appliance.url + "/v1/chat/completions", json=body, headers=headers, timeout=30)
        assert response.status_code == 400, body
        assert response.json()["error"]["type"] == "invalid_request_error"
    bad_schema = {
        "model": "demo",
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}},
    }
    response = httpx.post(appliance.url + "/v1/chat/completions", json=bad_schema, headers=headers, timeout=30)
    assert response.status_code == 400 and "JSON schema" in response.json()["error"]["message"]


def test_an_unknown_route_or_a_wrong_method_answers_in_openais_shape_on_the_served_app(appliance: Appliance) -> None:
    """The page is mounted at / behind /v1: a path under /v1 that no route takes must not reach it."""
    headers = {"Authorization": f"Bearer {API_KEY}"}
    missing = httpx.get(appliance.url + "/v1/nope", headers=headers, timeout=30)
    assert missing.status_code == 404 and set(missing.json()) == {"error"}, missing.text
    error = missing.json()["error"]
    assert "/v1/nope" in error["message"] and error["type"] == "invalid_request_error", error
    wrong = httpx.get(appliance.url + "/v1/chat/completions", headers=headers, timeout=30)
    assert wrong.status_code == 405 and set(wrong.json()) == {"error"}, wrong.text
    assert wrong.headers["allow"] == "POST" and "GET is not allowed" in wrong.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError) as refused:  # as a client sees it
        openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0).get("/nope", cast_to=object)
    assert refused.value.status_code == 404 and "/v1/nope" in str(refused.value)


def test_a_streaming_client_that_disconnects_cancels_its_answer(appliance: Appliance) -> None:

    from tests.harness import wait_until

    headers = {"Authorization": f"Bearer {API_KEY}"}
    body = {
        "model": "demo",
        "messages": [{"role": "user", "content": "Tell a very long story."}],
        "max_tokens": 2000,
        "stream": True,
    }
    with httpx.stream("POST", appliance.url + "/v1/chat/completions", json=body, headers=headers, timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        got = [line for line, _ in zip(lines, range(6), strict=False) if line.startswith("data:")]
        assert got
    status = api_client(appliance.url)
    wait_until(lambda: not status.predict(api_name="/status")["queue"]["running"], timeout=3)
    last = status.predict(api_name="/status")["last_stats"]
    assert last["finish_reason"] == "cancelled" and last["generated_tokens"] < 2000


def test_a_non_streaming_client_that_goes_away_cancels_its_answer(appliance: Appliance) -> None:
    from tests.harness import wait_until

    headers = {"Authorization": f"Bearer {API_KEY}"}
    body = {"model": "demo", "messages": [{"role": "user", "content": "Tell a very long story."}], "max_tokens": 2000}
    status = api_client(appliance.url)
    with pytest.raises(httpx.ReadTimeout):  # the client gives up, as an SDK's timeout does
        httpx.post(
            appliance.url + "/v1/chat/completions", json=body, headers=headers, timeout=httpx.Timeout(30, read=2)
        )
    wait_until(lambda: not status.predict(api_name="/status")["queue"]["running"], timeout=3)
    last = status.predict(api_name="/status")["last_stats"]
    assert last["finish_reason"] == "cancelled" and last["generated_tokens"] < 2000, last
    assert metric(appliance, "quartet_engine_running_answers") == 0


def test_embeddings_come_from_the_knowledge_bases_embedder(api: openai.OpenAI) -> None:
    reply = api.embeddings.create(model="all-minilm-l6-v2", input=["four cards", "四张卡", "a lighthouse"])
    vectors = [item.embedding for item in reply.data]
    assert [item.index for item in reply.data] == [0, 1, 2]
    assert {len(v) for v in vectors} == {384}
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-3 for v in vectors)  # normalised
    assert reply.usage.prompt_tokens > 0
    single = api.embeddings.create(model="all-minilm-l6-v2", input="four cards").data[0].embedding
    assert max(abs(a - b) for a, b in zip(single, vectors[0], strict=True)) < 1e-4


def test_embeddings_too_large_for_one_request_are_refused_with_400(api: openai.OpenAI, appliance: Appliance) -> None:
    cases = ((["x"] * 257, "257 texts; at most 256"), (["a" * 150_000, "b" * 50_001], "200001 characters"))
    for too_big, says in cases:
        with pytest.raises(openai.BadRequestError, match=says) as caught:
            api.embeddings.create(model="all-minilm-l6-v2", input=too_big)
        assert caught.value.body["param"] == "input"  # type: ignore[index]
    assert api_client(appliance.url).predict(api_name="/status")["state"] == "ready"
    assert len(api.embeddings.create(model="all-minilm-l6-v2", input=["x"] * 256).data) == 256


def test_a_card_that_is_down_gives_500_card_down_naming_it(api: openai.OpenAI, appliance: Appliance) -> None:
    import time

    from tests.harness import get_json, wait_until

    cards = appliance.card_agents
    victim, endpoint = 3, appliance.card_agents.endpoints[3]
    cards.kill(victim)
    try:
        wait_until(lambda: get_json(appliance.url + "/health")["engine"] != "ready", timeout=10, every=0.1)
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError) as failure:
            api.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Hi"}], max_tokens=8)
        assert time.monotonic() - started < 5
        body = failure.value.body
        assert isinstance(body, dict) and body["code"] == "card_down", body
        assert f"card {victim} ({endpoint})" in body["message"]
    finally:
        cards.start(victim)
        cards.wait_healthy(victim)
        wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)
    reply = api.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Back?"}], max_tokens=8)
    assert reply.choices[0].message.content


def test_a_follow_up_reports_the_prompt_tokens_its_slot_already_held(api: openai.OpenAI) -> None:
    history = [{"role": "user", "content": "Remember the word lantern. " + "Some words to carry along. " * 40}]
    first = api.chat.completions.create(model="demo", messages=history, max_tokens=8, temperature=0)  # type: ignore[arg-type]
    assert first.usage is not None and first.usage.prompt_tokens > 200
    answer = first.choices[0].message.content or ""
    follow = [*history, {"role": "assistant", "content": answer}, {"role": "user", "content": "Which word?"}]
    again = api.chat.completions.create(model="demo", messages=follow, max_tokens=8, temperature=0)  # type: ignore[arg-type]
    assert again.usage is not None and again.usage.prompt_tokens_details is not None
    cached = again.usage.prompt_tokens_details.cached_tokens or 0
    assert first.usage.prompt_tokens - 10 <= cached < again.usage.prompt_tokens
