"""One answer followed from the engine's queue to a `/v1` client, in the shape of its route: whole, or
as the events of a stream. A client that goes away, streamed or not, cancels its answer (its slot is freed
within a step)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, format_sse_event

from app.api import exact
from app.context import AppContext
from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, Queued, Reading, Token, TokenLogprob
from app.engine.follow import follow
from app.engine.ticket import Ticket
from app.errors import QuartetError


class Shape(Protocol):
    """What a route sends for one answer (app/api/answers.py, app/api/response_shape.py)."""

    named_events: bool  # SSE events carry `event: <type>` and no closing [DONE] (the Responses API)

    def whole(self, text: str, logprobs: list[TokenLogprob], done: Done) -> dict[str, Any]: ...
    def opening(self) -> list[dict[str, Any]]: ...
    def token(self, token: Token) -> list[dict[str, Any]]: ...
    def closing(self, done: Done) -> list[dict[str, Any]]: ...
    def usage_chunk(self, done: Done) -> dict[str, Any]: ...
    def failed(self, err: QuartetError) -> dict[str, Any]: ...


def failure(event: Failed) -> QuartetError:
    """An answer's end as an error (of its kind), for the one translation in app/api/errors.py."""
    return QuartetError(event.message, kind=event.kind, card=event.card)


class Answer:
    """One answer followed from the engine's queue to the client, in the shape of its route."""

    def __init__(self, ctx: AppContext, ticket: Ticket, shape: Shape, request: GenerationRequest) -> None:
        self.ctx, self.ticket, self.shape = ctx, ticket, shape
        self.schema, self.tools = exact.schema_of(request), request.tools is not None  # checked once whole
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

    async def whole(self, event: Event, request: Request) -> dict[str, Any]:
        """The answer collected whole; the client's leaving meanwhile cancels it (a non-streaming client that
        times out would otherwise hold its slot until max_tokens)."""
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as group:

            async def collect() -> None:
                try:
                    result["body"] = await self._collect(event)
                except QuartetError as err:  # raised here, a task group would wrap it (a bare 500)
                    result["error"] = err
                group.cancel_scope.cancel()

            async def watch() -> None:
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                self.ctx.engine.cancel(self.ticket)
                group.cancel_scope.cancel()

            group.start_soon(collect)
            group.start_soon(watch)
        if "error" in result:
            raise result["error"]
        if "body" not in result:
            raise QuartetError("the client went away; its answer was cancelled", kind="cancelled")
        return result["body"]

    async def _collect(self, event: Event) -> dict[str, Any]:
        text, logprobs = "", list[TokenLogprob]()
        while isinstance(event, Token):
            text += event.text
            logprobs += event.logprobs
            event = await self.next()
        if isinstance(event, Failed):
            raise failure(event)
        assert isinstance(event, Done)
        exact.check(text, event, self.schema, tools=self.tools)
        return self.shape.whole(text, logprobs, event)

    async def sse(self, event: Event, include_usage: bool) -> AsyncIterator[bytes]:
        try:
            for data in self.shape.opening():
                yield self._frame(data)
            text = ""
            while isinstance(event, Token):
                text += event.text
                for data in self.shape.token(event):
                    yield self._frame(data)
                event = await self.next()
            if isinstance(event, Failed):
                yield self._frame(self.shape.failed(failure(event)))
            elif isinstance(event, Done):
                try:
                    exact.check(text, event, self.schema, tools=self.tools)
                    closing = self.shape.closing(event) + ([self.shape.usage_chunk(event)] if include_usage else [])
                except QuartetError as err:  # its tool calls never went out; its words did, and end in this
                    closing = [self.shape.failed(err)]
                for data in closing:  # the last chunk: usage, no choices
                    yield self._frame(data)
            if not self.shape.named_events:
                yield format_sse_event(data_str="[DONE]")
        finally:
            if not self.finished:
                self.ctx.engine.cancel(self.ticket)  # the client went away mid-answer

    def _frame(self, data: dict[str, Any]) -> bytes:
        event = str(data["type"]) if self.shape.named_events and "type" in data else None
        return format_sse_event(data_str=json.dumps(data, ensure_ascii=False), event=event)


async def respond(
    ctx: AppContext, request: GenerationRequest, shape: Shape, *, stream: bool, include_usage: bool, client: Request
) -> JSONResponse | EventSourceResponse:
    """Submit `request` and answer it in `shape`: a stream, or the whole answer; a failure before the first
    token is raised (a real status), one after it is the stream's last event."""
    try:
        ticket = ctx.engine.submit(request)
    except EngineError as err:
        waiting = ctx.engine.status().queue.waiting
        if err.kind == "busy" and waiting:
            raise QuartetError(f"{err.message} (queue position would be {waiting + 1})", kind="busy") from err
        raise
    followed = Answer(ctx, ticket, shape, request)
    first = await followed.first()
    if isinstance(first, Failed):
        raise failure(first)
    if stream:
        return EventSourceResponse(followed.sse(first, include_usage))
    return JSONResponse(await followed.whole(first, client))
