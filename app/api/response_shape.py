"""What the Responses API sends for one answer: a `response` object whole, or OpenAI's stream of events
(response.created, response.output_item.added, response.output_text.delta, ..., response.completed;
a function call as its item with `function_call_arguments` events). Pure but for `remember`, called with
the finished response so that a later `previous_response_id` can continue it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from app.api import errors
from app.api.tools import ToolPlan, reply
from app.engine.events import Done, Token, TokenLogprob
from app.errors import QuartetError


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class ResponseShape:
    named_events = True

    def __init__(
        self, echo: dict[str, Any], tool_plan: ToolPlan | None, remember: Callable[[dict[str, Any]], None]
    ) -> None:
        self.echo, self.tool_plan, self.remember = echo, tool_plan, remember  # echo: the request's settings
        self.id, self.created = _id("resp"), int(time.time())
        self.text, self.sequence = "", 0
        self.message_id = _id("msg")
        self.words = tool_plan.words() if tool_plan is not None else None
        self.speaking = tool_plan is None  # the message item is open (its text streams)

    def response(self, status: str, output: list[dict[str, Any]], done: Done | None = None) -> dict[str, Any]:
        body = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "output": output,
            "usage": _usage(done) if done is not None else None,
        } | self.echo
        if done is not None and done.stats.finish_reason == "length":
            body |= {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
        return body

    def whole(self, text: str, logprobs: list[TokenLogprob], done: Done) -> dict[str, Any]:
        self.text = text
        return self._finished(done)

    def opening(self) -> list[dict[str, Any]]:
        created = self.response("in_progress", [])
        events = [
            self._event("response.created", response=created),
            self._event("response.in_progress", response=created),
        ]
        return events + (self._open_message() if self.speaking else [])

    def token(self, token: Token) -> list[dict[str, Any]]:
        self.text += token.text
        if self.tool_plan is None:
            return [self._delta(token.text)]
        piece = self.words.feed(token.text) if self.words is not None else ""
        if not piece:
            return []
        opened = [] if self.speaking else self._open_message()
        self.speaking = True
        return [*opened, self._delta(piece)]

    def closing(self, done: Done) -> list[dict[str, Any]]:
        final = self._finished(done)
        events: list[dict[str, Any]] = []
        for index, item in enumerate(final["output"]):
            if item["type"] == "message":
                events += self._close_message(item)
            else:
                events += self._function_call_events(index, item)
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return [*events, self._event(kind, response=final)]

    def usage_chunk(self, done: Done) -> dict[str, Any]:
        return self._event("response.completed", response=self._finished(done))

    def failed(self, err: QuartetError) -> dict[str, Any]:
        failed = self.response("failed", []) | {"error": {"code": "server_error", "message": err.message}}
        return self._event("response.failed", response=failed) | errors.body(err)

    def _finished(self, done: Done) -> dict[str, Any]:
        content, calls = (self.text, []) if self.tool_plan is None else reply(self.text, self.tool_plan)
        output: list[dict[str, Any]] = []
        if content or not calls:
            part = {"type": "output_text", "text": content or "", "annotations": [], "logprobs": []}
            output.append(
                {
                    "id": self.message_id,
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [part],
                }
            )
        for call in calls:
            function = call["function"]
            output.append(
                {
                    "id": _id("fc"),
                    "type": "function_call",
                    "status": "completed",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function["arguments"],
                }
            )
        final = self.response("completed", output, done)
        self.remember(final)
        return final

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.sequence += 1
        return {"type": kind, "sequence_number": self.sequence - 1, **fields}

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.message_id, "output_index": 0, "content_index": 0}

    def _open_message(self) -> list[dict[str, Any]]:
        item = {"id": self.message_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return [
            self._event("response.output_item.added", output_index=0, item=item),
            self._event("response.content_part.added", part=part, **self._where()),
        ]

    def _delta(self, text: str) -> dict[str, Any]:
        return self._event("response.output_text.delta", delta=text, logprobs=[], **self._where())

    def _close_message(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        part = item["content"][0]
        events = [] if self.speaking else self._open_message()
        sent = self.words.sent if self.words is not None and self.words.speaking else self.text
        rest = part["text"][len(sent) :] if self.tool_plan is not None else ""
        events += [self._delta(rest)] if rest else []
        return [
            *events,
            self._event("response.output_text.done", text=part["text"], logprobs=[], **self._where()),
            self._event("response.content_part.done", part=part, **self._where()),
            self._event("response.output_item.done", output_index=0, item=item),
        ]

    def _function_call_events(self, index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
        where = {"item_id": item["id"], "output_index": index}
        return [
            self._event(
                "response.output_item.added", output_index=index, item=item | {"arguments": "", "status": "in_progress"}
            ),
            self._event("response.function_call_arguments.delta", delta=item["arguments"], **where),
            self._event(
                "response.function_call_arguments.done", arguments=item["arguments"], name=item["name"], **where
            ),
            self._event("response.output_item.done", output_index=index, item=item),
        ]


def _usage(done: Done) -> dict[str, Any]:
    s = done.stats
    return {
        "input_tokens": s.prompt_tokens,
        "input_tokens_details": {"cached_tokens": s.cached_tokens},
        "output_tokens": s.generated_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "quartet": {"drafted_tokens": s.drafted_tokens, "accepted_tokens": s.accepted_tokens, "steps": s.steps},
        "total_tokens": s.prompt_tokens + s.generated_tokens,
    }


def conversation(final: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished response's output as input items, for the next turn of its conversation."""
    items: list[dict[str, Any]] = []
    for item in final["output"]:
        if item["type"] == "message":
            items.append({"type": "message", "role": "assistant", "content": item["content"][0]["text"]})
        else:
            items.append({k: item[k] for k in ("type", "call_id", "name", "arguments")})
    return items
