"""The OpenAI-compatible API under /v1, sharing the engine's queue with the UI.

Status codes follow OpenAI: 401 bad key, 400 bad request or context too long, 503 busy or the
engine not ready (with the queue length), 500 a card down (named). A streaming answer's status is
decided by its first event, so a request that fails before any token still gets a real status.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import struct
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from app.api.schemas import ApiError, ChatRequest, EmbeddingRequest
from app.api.tools import ToolPlan, reply
from app.context import AppContext
from app.engine.events import Done, EngineError, Event, Failed, Queued, Reading, Token
from app.engine.follow import follow
from app.engine.ticket import Ticket

_STATUS = {"context": 400, "request": 400, "busy": 503, "card": 500, "engine": 503}
_CODES = {"context": "context_length_exceeded", "busy": "busy", "card": "card_down", "engine": "engine_unavailable"}


def model_id(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")


def api_error(failure: Failed | EngineError, waiting: int = 0) -> ApiError:
    kind = failure.kind
    message = failure.message if isinstance(failure, Failed) else str(failure)
    if kind == "busy" and waiting:
        message = f"{message} (queue position would be {waiting + 1})"
    type_ = "invalid_request_error" if _STATUS[kind] == 400 else "server_error"
    param = "messages" if kind == "context" else None
    return ApiError(_STATUS[kind], message, type_=type_, code=_CODES.get(kind), param=param)


def require_key(request: Request, keys: list[str]) -> None:
    """401 in OpenAI's shape unless the request carries one of `keys` as its Bearer token (none set: open)."""
    if not keys:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    token = given.strip().encode()
    if scheme.lower() != "bearer" or not token or not any(hmac.compare_digest(token, key.encode()) for key in keys):
        raise ApiError(401, "invalid API key: send one of the appliance's keys as 'Authorization: Bearer <key>'",
                       type_="invalid_request_error", code="invalid_api_key")


