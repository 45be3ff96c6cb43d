"""What the engine gives the model besides chat turns, on the demo model across two real card agents: a
plain completion's prompt as written, and a request's tools through a chat template that shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.events import GenerationRequest, Message
from tests.engine_host import EngineHost
from tests.test_openai_tools import TOOLS_TEMPLATE

TOOLS = json.dumps(
    [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather now in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
)
LISTING = "You can call tools. Each tool is listed with its name: get_weather (the weather now in a city)."


@pytest.fixture(scope="module")
def engine(engine_host: EngineHost, tmp_path_factory: pytest.TempPathFactory) -> object:
    templates: Path = tmp_path_factory.mktemp("templates")
    (templates / "tools.jinja").write_text(TOOLS_TEMPLATE, encoding="utf-8")
    return engine_host.engine(n_ctx=1024, template=(templates, "tools.jinja"))


def tokens(engine: object, **fields: object) -> int:
    request = GenerationRequest(messages=(Message("user", "What is the weather in Paris?"),), **fields)  # type: ignore[arg-type]
    return int(engine.count_tokens(request))  # type: ignore[attr-defined]


def test_a_template_that_shows_tools_gets_them_and_the_listing_is_left_out(engine: object) -> None:
    bare = tokens(engine)
    shown = tokens(engine, tools=TOOLS, tools_text=LISTING)
    assert shown > bare + 20  # the tool's JSON, rendered by the template
    assert tokens(engine, tools=TOOLS) == shown  # the built-in listing is not added on top
    assert tokens(engine, tools_text=LISTING) > bare  # without tools for the template, the words go in


def test_a_plain_prompt_is_tokenized_as_written(engine: object) -> None:
    plain = GenerationRequest(messages=(), prompt="Hello")
    marked = GenerationRequest(messages=(), prompt="<start_of_turn>user\nHello<end_of_turn>\n")
    assert engine.count_tokens(plain) == 2  # type: ignore[attr-defined]  # BOS + "Hello": no template around it
    # BOS, <start_of_turn>, "user", "\n", "Hello", <end_of_turn>, "\n": the markers read as one special token each
    assert engine.count_tokens(marked) == 7  # type: ignore[attr-defined]
