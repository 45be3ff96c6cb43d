"""Tool calling for agents and editors: the tools a request offers become an instruction for the model
and a JSON Schema its answer is constrained to, so a call's arguments always match its tool's schema.

The model answers one JSON object: `{"tool_calls": [{"name", "arguments"}]}`, or — when the request lets it
choose (`tool_choice: "auto"`) — `{"content": "..."}` for an answer in words, or, when the request also asks
for a format (`response_format`, the Responses API's `text.format`: the Agents SDK's `output_type`), the
format's JSON itself: the grammar is the alternation llama.cpp's server builds, a call `|` the format.
A model whose chat template knows nothing of tools works the same way: the tools are described in the
system message, and earlier calls and their results are written back into the conversation as text."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, Field

from app.api.errors import ApiError
from app.schema_limits import CostlySchema, check_cost

_PROMPTS = Path(__file__).resolve().parent.parent.parent / "assets" / "prompts"
_MAX_PARALLEL = 8


class ToolFunction(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Tool(BaseModel):
    type: Literal["function"] = "function"
    function: ToolFunction


@dataclass(frozen=True)
class ToolPlan:
    instruction: str  # goes to the model as (part of) the system message
    schema: dict[str, Any]  # what its answer is constrained to
    names: tuple[str, ...]
    may_answer: bool = False  # `auto`: the model may answer in words ({"content": ...}) instead of calling
    listing: str = ""  # the tools described, for a model whose chat template does not render `tools`
    tools_json: str = "[]"  # the tools offered, in OpenAI's shape, for a chat template that renders them
    typed: bool = False  # `auto` with a format: the answer instead of a call is the format's JSON, as written

    def words(self) -> Words | None:
        """What follows an answer's words while it streams (None: it can only call)."""
        return Words(typed=self.typed) if self.may_answer else None


def plan(
    tools: list[Tool] | None, choice: Any, *, parallel: bool, answer: dict[str, Any] | None = None
) -> ToolPlan | None:
    """How to ask for tool calls, or None when the request offers no tools or forbids calling them; `answer`:
    the schema of the request's format, which an answer that does not call meets (a forced call has none)."""
    if not tools and (choice == "required" or isinstance(choice, dict)):
        raise ApiError(
            "tool_choice asks for a tool call, but the request offers no tools: send tools", param="tool_choice"
        )
    if not tools or choice == "none":
        return None
    for index, tool in enumerate(tools):
        _check_parameters(tool, index)
    offered = tools
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        offered = [t for t in tools if t.function.name == wanted]
        if not offered:
            raise ApiError(f"tool_choice names {wanted!r}, which is not among the tools", param="tool_choice")
    elif choice not in (None, "auto", "required"):
        raise ApiError("tool_choice must be 'auto', 'none', 'required' or a named function", param="tool_choice")
    items = [_call_schema(t) for t in offered]
    calls = {
        "type": "array",
        "items": items[0] if len(items) == 1 else {"anyOf": items},
        "minItems": 1,
        "maxItems": _MAX_PARALLEL if parallel else 1,
    }
    calling = {
        "type": "object",
        "properties": {"tool_calls": calls},
        "required": ["tool_calls"],
        "additionalProperties": False,
    }
    may_answer = choice in (None, "auto")
    typed = may_answer and answer is not None
    listing, instruction = _instruction(offered, may_answer, answer if typed else None)
    return ToolPlan(
        instruction,
        _either(calling, answer if typed else _SPEAKING) if may_answer else calling,
        tuple(t.function.name for t in offered),
        may_answer,
        listing,
        json.dumps([t.model_dump() for t in offered], ensure_ascii=False),
        typed,
    )


_SPEAKING = {
    "type": "object",
    "properties": {"content": {"type": "string"}},
    "required": ["content"],
    "additionalProperties": False,
}


def _either(calling: dict[str, Any], answer: dict[str, Any] | None) -> dict[str, Any]:
    """A call or the answer; the answer's `$defs` move to the root, where its `#/$defs/…` references point."""
    if answer is None:
        return {"anyOf": [calling, _SPEAKING]}
    if isinstance(answer.get("properties"), dict) and "tool_calls" in answer["properties"]:
        raise ApiError(
            "response_format: its schema has a top-level `tool_calls` property, which is how a tool call is told "
            "from the answer here: rename it",
            param="response_format",
        )
    defs: dict[str, Any] = {key: answer[key] for key in ("$defs", "definitions") if key in answer}
    rest = {key: value for key, value in answer.items() if key not in defs and key != "$schema"}
    return {"anyOf": [calling, rest], **defs}


def _instruction(offered: list[Tool], may_answer: bool, answer: dict[str, Any] | None) -> tuple[str, str]:
    """The tools listed for a model whose template cannot show them, and how to reply (for every model)."""
    listed = "\n".join(
        f"- {t.function.name}: {t.function.description or '(no description)'}\n  arguments: "
        f"{json.dumps(t.function.parameters, ensure_ascii=False)}"
        for t in offered
    )
    rule = (
        'To answer in words instead: {"content": "..."} with your answer to the user. Once a tool\'s result '
        "is in the conversation, answer in words with it unless you need another call."
        if may_answer
        else "You must call a tool now."
    )
    if answer is not None:
        rule = (
            "To give your final answer instead: one JSON object that meets this JSON Schema, written as it is "
            f"(not inside another object): {json.dumps(answer, ensure_ascii=False)}. Once a tool's result is in "
            "the conversation, give the final answer with it unless you need another call."
        )
    listing = _prompt("tools.txt").format(tools=listed).strip()
    return listing, _prompt("tools_reply.txt").format(answer_rule=rule).strip()


