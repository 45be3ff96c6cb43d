"""A coding agent's first request at the shipped defaults: OpenCode sends its system prompt and ten tools
(about 7,200 tokens) before any work, and the default context must take it with room to answer. Built here
in OpenCode's shape and size (its tools: bash, edit, glob, grep, list, read, write, todowrite, todoread,
webfetch), so the test needs neither OpenCode nor a network."""

from __future__ import annotations

from typing import Any

import openai

from tests.harness import API_KEY, Appliance

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


def test_opencodes_first_request_fits_the_default_context(appliance: Appliance) -> None:
    api = openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=300)
    messages: Any = [
        {"role": "system", "content": RULES * 37},
        {"role": "user", "content": "List the files in this folder."},
    ]
    tools: Any = [tool(name) for name in TOOLS]
    reply = api.chat.completions.create(model="demo", messages=messages, tools=tools, max_tokens=4)
    assert reply.usage is not None and 6_800 <= reply.usage.prompt_tokens <= 7_800, reply.usage
    assert reply.choices[0].finish_reason in ("length", "tool_calls", "stop")
