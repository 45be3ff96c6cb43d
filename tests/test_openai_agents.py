"""A real agent framework as the appliance's client: the OpenAI Agents SDK (`openai-agents`), set up as
docs/api.md tells, runs an agent with one Python function tool to completion, streamed and not.

The demo model (270M) is too small to decide by itself when to call and when to stop: the first turn
forces the call (`tool_choice` naming the tool), and a run hook sets `tool_choice: "none"` once the tool
has run, so the second turn must answer in words. Everything else — the tool's schema, the call and its
arguments, the `role: tool` result, the final answer — goes through the SDK and /v1 as for any model."""

from __future__ import annotations

import dataclasses
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunHooks,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem
from pydantic import BaseModel, Field

from tests.harness import API_KEY, Appliance
from tests.own_loop import run_coroutine

set_tracing_disabled(True)  # the SDK would otherwise send traces to OpenAI


class _AnswerAfterOneCall(RunHooks[Any]):
    async def on_tool_end(self, context: Any, agent: Agent[Any], tool: Any, result: object) -> None:
        agent.model_settings = dataclasses.replace(agent.model_settings, tool_choice="none")


def weather_agent(appliance: Appliance, client: openai.AsyncOpenAI, asked: list[str]) -> Agent[Any]:
    @function_tool
    def get_weather(city: str) -> str:
        """The weather now in a city."""
        asked.append(city)
        return f"18 degrees and light rain in {city}"

    model_id = openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY).models.list().data[0].id
    return Agent(
        name="Weather",
        instructions="You answer questions about the weather.",
        tools=[get_weather],
        model=OpenAIChatCompletionsModel(model=model_id, openai_client=client),
        model_settings=ModelSettings(
            tool_choice="get_weather", parallel_tool_calls=False, temperature=0, max_tokens=48
        ),
        reset_tool_choice=False,  # the hook decides
    )


def ran_the_tool_then_answered(items: list[Any], final: Any) -> None:
    kinds = [type(item) for item in items]
    assert kinds == [ToolCallItem, ToolCallOutputItem, MessageOutputItem], kinds
    assert "18 degrees" in str(items[1].output)
    assert isinstance(final, str) and final.strip()


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_an_agent_with_a_function_tool_runs_to_completion(appliance: Appliance, streamed: bool) -> None:
    asked: list[str] = []

    async def run() -> tuple[list[Any], Any]:
        async with openai.AsyncOpenAI(
            base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120
        ) as client:
            agent = weather_agent(appliance, client, asked)
            if not streamed:
                result = await Runner.run(
                    agent, "What is the weather in Paris?", max_turns=3, hooks=_AnswerAfterOneCall()
                )
                return result.new_items, result.final_output
            stream = Runner.run_streamed(
                agent, "What is the weather in Paris?", max_turns=3, hooks=_AnswerAfterOneCall()
            )
            async for _event in stream.stream_events():
                pass
            return stream.new_items, stream.final_output

    items, final = run_coroutine(run())
    assert len(asked) == 1 and "Paris" in asked[0]  # the model called, the SDK ran the function
    ran_the_tool_then_answered(items, final)


class Forecast(BaseModel):
    """The agent's typed answer (the SDK's `output_type`): short, so the 270M model's answer ends in its grammar."""

    summary: str = Field(max_length=60)
    city: str = Field(max_length=30)


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
@pytest.mark.parametrize("first", ["auto", "forced"])
def test_an_agent_with_a_tool_and_a_typed_output_answers_in_its_type(
    appliance: Appliance, api: str, first: str
) -> None:
    """Issue 51.1: `Agent(tools=..., output_type=...)` sends the tools under `auto` with the output type's schema in
    one request (before: 400 "cannot be used together"); the grammar lets the answer be a call or a Forecast.

    `auto`: the SDK at its defaults. The demo model answers at once, in the type (a 27B would call first; the
    call branch of the same grammar is shown in process, tests/test_tools_typed_answer.py). `forced`: both turns
    as above — the first names the tool, the hook sets `tool_choice: "none"` once it has run (under `auto` the
    270M model calls again and again), and the second answers in the type."""
    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather now in a city."""
        asked.append(city)
        return f"18 degrees and light rain in {city}"

    forced = first == "forced"
    settings = ModelSettings(parallel_tool_calls=False, temperature=0, max_tokens=96)

    async def run() -> tuple[list[Any], Any]:
        async with openai.AsyncOpenAI(
            base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120
        ) as client:
            model_id = (await client.models.list()).data[0].id
            model: Any = (
                OpenAIChatCompletionsModel(model=model_id, openai_client=client)
                if api == "chat_completions"
                else OpenAIResponsesModel(model=model_id, openai_client=client)
            )
            agent = Agent(
                name="Weather",
                instructions="You answer questions about the weather.",
                tools=[get_weather],
                output_type=Forecast,
                model=model,
                model_settings=dataclasses.replace(settings, tool_choice="get_weather") if forced else settings,
                reset_tool_choice=not forced,  # forced: the hook decides
            )
            hooks = _AnswerAfterOneCall() if forced else None
            result = await Runner.run(agent, "What is the weather in Paris?", max_turns=3, hooks=hooks)
            return result.new_items, result.final_output

    items, final = run_coroutine(run())
    calls = [ToolCallItem, ToolCallOutputItem] if forced else []
    assert [type(item) for item in items] == [*calls, MessageOutputItem], items
    assert len(asked) == (1 if forced else 0), asked
    assert isinstance(final, Forecast), final  # the SDK parsed the answer's content as the output type
