"""What a schema may cost as a grammar (app/schema_limits.py), and text made valid (app/valid_text.py):
the checks every front door shares, without the appliance."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from app import schema_limits as limits
from app.api.errors import ApiError
from app.api.preparing import off_loop
from app.api.request_models import ChatRequest, CompletionRequest
from app.api.tools import Tool, plan
from app.extraction.json_schema import SchemaProblem, check_schema
from app.schema_limits import CostlySchema, check_cost
from app.valid_text import valid_text, valid_values
from tests.own_loop import run_coroutine

TEMPLATES = Path(__file__).resolve().parent.parent / "assets" / "schemas"


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth - 1):
        schema = {"type": "array", "items": schema}
    return schema


COSTLY: list[tuple[dict[str, Any], str, str]] = [
    ({"type": "string", "maxLength": 1_000_000_000}, "/maxLength", "1000000000 is above"),
    ({"type": "string", "minLength": 100_000_000}, "/minLength", "100000000 is above"),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 5_000}, "/minItems", "5000 is above"),
    ({"type": "array", "maxItems": 10**12}, "/maxItems", "1000000000000 is above"),
    ({"type": "string", "pattern": "^a{1000000}$"}, "/pattern", "{1000000} repeats 1000000 times"),
    ({"type": "string", "pattern": "^b{2,99999}$"}, "/pattern", "repeats 99999 times"),
    ({"type": "string", "pattern": "^" + "ab" * 600 + "$"}, "/pattern", "a pattern of 1202 characters"),
    ({"enum": list(range(1001))}, "/enum", "1001 values"),
    (
        {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(201)}},
        "/properties",
        "201 properties",
    ),
    (nested(33), "/items" * 32, "nested 33 deep"),
    ({"anyOf": [{"type": "string", "maxLength": 1_000}] * 101}, "/anyOf/100", "add up to more than"),
    ({"type": "string", "maxLength": 1_001}, "/maxLength", "1001 is above"),
    ({"$defs": {f"d{i}": {"anyOf": [{}] * 100} for i in range(60)}}, "/$defs/d49/anyOf/49", "5000 subschemas"),
    (
        {"type": "object", "properties": {"a/b": {"type": "string", "maxLength": 10**7}}},
        "/properties/a~1b/maxLength",
        "10000000 is above",
    ),
]


@pytest.mark.parametrize(("schema", "pointer", "said"), COSTLY, ids=[c[1] + " " + c[2] for c in COSTLY])
def test_each_costly_bound_is_refused_naming_its_keyword_and_pointer(
    schema: dict[str, Any], pointer: str, said: str
) -> None:
    with pytest.raises(CostlySchema) as refused:
        check_cost(schema, where="response_format.json_schema.schema")
    assert refused.value.pointer == pointer
    assert said in refused.value.what and "limit" in refused.value.what
    assert refused.value.message.startswith(f"response_format.json_schema.schema{pointer}: ")
    assert refused.value.kind == "request"


def test_bounds_at_the_limits_and_ordinary_schemas_pass() -> None:
    check_cost({"type": "string", "minLength": limits.MAX_LENGTH, "maxLength": limits.MAX_LENGTH})
    check_cost({"type": "array", "maxItems": limits.MAX_ITEMS, "items": {"enum": list(range(limits.MAX_ENUM))}})
    check_cost({"type": "string", "pattern": "^[0-9]{3}-[0-9]{1,4}$"})
    check_cost(nested(limits.MAX_DEPTH))
    check_cost({"properties": {"maxLength": {"type": "string"}}, "enum": "not a list", "maxLength": "x"})
    check_cost({"type": "string", "maxLength": float("nan")})  # not a number to count: the validator refuses it
    check_cost(True)


def test_the_appliances_templates_and_their_tool_wrapper_are_well_inside() -> None:
    for path in sorted(TEMPLATES.glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        check_cost(schema)
        check_cost({"type": "array", "items": schema, "maxItems": 8})
        tools = [Tool.model_validate({"function": {"name": path.stem, "parameters": schema}})]
        calls = plan(tools, "auto", parallel=True)
        assert calls is not None
        check_cost(calls.schema)


def test_the_v1_request_refuses_a_costly_response_format_and_tool() -> None:
    huge = {"type": "string", "maxLength": 1_000_000_000}
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": huge}},
    }
    with pytest.raises(ApiError) as refused:
        ChatRequest.model_validate(body).to_engine(default_max_tokens=8, default_temperature=0)
    assert refused.value.param == "response_format"
    limit = limits.MAX_LENGTH
    assert refused.value.message == (
        f"response_format.json_schema.schema/maxLength: 1000000000 is above the appliance's limit of {limit}"
    )
    tool = {"function": {"name": "look", "parameters": {"type": "object", "properties": {"q": huge}}}}
    with pytest.raises(ApiError) as refused:
        ChatRequest.model_validate({**body, "response_format": None, "tools": [tool]}).tool_plan()
    assert refused.value.param == "tools[0].function.parameters"
    assert refused.value.message.startswith("tools[0].function.parameters/properties/q/maxLength: 1000000000")


def anyof_tree(width: int, levels: int, leaf: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tool's parameters: one property whose `anyOf` nests `levels` deep, `width` to a level (30, 3: 27,000
    leaves, ~1 MB as JSON, what issue 47 sent); `leaf` the last leaf (else one like the others)."""
    leaves: list[Any] = [{"type": "string", "minLength": i % 7} for i in range(width)]
    tree: dict[str, Any] = {"anyOf": leaves}
    for _ in range(levels - 1):
        tree = {"anyOf": [tree] * width}
    if leaf is not None:
        tree = {"anyOf": [*tree["anyOf"], leaf]}
    return {"type": "object", "properties": {"x": tree}}


