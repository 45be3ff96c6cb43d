"""The last check of a constrained answer on /v1: an answer held to a JSON schema (`response_format`,
the Responses API's `text.format`, tool calls) is checked against that schema once it is whole, so a
keyword the grammar could not hold (app/engine/llama/schema_grammar.py) or an upstream that does not
enforce schemas never gives a client an answer that does not validate: it gets an error naming the
keyword and where, in OpenAI's shape (500 `schema_not_met`; streamed, as the stream's last event)."""

from __future__ import annotations

import json
from typing import Any

from app.api.errors import ApiError
from app.engine.events import Done, GenerationRequest
from app.schema_exact import problem


def schema_of(request: GenerationRequest) -> dict[str, Any] | None:
    """The schema the answer to `request` must meet (None: a free answer)."""
    if request.json_schema is None:
        return None
    schema: dict[str, Any] = json.loads(request.json_schema)
    return schema


def check(text: str, done: Done, schema: dict[str, Any] | None, *, tools: bool) -> None:
    """ApiError unless the whole answer meets `schema`; an answer cut by max_tokens is not checked (its
    finish_reason says `length`, and a cut tool call gives only the calls written whole)."""
    if schema is None or done.stats.finish_reason == "length":
        return
    what, param = ("the tool call", "tools") if tools else ("the answer", "response_format")
    try:
        value = json.loads(text)
    except ValueError:
        found: str | None = "it is not whole JSON (a stop sequence may have cut it)"
    else:
        found = problem(value, schema)
    if found is not None:
        raise ApiError(
            f"{what} did not meet its schema, so it is not sent: {found}. The grammar could not hold this "
            "keyword, so it was checked on the answer (docs/api.md, 'Schema-exact answers'); try another seed "
            "or temperature, or leave the keyword out",
            kind="internal",
            code="schema_not_met",
            param=param,
        )
