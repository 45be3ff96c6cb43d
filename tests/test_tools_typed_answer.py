"""Tools under `auto` together with a format (issue 51.1): the Agents SDK's `Agent(tools=..., output_type=...)`
sends both in one request. The answer is a call or the format's JSON — the alternation llama.cpp's server builds —
shown here in process: the plan's schema and its grammar, the reply read back, and the words streamed. The
Agents SDK itself runs it against the test appliance in tests/test_openai_agents.py."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from app.api.answers import ChatShape
from app.api.errors import ApiError
from app.api.request_models import ChatRequest
from app.api.response_request import ResponsesRequest
from app.api.tools import ToolPlan, reply
from app.engine.events import Done, Stats, Token
from app.engine.llama.schema_grammar import to_gbnf

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'


class Place(BaseModel):
    city: str = Field(max_length=30)


class Forecast(BaseModel):  # nested: pydantic writes Place under $defs and refers to it
    summary: str = Field(max_length=60)
    place: Place


def _request(schema: dict[str, Any], **options: Any) -> ChatRequest:
    fmt = {"type": "json_schema", "json_schema": {"name": "final_output", "schema": schema, "strict": True}}
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    return ChatRequest(model="demo", messages=messages, tools=[WEATHER], response_format=fmt, **options)  # type: ignore[arg-type]


def _plan(schema: dict[str, Any], **options: Any) -> tuple[ToolPlan, dict[str, Any]]:
    body = _request(schema, **options)
    plan = body.tool_plan()
    assert plan is not None
    request = body.to_engine(default_max_tokens=64, default_temperature=0.0, tool_plan=plan)
    assert request.json_schema is not None
    return plan, json.loads(request.json_schema)


def test_auto_with_a_format_is_a_call_or_the_formats_json_and_its_grammar_builds() -> None:
    plan, schema = _plan(Forecast.model_json_schema())  # before: 400 "cannot be used together"
    assert plan.typed and plan.may_answer and schema == plan.schema
    assert set(schema) == {"anyOf", "$defs"}, schema  # the format's $defs at the root, where its $refs point
    typed = {"summary": "Mild", "place": {"city": "Paris"}}
    jsonschema.validate(typed, schema)
    jsonschema.validate(json.loads(CALL), schema)
    for wrong in ({"content": "Mild"}, {"summary": "Mild", "place": {"city": "x" * 31}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)
    assert "root ::=" in to_gbnf(schema)  # llama.cpp's converter takes the alternation
    assert '"summary"' in plan.instruction and "not inside another object" in plan.instruction


def test_a_forced_call_or_no_format_keeps_the_plans_of_before() -> None:
    forced, schema = _plan(Forecast.model_json_schema(), tool_choice="required")
    assert not forced.typed and schema["required"] == ["tool_calls"], schema
    body = ChatRequest(model="demo", messages=[{"role": "user", "content": "Hi"}], tools=[WEATHER])  # type: ignore[arg-type,list-item]
    words = body.tool_plan()
    assert words is not None and not words.typed
    jsonschema.validate({"content": "Hi"}, words.schema)  # auto without a format: words in {"content"}


def test_the_reply_is_the_formats_json_as_written_or_the_calls() -> None:
    plan, _ = _plan(Place.model_json_schema())
    assert reply('{"city": "Oslo"}', plan) == ('{"city": "Oslo"}', [])
    content, calls = reply(CALL, plan)
    assert content is None and [c["function"]["name"] for c in calls] == ["get_weather"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}


@pytest.mark.parametrize("answer", ['{"city": "Oslo"}', CALL], ids=["typed", "call"])
def test_a_streamed_typed_answer_streams_as_json_and_a_call_is_sent_whole(answer: str) -> None:
    plan, _ = _plan(Place.model_json_schema())
    shape = ChatShape({"id": "chatcmpl-x"}, plan, logprobs=False)
    pieces = [answer[i : i + 3] for i in range(0, len(answer), 3)]
    chunks = [c for piece in pieces for c in shape.token(Token(piece))]
    chunks += shape.closing(Done(Stats(9, 0, len(pieces), 0.1, 1, 1, 1, "stop")))
    deltas = [c["choices"][0]["delta"] for c in chunks]
    streamed = "".join(d.get("content") or "" for d in deltas)
    if answer == CALL:
        assert streamed == "" and any("tool_calls" in d for d in deltas), deltas
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    else:
        assert streamed == answer and len([d for d in deltas if d.get("content")]) > 1, deltas
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_the_responses_apis_text_format_makes_the_same_plan() -> None:
    body = ResponsesRequest(
        model="demo",
        input="Weather in Paris?",
        tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}],  # type: ignore[index,list-item]
        text={"format": {"type": "json_schema", "name": "final_output", "schema": Place.model_json_schema()}},  # type: ignore[arg-type]
    )
    plan = body.chat([]).tool_plan()
    assert plan is not None and plan.typed
    jsonschema.validate({"city": "Oslo"}, plan.schema)


def test_a_format_with_its_own_tool_calls_property_is_refused_by_name() -> None:
    clash = {"type": "object", "properties": {"tool_calls": {"type": "string"}}}
    with pytest.raises(ApiError, match="tool_calls") as refused:
        _plan(clash)
    assert refused.value.param == "response_format"
