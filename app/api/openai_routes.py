"""The OpenAI-compatible API under /v1, sharing the engine's queue with the UI.

Errors are raised as they are (a `QuartetError`) and turned into OpenAI's status and body in one place,
app/api/errors.py. A streaming answer's status is decided by its first event, so a request that fails
before any token still gets a real status.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, format_sse_event

from app.api import errors
from app.api.answers import ChatShape, CompletionShape, Shape
from app.api.errors import ApiError
from app.api.gate import key_allowed, key_refused
from app.api.request_models import ChatRequest, CompletionRequest, EmbeddingRequest, StreamOptions
from app.context import AppContext
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, Queued, Reading, Token, TokenLogprob
from app.engine.follow import follow
from app.engine.ticket import Ticket
from app.errors import QuartetError


def model_id(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")


def failure(event: Failed) -> QuartetError:
    """An answer's end as an error (of its kind), for the one translation in app/api/errors.py."""
    return QuartetError(event.message, kind=event.kind, card=event.card)


def require_key(request: Request, keys: list[str]) -> None:
    """401 in OpenAI's shape unless the request carries one of `keys` as its Bearer token (none set: open).
    Under /v1 the gate (app/api/gate.py) has checked it already, before the body was read."""
    if not key_allowed(request.headers.get("authorization", ""), keys):
        raise key_refused()


def build_router(ctx: AppContext) -> APIRouter:
    def authorised(request: Request) -> None:
        require_key(request, ctx.settings.web.api_keys)

    router = APIRouter(prefix="/v1", dependencies=[Depends(authorised)])

    def served() -> str:
        """The id of the model loaded now (read per request: an admin may have switched it)."""
        return model_id(ctx.engine.loaded()[0])

    @router.get("/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": served(), "object": "model", "created": 0, "owned_by": "quartet"}]}

    @router.get("/models/{name}")
    def model(name: str) -> dict[str, Any]:
        served_now = served()
        if name != served_now:
            raise ApiError(
                f"there is no model {name!r} here; this appliance serves {served_now!r}",
                kind="not_found",
                code="model_not_found",
                param="model",
            )
        return {"id": served_now, "object": "model", "created": 0, "owned_by": "quartet"}

    @router.post("/chat/completions", response_model=None)
    async def chat(body: ChatRequest) -> JSONResponse | EventSourceResponse:
        settings = ctx.settings
        tool_plan = body.tool_plan()
        request = body.to_engine(
            default_max_tokens=settings.engine.max_tokens,
            default_temperature=settings.engine.temperature,
            tool_plan=tool_plan,
        )
        shape = ChatShape(_head("chatcmpl", served()), tool_plan, logprobs=body.logprobs)
        return await answer(request, shape, stream=body.stream, options=body.stream_options)

    @router.post("/completions", response_model=None)
    async def completions(body: CompletionRequest) -> JSONResponse | EventSourceResponse:
        request = body.to_engine(
            default_max_tokens=ctx.settings.engine.max_tokens, default_temperature=ctx.settings.engine.temperature
        )
        shape = CompletionShape(
            _head("cmpl", served()), echo=request.prompt if body.echo else None, logprobs=body.logprobs is not None
        )
        return await answer(request, shape, stream=body.stream, options=body.stream_options)

    async def answer(
        request: GenerationRequest, shape: Shape, *, stream: bool, options: StreamOptions | None
    ) -> JSONResponse | EventSourceResponse:
        try:
            ticket = ctx.engine.submit(request)
        except EngineError as err:
            waiting = ctx.engine.status().queue.waiting
            if err.kind == "busy" and waiting:
                raise QuartetError(f"{err.message} (queue position would be {waiting + 1})", kind="busy") from err
            raise
        followed = _Answer(ctx, ticket, shape)
        first = await followed.first()
        if isinstance(first, Failed):
            raise failure(first)
        if stream:
            return EventSourceResponse(followed.sse(first, bool(options and options.include_usage)))
        return JSONResponse(await followed.whole(first))

    @router.post("/embeddings")
    def embeddings(body: EmbeddingRequest) -> dict[str, Any]:
        embed = ctx.embed
        if embed is None:
            raise QuartetError("no embedder is configured", kind="engine")
        texts = [body.input] if isinstance(body.input, str) else body.input
        _check_embedding_size(
            texts, max_inputs=ctx.settings.web.embed_max_inputs, max_chars=ctx.settings.web.embed_max_chars
        )
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
        raise ApiError(
            f"input has {len(texts)} texts; at most {max_inputs} per request: send them in batches", param="input"
        )
    chars = sum(len(text) for text in texts)
    if chars > max_chars:
        raise ApiError(
            f"input has {chars} characters; at most {max_chars} per request: send smaller batches", param="input"
        )


class _Answer:
    """One answer followed from the engine's queue to the client, in the shape of its route."""

    def __init__(self, ctx: AppContext, ticket: Ticket, shape: Shape) -> None:
        self.ctx, self.ticket, self.shape = ctx, ticket, shape
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
        text, logprobs = "", list[TokenLogprob]()
        while isinstance(event, Token):
            text += event.text
            logprobs += event.logprobs
            event = await self.next()
        if isinstance(event, Failed):
            raise failure(event)
        assert isinstance(event, Done)
        return self.shape.whole(text, logprobs, event)

    async def sse(self, event: Event, include_usage: bool) -> AsyncIterator[bytes]:
        try:
            for data in self.shape.opening():
                yield _sse(data)
            while isinstance(event, Token):
                for data in self.shape.token(event):
                    yield _sse(data)
                event = await self.next()
            if isinstance(event, Failed):
                yield _sse(errors.body(failure(event)))
            elif isinstance(event, Done):
                for data in self.shape.closing(event):
                    yield _sse(data)
                if include_usage:  # the last chunk: usage, no choices
                    yield _sse(self.shape.usage_chunk(event))
            yield format_sse_event(data_str="[DONE]")
        finally:
            if not self.finished:
                self.ctx.engine.cancel(self.ticket)  # the client went away mid-answer


def _sse(data: dict[str, Any]) -> bytes:
    return format_sse_event(data_str=json.dumps(data, ensure_ascii=False))


def _head(prefix: str, model: str) -> dict[str, Any]:
    return {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": model}
