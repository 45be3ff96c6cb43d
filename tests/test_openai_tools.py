"""Tool calling through /v1/chat/completions with the official `openai` client, on the demo model:
arguments always match the tool's schema, in OpenAI's shape, streamed as the client assembles them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

from app.engine.llama.chat_prompt import renders_tools, with_system
from tests.harness import API_KEY, Appliance

WEATHER: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 40}},
            "required": ["zone"],
        },
    },
}
ASK: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the weather in Paris?"}]
# one call to get_weather, required: the answer streamed or not
REQUIRED_WEATHER: dict[str, Any] = {
    "messages": ASK,
    "tools": [WEATHER],
    "tool_choice": "required",
    "max_tokens": 160,
    "temperature": 0,
    "parallel_tool_calls": False,
}


@pytest.fixture(scope="module")
def api(appliance: Appliance) -> openai.OpenAI:
    return openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def model(api: openai.OpenAI) -> str:
    return api.models.list().data[0].id


def valid_call(call: Any, tool: ChatCompletionFunctionToolParam) -> None:
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == tool["function"]["name"]
    jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])


def test_required_tool_choice_gives_a_call_whose_arguments_match(api: openai.OpenAI) -> None:
    reply = api.chat.completions.create(model=model(api), stream=False, **REQUIRED_WEATHER)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls and len(choice.message.tool_calls) == 1  # parallel_tool_calls=False
    for call in choice.message.tool_calls:
        valid_call(call, WEATHER)


def test_a_named_tool_is_the_one_called(api: openai.OpenAI) -> None:
    reply = api.chat.completions.create(
        model=model(api),
        messages=ASK,
        tools=[WEATHER, TIME],
        max_tokens=80,
        temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        parallel_tool_calls=False,
    )
    calls = reply.choices[0].message.tool_calls or []
    assert len(calls) == 1
    valid_call(calls[0], TIME)


def test_streamed_tool_calls_assemble_as_the_client_expects(api: openai.OpenAI) -> None:
    stream = api.chat.completions.create(model=model(api), stream=True, **REQUIRED_WEATHER)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in stream:
        for delta_call in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(delta_call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += delta_call.id or ""
            entry["name"] += (delta_call.function.name or "") if delta_call.function else ""
            entry["arguments"] += (delta_call.function.arguments or "") if delta_call.function else ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and calls
    for entry in calls.values():
        assert entry["id"].startswith("call_") and entry["name"] == "get_weather"
        jsonschema.validate(json.loads(entry["arguments"]), WEATHER["function"]["parameters"])


def test_auto_answers_in_words_or_calls_validly_and_none_never_calls(api: openai.OpenAI) -> None:
    reply = api.chat.completions.create(model=model(api), messages=ASK, tools=[WEATHER], max_tokens=80, temperature=0)
    message = reply.choices[0].message
    if message.tool_calls:
        assert reply.choices[0].finish_reason == "tool_calls"
        for call in message.tool_calls:
            valid_call(call, WEATHER)
    else:
        assert message.content and not message.content.lstrip().startswith('{"content"')
    plain = api.chat.completions.create(
        model=model(api), messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=24, temperature=0
    )
    assert plain.choices[0].message.tool_calls is None and plain.choices[0].message.content


def test_a_conversation_with_calls_and_their_results_goes_on(api: openai.OpenAI) -> None:
    messages: list[Any] = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lyon", "unit": "celsius"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, light rain"},
        {"role": "tool", "tool_call_id": "call_2", "content": "21 degrees, sunny"},
    ]
    reply = api.chat.completions.create(
        model=model(api), messages=messages, tools=[WEATHER], tool_choice="none", max_tokens=32, temperature=0
    )
    assert reply.choices[0].message.content


def test_a_call_cut_by_max_tokens_never_leaks_its_json_into_content(api: openai.OpenAI) -> None:
    cut: dict[str, Any] = REQUIRED_WEATHER | {"max_tokens": 6}  # `{"tool_calls": [{"name": "get_` and no more
    reply = api.chat.completions.create(model=model(api), **cut)
    choice = reply.choices[0]
    assert choice.finish_reason == "length" and not choice.message.tool_calls, choice
    assert "{" not in (choice.message.content or "") and "tool_calls" not in (choice.message.content or "")
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in api.chat.completions.create(model=model(api), stream=True, **cut)
        if chunk.choices
    )
    assert "{" not in streamed and "tool_calls" not in streamed, streamed


def test_what_cannot_be_honoured_is_refused_by_name(api: openai.OpenAI, appliance: Appliance) -> None:
    broken: ChatCompletionFunctionToolParam = {
        "type": "function",
        "function": {"name": "broken", "parameters": {"type": "object", "properties": {"when": {"type": "moment"}}}},
    }
    with pytest.raises(openai.BadRequestError, match=r"tool 'broken'.*/properties/when/type") as caught:
        api.chat.completions.create(model=model(api), messages=ASK, tools=[broken], tool_choice="required")
    assert caught.value.body["param"] == "tools[0].function.parameters"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        api.chat.completions.create(
            model=model(api),
            messages=ASK,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )
    with pytest.raises(openai.BadRequestError, match="logit_bias") as caught:
        api.chat.completions.create(model=model(api), messages=ASK, logit_bias={"1": 5}, max_tokens=4)
    assert caught.value.body["param"] == "logit_bias"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match=r"n > 1"):
        api.chat.completions.create(model=model(api), messages=ASK, n=2, max_tokens=4)
    ignored = api.chat.completions.create(
        model=model(api), messages=ASK, max_tokens=4, extra_body={"some_future_option": True}
    )
    assert ignored.choices[0].message.content is not None


def test_one_model_can_be_looked_up(api: openai.OpenAI, appliance: Appliance) -> None:
    name = model(api)
    assert api.models.retrieve(name).id == name
    missing = httpx.get(appliance.url + "/v1/models/gpt-9", headers={"Authorization": f"Bearer {API_KEY}"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


# A template that shows the tools it is given, as recent models' templates do (Qwen's, Llama 3.1's…).
TOOLS_TEMPLATE = (
    "{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}\n{% endfor %}</tools>\n{% endif %}"
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}<|assistant|>"
)


def test_tools_go_through_a_chat_template_that_shows_them_else_into_the_system_message() -> None:
    gemma = (Path(__file__).resolve().parent.parent / "assets" / "chat_templates" / "gemma.jinja").read_text()
    assert not renders_tools(Jinja2ChatFormatter(gemma, eos_token="<eos>", bos_token="<bos>"))
    assert renders_tools(Jinja2ChatFormatter(TOOLS_TEMPLATE, eos_token="</s>", bos_token="<s>"))
    listing = "You can call tools: get_weather"
    assert with_system([{"role": "user", "content": "hi"}], listing)[0] == {"role": "system", "content": listing}
    joined = with_system(
        [{"role": "system", "content": "Reply with JSON."}, {"role": "user", "content": "hi"}], listing
    )
    assert joined[0]["content"] == listing + "\n\nReply with JSON." and len(joined) == 2