def reply(text: str, tools: ToolPlan) -> tuple[str | None, list[dict[str, Any]]]:
    """The answer's words, or its tool calls in OpenAI's shape (ids made here, arguments as JSON text)."""
    try:
        answer = json.loads(text)
    except ValueError:  # cut by max_tokens: the calls written whole, else the words written (never the JSON)
        words = Words(typed=tools.typed)
        words.feed(text)
        answer = {"tool_calls": whole} if (whole := _whole_calls(text)) else None
        if answer is None:
            return (words.sent if words.speaking else None), []
    if isinstance(answer, dict) and isinstance(answer.get("tool_calls"), list):
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)},
            }
            for call in answer["tool_calls"]
        ]
        return None, calls
    if tools.typed:  # the format's JSON, as the model wrote it
        return text, []
    return str(answer.get("content", "")) if isinstance(answer, dict) else text, []


def as_text(tool_calls: list[dict[str, Any]]) -> str:
    """An earlier assistant turn's tool calls, as the model itself would have written them."""
    calls = []
    for call in tool_calls:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = function.get("arguments")
        calls.append({"name": function.get("name"), "arguments": arguments})
    return json.dumps({"tool_calls": calls}, ensure_ascii=False)


_CALLS = re.compile(r'\s*\{\s*"tool_calls"\s*:\s*\[')


def _whole_calls(text: str) -> list[dict[str, Any]]:
    """The calls of a `{"tool_calls": [...` answer cut short that were written whole (the grammar made each
    valid): a model that repeats its call until max_tokens still gets its calls run."""
    opened = _CALLS.match(text)
    if opened is None:
        return []
    decoder, at, calls = json.JSONDecoder(), opened.end(), list[dict[str, Any]]()
    while True:
        try:
            call, at = decoder.raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
        except ValueError:
            return calls
        calls.append(call)
        rest = text[at:].lstrip()
        if not rest.startswith(","):
            return calls
        at = len(text) - len(rest) + 1


_KEY = re.compile(r'\s*\{\s*"([a-z_]*)"\s*:\s*"?')


_FIRST_KEY = re.compile(r'\s*\{\s*(?:"((?:[^"\\]|\\.)*)"|\})')


class Words:
    """The words of an answer under `auto` while it streams: the JSON string of `{"content": "..."}`
    decoded as far as it has arrived, so a text answer streams like one without tools (`typed`: the
    format's JSON as it arrives, once its first key shows it is not a call). An answer that turns out to
    be tool calls gives nothing here (it is sent whole once it has been parsed)."""

    def __init__(self, *, typed: bool = False) -> None:
        self.typed = typed
        self.raw = ""
        self.speaking: bool | None = None  # None: not known yet (the first key has not arrived)
        self.start = 0  # where the string's characters begin in `raw`
        self.sent = ""  # the words decoded so far

    def feed(self, text: str) -> str:
        """Take the next piece of the answer; the words it completes (maybe none)."""
        self.raw += text
        if self.speaking is None:
            self.speaking = self._typed_speaking() if self.typed else self._speaking()
        if not self.speaking:
            return ""
        words = self.raw if self.typed else _string_prefix(self.raw[self.start :])
        piece, self.sent = words[len(self.sent) :], words
        return piece

    def _speaking(self) -> bool | None:
        key = _KEY.match(self.raw)
        if key is None or (key.group(1) == "content" and not key.group(0).endswith('"')):
            return None
        self.start = key.end()
        return key.group(1) == "content"

    def _typed_speaking(self) -> bool | None:
        begun = self.raw.lstrip()
        if begun and not begun.startswith("{"):
            return True  # a format that is not an object
        key = _FIRST_KEY.match(self.raw)
        return None if key is None else key.group(1) != "tool_calls"


def _string_prefix(body: str) -> str:
    """The decoded text of a JSON string's body up to its closing quote or the last whole escape."""
    i, whole = 0, []
    while i < len(body) and body[i] != '"':
        size = 1 if body[i] != "\\" else (6 if body[i + 1 : i + 2] == "u" else 2)
        if size == 6 and body[i + 2 : i + 3].lower() == "d" and body[i + 3 : i + 4].lower() in "89ab":
            size = 12  # a surrogate pair's first half: wait for the second
        if i + size > len(body):
            break
        whole.append(body[i : i + size])
        i += size
    text: str = json.loads('"' + "".join(whole) + '"', strict=False)
    return text


@cache
def _prompt(name: str) -> str:
    """The instruction's wording (assets/prompts/tools*.txt), read once, at the first request with tools."""
    return (_PROMPTS / name).read_text(encoding="utf-8")


def _call_schema(tool: Tool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": tool.function.name}, "arguments": tool.function.parameters},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _check_parameters(tool: Tool, index: int) -> None:
    """The cost first: it walks the schema once and stops at its limits (milliseconds), while the meta-schema's
    validation takes ~0.5 ms a subschema (a 1 MB schema of 27,000 subschemas: 14-50 s)."""
    where = f"tools[{index}].function.parameters"
    affordable(tool.function.parameters, where=where, param=where)
    if tool.function.parameters.get("type", "object") != "object":
        raise ApiError(f"tool {tool.function.name!r}: its parameters must be a JSON Schema of type object", param=where)
    try:
        jsonschema.validators.validator_for(tool.function.parameters).check_schema(tool.function.parameters)
    except jsonschema.SchemaError as err:
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        raise ApiError(
            f"tool {tool.function.name!r}: its parameters are not a valid JSON Schema at {pointer}: {err.message}",
            param=where,
        ) from err


def affordable(schema: Any, *, where: str, param: str) -> None:
    """A 400 naming the keyword unless the schema's grammar is within the appliance's limits
    (app/schema_limits.py)."""
    try:
        check_cost(schema, where=where)
    except CostlySchema as err:
        raise ApiError(err.message, param=param) from err
