"""A /v1 request checked and turned into what the engine is asked, off the event loop.

Checking a request can be CPU work proportional to its size: a tool's parameters walked for their cost and
validated against the JSON Schema meta-schema (~0.5 ms a subschema, up to app/schema_limits.py's 5,000), a
long conversation joined. On the event loop that work held every other client: a 1 MB tool schema held
`GET /health` and another client's stream 50 s (issue 47, item 4). A route hands it to `off_loop`, a worker
thread, and the loop goes on serving meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio

from app.api.request_models import ChatRequest
from app.api.tools import ToolPlan
from app.context import AppContext
from app.engine.events import GenerationRequest

T = TypeVar("T")


async def off_loop(work: Callable[[], T]) -> T:
    """`work()` in a worker thread; what it returns, or what it raises."""
    return await anyio.to_thread.run_sync(work)


def prepared(body: ChatRequest, ctx: AppContext) -> tuple[ToolPlan | None, GenerationRequest]:
    """A chat request's tool plan and what the engine is asked (ApiError for what cannot run as sent)."""
    tool_plan = body.tool_plan()
    engine = ctx.settings.engine
    request = body.to_engine(
        default_max_tokens=ctx.settings.api_max_tokens(), default_temperature=engine.temperature, tool_plan=tool_plan
    )
    return tool_plan, request