def build_router(ctx: AppContext) -> APIRouter:
    def authorised(request: Request) -> None:
        require_key(request, ctx.settings.api_keys)

    router = APIRouter(prefix="/v1", dependencies=[Depends(authorised)])
    served = model_id(ctx.settings.model_name)

    @router.get("/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": served, "object": "model", "created": 0, "owned_by": "quartet"}]}

    @router.get("/models/{name}")
    def model(name: str) -> dict[str, Any]:
        if name != served:
            raise ApiError(404, f"there is no model {name!r} here; this appliance serves {served!r}",
                           type_="invalid_request_error", code="model_not_found", param="model")
        return {"id": served, "object": "model", "created": 0, "owned_by": "quartet"}

    @router.post("/chat/completions", response_model=None)
    async def chat(body: ChatRequest) -> JSONResponse | StreamingResponse:
        settings = ctx.settings
        tool_plan = body.tool_plan()
        request = body.to_engine(default_max_tokens=settings.max_tokens, default_temperature=settings.temperature,
                                 tool_plan=tool_plan)
        try:
            ticket = ctx.engine.submit(request)
        except EngineError as err:
            raise api_error(err, ctx.engine.status()["queue"]["waiting"]) from err
        answer = _Answer(ctx, ticket, served, tool_plan)
        first = await answer.first()
        if isinstance(first, Failed):
            raise api_error(first)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(answer.sse(first, include_usage), media_type="text/event-stream")
        return JSONResponse(await answer.whole(first))

    @router.post("/embeddings")
    def embeddings(body: EmbeddingRequest) -> dict[str, Any]:
        embed = ctx.embed
        if embed is None:
            raise ApiError(503, "no embedder is configured", type_="server_error", code="engine_unavailable")
        texts = [body.input] if isinstance(body.input, str) else body.input
        _check_embedding_size(texts, max_inputs=ctx.settings.embed_max_inputs, max_chars=ctx.settings.embed_max_chars)
        vectors, tokens = embed(texts)
        encoded: list[Any] = vectors
        if body.encoding_format == "base64":  # what the openai package asks for: little-endian float32
            encoded = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() for v in vectors]
        return {
            "object": "list",
            "model": body.model,
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(encoded)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    return router


def _check_embedding_size(texts: list[str], *, max_inputs: int, max_chars: int) -> None:
    """400 before any work for a request too large to embed at once (each token is at least a character)."""
    if len(texts) > max_inputs:
        raise ApiError(400, f"input has {len(texts)} texts; at most {max_inputs} per request: send them in batches",
                       type_="invalid_request_error", param="input")
    chars = sum(len(text) for text in texts)
    if chars > max_chars:
        raise ApiError(400, f"input has {chars} characters; at most {max_chars} per request: send smaller batches",
                       type_="invalid_request_error", param="input")


class _Answer:
    """One chat completion followed from the engine's queue to the client."""

    def __init__(self, ctx: AppContext, ticket: Ticket, model: str, tool_plan: ToolPlan | None = None) -> None:
        self.ctx, self.ticket, self.model, self.tool_plan = ctx, ticket, model, tool_plan
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())
        self.finished = False
        self.events = follow(ticket)

    async def next(self) -> Event:
        """The next token or end; a client that leaves meanwhile is let go at once (the answer is cancelled)."""
        while True:
            event = await anyio.to_thread.run_sync(next, self.events, None, abandon_on_cancel=True)
            if event is None:
                event = Failed("the answer ended without a word from the engine")
            if not isinstance(event, Queued | Reading):
                self.finished = isinstance(event, Done | Failed)
                return event

    async def first(self) -> Event:
        try:
            return await self.next()
        except BaseException:
            self.ctx.engine.cancel(self.ticket)  # the client left while waiting
            raise

    async def whole(self, event: Event) -> dict[str, Any]:
        text = ""
        while isinstance(event, Token):
            text += event.text
            event = await self.next()
        if isinstance(event, Failed):
            raise api_error(event)
        assert isinstance(event, Done)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = _finish(event)
        if self.tool_plan is not None:
            content, calls = reply(text, self.tool_plan)
            message = {"role": "assistant", "content": content} | ({"tool_calls": calls} if calls else {})
            finish = "tool_calls" if calls else finish
        return {
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(event),
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        data = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    async def sse(self, event: Event, include_usage: bool) -> AsyncIterator[str]:
        try:
            yield self.chunk({"role": "assistant", "content": ""})
            text = ""
            while isinstance(event, Token):
                text += event.text
                if self.tool_plan is None:  # with tools, the answer is JSON: it is told once it is whole
                    yield self.chunk({"content": event.text})
                event = await self.next()
            if isinstance(event, Failed):
                yield f"data: {json.dumps(api_error(event).body())}\n\n"
            elif isinstance(event, Done):
                finish = _finish(event)
                if self.tool_plan is not None:
                    content, calls = reply(text, self.tool_plan)
                    for delta in _tool_deltas(content, calls):
                        yield self.chunk(delta)
                    finish = "tool_calls" if calls else finish
                yield self.chunk({}, finish)
                if include_usage:
                    usage = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                             "model": self.model, "choices": [], "usage": _usage(event)}
                    yield f"data: {json.dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            if not self.finished:
                self.ctx.engine.cancel(self.ticket)  # the client went away mid-answer


def _tool_deltas(content: str | None, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Deltas as OpenAI streams them: each call opened with its id and name, then its arguments."""
    if not calls:
        return [{"content": content or ""}]
    deltas = []
    for index, call in enumerate(calls):
        function = call["function"]
        deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                       "function": {"name": function["name"], "arguments": ""}}]})
        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]})
    return deltas


def _finish(done: Done) -> str:
    return "length" if done.stats.finish_reason == "length" else "stop"


def _usage(done: Done) -> dict[str, Any]:
    s = done.stats
    return {"prompt_tokens": s.prompt_tokens, "completion_tokens": s.generated_tokens,
            "total_tokens": s.prompt_tokens + s.generated_tokens,
            "prompt_tokens_details": {"cached_tokens": s.cached_tokens}}  # KV a slot already held
