"""The Responses API (`POST /v1/responses`) through real clients: the OpenAI Agents SDK at its defaults
(its default model is the Responses API: `set_default_openai_client` and a model named by its id) runs an
agent with a Python function tool to its end, and the `openai` SDK's `client.responses` creates answers
streamed and not, with function tools, their outputs, `previous_response_id` and `text.format`.

As in tests/test_openai_agents.py, the demo model (270M) is too small to decide by itself when to call:
the first turn forces the call, and a run hook sets `tool_choice: "none"` once the tool has run."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jsonschema
import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    RunHooks,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem
from pydantic import BaseModel, Field

from tests.harness import API_KEY, Appliance
from tests.own_loop import run_coroutine

set_tracing_disabled(True)

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


class Report(BaseModel):
    summary: str = Field(max_length=60)


class _AnswerAfterOneCall(RunHooks[Any]):
    async def on_tool_end(self, context: Any, agent: Agent[Any], tool: Any, result: object) -> None:
        agent.model_settings = dataclasses.replace(agent.model_settings, tool_choice="none")


def client(appliance: Appliance) -> openai.OpenAI:
    return openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def served(appliance: Appliance) -> str:
    return client(appliance).models.list().data[0].id


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_the_agents_sdk_at_its_defaults_runs_an_agent_with_a_function_tool(
    appliance: Appliance, streamed: bool
) -> None:
    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather now in a city."""
        asked.append(city)
        return f"18 degrees and light rain in {city}"

    agent = Agent(
        name="Weather",
        output_type=Report,  # the answer's grammar ends it: the 270M model alone would ramble to max_tokens
        instructions="You answer questions about the weather.",
        tools=[get_weather],
        model=served(appliance),  # a name: the SDK's default provider, whose default is the Responses API
        model_settings=ModelSettings(
            tool_choice="get_weather", parallel_tool_calls=False, temperature=0, max_tokens=96
        ),
        reset_tool_choice=False,
    )

    async def run() -> tuple[list[Any], Any]:
        set_default_openai_client(
            openai.AsyncOpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120),
            use_for_tracing=False,
        )
        hooks = _AnswerAfterOneCall()
        if not streamed:
            result = await Runner.run(agent, "What is the weather in Paris?", max_turns=3, hooks=hooks)
            return result.new_items, result.final_output
        stream = Runner.run_streamed(agent, "What is the weather in Paris?", max_turns=3, hooks=hooks)
        async for _event in stream.stream_events():
            pass
        return stream.new_items, stream.final_output

    items, final = run_coroutine(run())
    assert len(asked) == 1 and "Paris" in asked[0]
    assert [type(item) for item in items] == [ToolCallItem, ToolCallOutputItem, MessageOutputItem]
    assert "18 degrees" in str(items[1].output)
    assert isinstance(final, Report) and final.summary.strip()


def test_a_response_whole_answers_in_words_with_usage(appliance: Appliance) -> None:
    response = client(appliance).responses.create(
        model=served(appliance), instructions="Answer briefly.", input="Say hello.", max_output_tokens=8
    )
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.output[0].type == "message" and response.output_text.strip()
    assert response.usage is not None and response.usage.output_tokens <= 8 and response.usage.input_tokens > 0
    assert response.status in ("completed", "incomplete")
    if response.status == "incomplete":
        assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"
    assert client(appliance).responses.retrieve(response.id).output_text == response.output_text


def test_a_streamed_response_sends_openais_event_sequence(appliance: Appliance) -> None:
    events: list[Any] = list(
        client(appliance).responses.create(
            model=served(appliance), input="Say hello.", max_output_tokens=6, stream=True
        )
    )
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ], kinds
    assert kinds[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas and deltas == events[-1].response.output_text
    assert [e.sequence_number for e in events] == list(range(len(events)))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_function_call_then_its_output_through_previous_response_id(appliance: Appliance, stream: bool) -> None:
    api, model = client(appliance), served(appliance)
    forced: Any = {"type": "function", "name": "get_weather"}
    options: Any = {"model": model, "tools": [WEATHER_TOOL], "max_output_tokens": 40}
    if stream:
        events: list[Any] = list(
            api.responses.create(input="Weather in Paris?", tool_choice=forced, stream=True, **options)
        )
        kinds = [e.type for e in events]
        assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
        first: Any = events[-1].response
    else:
        first = api.responses.create(input="Weather in Paris?", tool_choice=forced, **options)
    call = first.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id
    jsonschema.validate(json.loads(call.arguments), WEATHER_TOOL["parameters"])
    then = api.responses.create(
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18 degrees, light rain"}],
        previous_response_id=first.id,
        tool_choice="none",
        **options,
    )
    assert then.previous_response_id == first.id
    assert then.output[0].type == "message" and then.output_text.strip()


def test_an_unknown_previous_response_is_404_naming_it(appliance: Appliance) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client(appliance).responses.create(model=served(appliance), input="hi", previous_response_id="resp_nope")
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]


def test_structured_output_through_text_format(appliance: Appliance) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    }
    response = client(appliance).responses.create(
        model=served(appliance),
        input="Which city is the capital of France? Answer in JSON.",
        text={"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}},
        max_output_tokens=24,
    )
    jsonschema.validate(json.loads(response.output_text), schema)


def test_items_in_input_carry_the_conversation_and_other_tools_are_refused(appliance: Appliance) -> None:
    api, model = client(appliance), served(appliance)
    items: Any = [
        {"role": "user", "content": [{"type": "input_text", "text": "My name is Ada."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello Ada."}]},
        {"role": "user", "content": "What is my name?"},
    ]
    answer = api.responses.create(model=model, input=items, max_output_tokens=6)
    assert answer.output_text.strip()
    with pytest.raises(openai.BadRequestError) as caught:
        api.responses.create(model=model, input="hi", tools=[{"type": "web_search"}])
    assert caught.value.body["param"] == "tools"  # type: ignore[index]
