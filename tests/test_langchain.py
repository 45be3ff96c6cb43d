"""LangChain's `ChatOpenAI` (langchain-openai) as the appliance's client, at its defaults but for the
address, the key, the model's name and room to answer (the test appliance's default `max_tokens` is 64,
LangChain sends none): a plain answer, a streamed one (with and without usage), a tool
call through `bind_tools`, and `with_structured_output` of a pydantic model whose fields carry bounds,
both by LangChain's default method (`json_schema`) and by `function_calling`. The pydantic model
validating is itself the check that the bounds held."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from tests.harness import API_KEY, Appliance


class Meeting(BaseModel):
    """A meeting to put in the calendar."""

    minutes: int = Field(ge=15, le=240, description="How long it lasts")
    title: str = Field(min_length=2, max_length=30)
    people: list[Annotated[str, Field(max_length=20)]] = Field(min_length=1, max_length=4)


@tool
def get_weather(city: str) -> str:
    """The weather now in a city."""
    return f"18 degrees and light rain in {city}"


@pytest.fixture(scope="module")
def llm(appliance: Appliance) -> ChatOpenAI:
    return ChatOpenAI(model="demo", base_url=appliance.url + "/v1", api_key=API_KEY, timeout=180, max_tokens=200)  # type: ignore[arg-type]


def test_a_plain_answer_and_a_streamed_one(llm: ChatOpenAI) -> None:
    reply = llm.invoke("Say hello to Ada in one short sentence.", max_tokens=32)
    assert isinstance(reply, AIMessage) and isinstance(reply.content, str) and reply.content.strip(), reply
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] > 0, reply
    assert reply.response_metadata["finish_reason"] in ("stop", "length"), reply.response_metadata
    chunks = list(llm.stream("Count from one to five.", max_tokens=32))
    assert len([c for c in chunks if c.content]) > 1, chunks
    counted = list(llm.stream("Count from one to five.", max_tokens=16, stream_usage=True))
    usage = [c.usage_metadata for c in counted if isinstance(c, AIMessageChunk) and c.usage_metadata]
    assert usage and usage[-1]["total_tokens"] > usage[-1]["output_tokens"] > 0, counted[-2:]


def test_bind_tools_gives_a_call_langchain_parses(llm: ChatOpenAI) -> None:
    forced = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("What is the weather in Paris?")
    assert isinstance(forced, AIMessage) and len(forced.tool_calls) >= 1, forced
    call = forced.tool_calls[0]
    assert call["name"] == "get_weather" and isinstance(call["args"].get("city"), str), call
    assert get_weather.invoke(call["args"]).startswith("18 degrees")
    chosen: Any = llm.bind_tools([get_weather]).invoke("What is the weather in Oslo?", max_tokens=120)  # auto
    assert chosen.tool_calls or (isinstance(chosen.content, str) and chosen.content.strip()), chosen
    assert not chosen.invalid_tool_calls, chosen.invalid_tool_calls


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_structured_output_meets_the_models_bounds(llm: ChatOpenAI, method: str) -> None:
    structured = llm.with_structured_output(Meeting, method=method)  # type: ignore[arg-type]
    for prompt in (
        "Book a meeting of 1500000000000000 minutes for the whole company.",
        "Plan a two-minute stand-up with Ada, Lin, Omar, Sam, Kim and Jo, titled with a very long sentence.",
        "Schedule lunch.",
    ):
        meeting = structured.invoke(prompt)
        assert isinstance(meeting, Meeting), meeting
        assert 15 <= meeting.minutes <= 240 and 1 <= len(meeting.people) <= 4, meeting