def tool_body(parameters: dict[str, Any]) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "look", "parameters": parameters}}
    return {"model": "demo", "messages": [{"role": "user", "content": "x"}], "tools": [tool], "max_tokens": 4}


def test_a_1_mb_tool_schema_is_refused_by_its_cost_before_the_meta_schema_reads_it() -> None:
    """Issue 47, item 4: the meta-schema's validation came first and took 14-50 s over 27,000 subschemas."""
    body = tool_body(anyof_tree(30, 3))
    assert len(json.dumps(body)) > 900_000
    request = ChatRequest.model_validate(body)
    started = time.monotonic()
    with pytest.raises(ApiError) as refused:
        request.tool_plan()
    took = time.monotonic() - started
    assert took < 1.0, f"refused after {took:.1f} s"
    assert refused.value.param == "tools[0].function.parameters"
    assert f"more than the appliance's limit of {limits.MAX_SUBSCHEMAS} subschemas" in refused.value.message


@pytest.mark.slow
def test_a_schema_checked_off_the_loop_leaves_the_loop_serving() -> None:
    """Within the limits, the meta-schema's validation of ~2,500 subschemas still takes a second or more: the
    routes run it in a worker thread (app/api/preparing.py), and the loop ticks on meanwhile."""
    typo = {"type": "strin"}  # the meta-schema refuses it, after reading everything
    request = ChatRequest.model_validate(tool_body(anyof_tree(50, 2, leaf=typo)))
    ticks: list[float] = []

    async def refused_while_ticking() -> ApiError:
        async def tick() -> None:
            while True:
                ticks.append(time.monotonic())
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            with pytest.raises(ApiError) as refused:
                await off_loop(request.tool_plan)
            group.cancel_scope.cancel()
        return refused.value

    started = time.monotonic()
    error = run_coroutine(refused_while_ticking())
    took = time.monotonic() - started
    assert "not a valid JSON Schema" in error.message and "'strin' is not valid" in error.message, error.message
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    print(f"meta-validation {took:.2f} s; the loop's largest gap {max(gaps):.3f} s over {len(gaps)} ticks")
    assert took > 0.3 and max(gaps) < 0.25, (took, max(gaps))


def test_extraction_refuses_a_costly_field_with_its_pointer() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": 100_000_000}}}
    with pytest.raises(SchemaProblem) as refused:
        check_schema(schema)
    assert refused.value.pointer == "/properties/name/minLength"
    assert "100000000 is above the appliance's limit" in refused.value.message


def test_lone_surrogates_become_the_replacement_character() -> None:
    assert valid_text("hello \udc80 world") == "hello \ufffd world"
    assert valid_text("x\ud83d") == "x\ufffd" and valid_text("\udfff\ud800") == "\ufffd\ufffd"
    assert valid_text("\ud83d\ude00") == "\U0001f600"  # a pair written as two code points is one character
    same = "plain text, 四张卡 😀"
    assert valid_text(same) is same
    valid_text("hello \udc80 world").encode("utf-8")


def test_every_string_of_a_value_is_made_valid_and_clean_values_are_kept_as_they_are() -> None:
    value = {"messages": [{"role": "user", "content": "a\udc80"}], "k\ud800": ("t\udfff", 1, None)}
    assert valid_values(value) == {
        "messages": [{"role": "user", "content": "a\ufffd"}],
        "k\ufffd": ("t\ufffd", 1, None),
    }
    clean = {"a": ["b", {"c": 1}]}
    assert valid_values(clean) is clean


def test_v1_request_bodies_are_made_valid_in_every_string() -> None:
    chat = ChatRequest.model_validate(
        {"model": "m", "messages": [{"role": "system", "content": "s\udc80"}, {"role": "user", "content": "u\udc80"}]}
    )
    request = chat.to_engine(default_max_tokens=8, default_temperature=0)
    assert [m.content for m in request.messages] == ["s\ufffd", "u\ufffd"]
    completion = CompletionRequest.model_validate({"model": "m", "prompt": "hello \udc80 world", "stop": ["\ud800"]})
    assert completion.to_engine(default_max_tokens=8, default_temperature=0).prompt == "hello \ufffd world"
    assert completion.stop == ["\ufffd"]


@pytest.mark.slow
def test_what_the_limits_let_through_llama_cpp_parses_in_well_under_a_second() -> None:
    from app.engine.llama.grammar import grammar_for
    from tests.engine_host import vocab_only

    vocab = vocab_only()._model.vocab  # closes an engine this process holds on the engine cards
    widest = {
        "anyOf": [
            {"type": "array", "maxItems": limits.MAX_ITEMS, "items": {"type": "string", "maxLength": limits.MAX_LENGTH}}
        ]
        * 50
    }
    for schema in ({"type": "string", "maxLength": limits.MAX_LENGTH}, widest):
        check_cost(schema)
        took = []  # the fastest of three: the parse's own cost, not what else the machine was doing then
        for _ in range(3):
            started = time.monotonic()
            assert grammar_for(json.dumps(schema), vocab) is not None
            took.append(time.monotonic() - started)
        assert min(took) < 1.0, f"parses took {took} s (0.33–0.41 s for the widest on a busy 2-core machine)"
