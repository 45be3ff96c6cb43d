"""A coding agent's first request at the shipped defaults: OpenCode sends its system prompt and ten tools
(about 7,200 tokens) before any work, and the default context must take it with room to answer. Built here
in OpenCode's shape and size (its tools: bash, edit, glob, grep, list, read, write, todowrite, todoread,
webfetch), so the test needs neither OpenCode nor a network. The streamed request is shaped as OpenCode
1.18 sends its first one at its defaults (captured from `opencode run` against a stub, not kept): ten
tools whose parameters carry `$schema` (2020-12), integer bounds of ±(2^53 - 1) with `exclusiveMinimum: 0`,
an enum with a default and an array of objects; `max_tokens: 32000`, `tool_choice: "auto"`, `stream: true`,
`stream_options: {"include_usage": true}`. (A plain-tools first request of ~7,200 tokens was its own test;
this one holds more than it did, so it went, saving a 40 s prompt read: issue 27.) Its system prompt was
37 rules' worth (8,636 tokens in all); 20 make it 7,369, OpenCode's own size, and the read ~15 % shorter."""

from __future__ import annotations

from typing import Any

import openai

from tests.harness import API_KEY, Appliance, metric, wait_until

TOOLS = ("bash", "edit", "glob", "grep", "list", "read", "write", "todowrite", "todoread", "webfetch")
RULES = (
    "You are an interactive command line tool that helps users with software engineering tasks. Use the "
    "instructions below and the tools available to you to assist the user. Keep your answers short and to "
    "the point; read the code before you change it, follow the conventions of the project, never invent "
    "paths, run the tests after a change, and explain a command that changes the system before you run it. "
)


def tool(name: str) -> dict[str, Any]:
    description = f"The {name} tool. " + " ".join(
        f"Usage note {i}: call {name} with exact, absolute paths and explain why the call is needed; its output "
        "is truncated past 2000 lines, so narrow the request first."
        for i in range(8)
    )
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The absolute path to work on."},
                    "pattern": {"type": "string", "description": "A glob or a regular expression."},
                    "content": {"type": "string", "description": "Text to write, or the command to run."},
                    "timeout": {"type": "integer", "description": "Milliseconds before giving up."},
                },
                "required": ["path"],
            },
        },
    }


SAFE = 9007199254740991  # JavaScript's Number.MAX_SAFE_INTEGER, zod's bound of an int


def opencode_tool(name: str) -> dict[str, Any]:
    """A tool as OpenCode sends it: zod's JSON Schema (2020-12), its integer bounds and defaults."""
    shaped = tool(name)
    shaped["function"]["parameters"] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The absolute path to work on."},
            "timeout": {"minimum": -SAFE, "exclusiveMinimum": 0, "type": "integer", "maximum": SAFE},
            "offset": {"minimum": 0, "type": "integer", "maximum": SAFE},
            "format": {"type": "string", "enum": ["text", "markdown", "html"], "default": "markdown"},
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"content": {"type": "string"}, "status": {"type": "string"}},
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    return shaped


def test_opencodes_streamed_request_at_its_defaults_is_answered(appliance: Appliance) -> None:
    api = openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=300)
    request: Any = {
        "model": "demo",
        "messages": [
            {"role": "system", "content": RULES * 20},
            {"role": "user", "content": '"List the files in this folder."'},
        ],
        "tools": [opencode_tool(name) for name in TOOLS],
        "tool_choice": "auto",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with api.chat.completions.create(max_tokens=32000, **request) as stream:  # OpenCode's own max_tokens
        first = next(c for c in stream if c.choices and (c.choices[0].delta.content or c.choices[0].delta.tool_calls))
    assert first.choices[0].delta.content or first.choices[0].delta.tool_calls, first  # then it hangs up
    # The app learns of the hang-up at its next write; sent at once, the next request could reach the engine
    # while the first still held its slot, take another and read the 8,636 tokens (then) again (two whole runs of
    # the suite did: 17,272 prompt tokens, ~45 s). Here the next request waits for the slot to be given back,
    # and reads the prompt from its cache. (An agent that re-sends at once can still miss it: noted in
    # docs/development.md, issue 27's session of 2026-12-05.)
    wait_until(lambda: metric(appliance, "quartet_engine_running_answers") == 0, timeout=60, what="the slot freed")
    chunks = list(api.chat.completions.create(max_tokens=8, **request))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None, chunks[-2:]  # include_usage: last chunk
    assert 6_800 <= chunks[-1].usage.prompt_tokens <= 9_500, chunks[-1].usage  # 7,369 on the demo model
    assert any(c.choices and c.choices[0].finish_reason for c in chunks), chunks[-3:]
