"""`POST /v1/responses` (OpenAI's Responses API, the default of the OpenAI Agents SDK) and
`GET /v1/responses/{id}`, on the same engine path as /v1/chat/completions: the request becomes a chat
request (app/api/response_request.py), its answer a response (app/api/response_shape.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse

from app.api.following import respond
from app.api.response_request import ResponsesRequest, as_messages
from app.api.response_shape import ResponseShape, conversation
from app.api.response_store import ResponseStore, owner_of
from app.context import AppContext


def add_routes(router: APIRouter, ctx: AppContext, answering: Callable[[str], str]) -> None:
    """The routes on `router`; `answering(name)` is the id of the model that answers for `name` (else 404)."""
    store = ResponseStore()

    @router.post("/responses", response_model=None)
    async def responses(body: ResponsesRequest, http: Request) -> JSONResponse | EventSourceResponse:
        model = answering(body.model)
        owner = owner_of(http.headers.get("authorization", ""))
        earlier = list(store.get(owner, body.previous_response_id).conversation) if body.previous_response_id else []
        chat = body.chat(earlier)
        tool_plan = chat.tool_plan()
        request = chat.to_engine(
            default_max_tokens=ctx.settings.api_max_tokens(),
            default_temperature=ctx.settings.engine.temperature,
            tool_plan=tool_plan,
        )
        turn = [*earlier, *body.messages()]

        def remember(final: dict[str, Any]) -> None:
            store.keep(owner, final, turn + as_messages(conversation(final)))

        shape = ResponseShape(_echo(body, model), tool_plan, remember)
        return await respond(ctx, request, shape, stream=bool(body.stream), include_usage=False, client=http)

    @router.get("/responses/{response_id}")
    def response(response_id: str, http: Request) -> dict[str, Any]:
        owner = owner_of(http.headers.get("authorization", ""))
        return store.get(owner, response_id, param="response_id").response


def _echo(body: ResponsesRequest, model: str) -> dict[str, Any]:
    """The request's settings as a response repeats them."""
    text = body.text.model_dump(by_alias=True, exclude_none=True) if body.text is not None else {}
    return {
        "model": model,
        "instructions": body.instructions,
        "tools": [t.model_dump(exclude_none=True) for t in body.tools or []],
        "tool_choice": body.tool_choice or "auto",
        "parallel_tool_calls": True if body.parallel_tool_calls is None else body.parallel_tool_calls,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "max_output_tokens": body.max_output_tokens,
        "previous_response_id": body.previous_response_id,
        "text": {"format": {"type": "text"}} | text,
        "truncation": "disabled",
        "reasoning": {"effort": None, "summary": None},
        "metadata": {},
        "store": True,
    }
