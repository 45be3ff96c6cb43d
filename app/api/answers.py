"""What the API sends for one answer, in OpenAI's shapes: a chat completion or a text completion, whole
or as the chunks of a stream. Pure: the engine's events in, JSON-ready dicts out."""

from __future__ import annotations

from typing import Any

from app.api import errors
from app.api.tools import ToolPlan, reply
from app.engine.events import Done, Token, TokenLogprob
from app.errors import QuartetError


class ChatShape:
    """A chat completion (`chat.completion`, or `chat.completion.chunk` events when streamed)."""

    named_events = False

    def __init__(self, head: dict[str, Any], tool_plan: ToolPlan | None, *, logprobs: bool) -> None:
        self.head, self.tool_plan, self.logprobs = head, tool_plan, logprobs
        self.text = ""
        self.words = tool_plan.words() if tool_plan is not None else None

    def whole(self, text: str, logprobs: list[TokenLogprob], done: Done) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = finish_reason(done)
        if self.tool_plan is not None:
            content, calls = reply(text, self.tool_plan)
            message = {"role": "assistant", "content": content} | ({"tool_calls": calls} if calls else {})
            finish = "tool_calls" if calls else finish
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": finish,
            "logprobs": {"content": chat_logprobs(logprobs)} if self.logprobs else None,
        }
        return self.head | {"object": "chat.completion", "choices": [choice], "usage": usage(done)}

    def opening(self) -> list[dict[str, Any]]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def token(self, token: Token) -> list[dict[str, Any]]:
        self.text += token.text
        if self.tool_plan is None:
            return [self._chunk({"content": token.text}, logprobs=token.logprobs)]
        piece = self.words.feed(token.text) if self.words is not None else ""  # tool calls: sent once whole
        return [self._chunk({"content": piece})] if piece else []

    def closing(self, done: Done) -> list[dict[str, Any]]:
        finish = finish_reason(done)
        chunks = []
        if self.tool_plan is not None:
            content, calls = reply(self.text, self.tool_plan)
            sent = self.words.sent if self.words is not None and self.words.speaking else ""
            deltas = _tool_deltas(calls) if calls else [{"content": (content or "")[len(sent) :]}]
            chunks = [self._chunk(delta) for delta in deltas if delta != {"content": ""}]
            finish = "tool_calls" if calls else finish
        return [*chunks, self._chunk({}, finish)]

    def failed(self, err: QuartetError) -> dict[str, Any]:
        return errors.body(err)

    def usage_chunk(self, done: Done) -> dict[str, Any]:
        return self.head | {"object": "chat.completion.chunk", "choices": [], "usage": usage(done)}

    def _chunk(
        self, delta: dict[str, Any], finish: str | None = None, logprobs: tuple[TokenLogprob, ...] = ()
    ) -> dict[str, Any]:
        choice = {
            "index": 0,
            "delta": delta,
            "finish_reason": finish,
            "logprobs": {"content": chat_logprobs(logprobs)} if self.logprobs and logprobs else None,
        }
        return self.head | {"object": "chat.completion.chunk", "choices": [choice]}


class CompletionShape:
    """A text completion (`text_completion`, whole or as chunks); `echo` puts the prompt before the answer."""

    named_events = False

    def __init__(self, head: dict[str, Any], *, echo: str | None, logprobs: bool) -> None:
        self.head, self.echo, self.logprobs = head, echo, logprobs
        self.offset = 0  # characters sent so far (the legacy logprobs give each token's text offset)

    def whole(self, text: str, logprobs: list[TokenLogprob], done: Done) -> dict[str, Any]:
        lead = self.echo or ""
        choice = {
            "index": 0,
            "text": lead + text,
            "finish_reason": finish_reason(done),
            "logprobs": legacy_logprobs(logprobs, len(lead)) if self.logprobs else None,
        }
        return self.head | {"object": "text_completion", "choices": [choice], "usage": usage(done)}

    def opening(self) -> list[dict[str, Any]]:
        if not self.echo:
            return []
        self.offset = len(self.echo)
        return [self._chunk(self.echo)]

    def token(self, token: Token) -> list[dict[str, Any]]:
        chunk = self._chunk(token.text, logprobs=legacy_logprobs(list(token.logprobs), self.offset))
        self.offset += len(token.text)
        return [chunk]

    def closing(self, done: Done) -> list[dict[str, Any]]:
        return [self._chunk("", finish_reason(done))]

    def failed(self, err: QuartetError) -> dict[str, Any]:
        return errors.body(err)

    def usage_chunk(self, done: Done) -> dict[str, Any]:
        return self.head | {"object": "text_completion", "choices": [], "usage": usage(done)}

    def _chunk(self, text: str, finish: str | None = None, logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
        choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": logprobs if self.logprobs else None}
        return self.head | {"object": "text_completion", "choices": [choice]}


Shape = ChatShape | CompletionShape


def chat_logprobs(entries: tuple[TokenLogprob, ...] | list[TokenLogprob]) -> list[dict[str, Any]]:
    """choices[].logprobs.content: each token with its log-probability, bytes and likeliest alternatives."""
    return [
        {
            "token": e.token,
            "logprob": e.logprob,
            "bytes": list(e.bytes),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(b)} for t, lp, b in e.top],
        }
        for e in entries
    ]


def legacy_logprobs(entries: list[TokenLogprob], offset: int) -> dict[str, Any]:
    """The completions API's logprobs: parallel lists, alternatives as {token: logprob}, text offsets."""
    offsets = []
    for entry in entries:
        offsets.append(offset)
        offset += len(entry.token)
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{t: lp for t, lp, _ in e.top} for e in entries],
        "text_offset": offsets,
    }


def _tool_deltas(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Deltas as OpenAI streams them: each call opened with its id and name, then its arguments."""
    deltas = []
    for index, call in enumerate(calls):
        function = call["function"]
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": function["name"], "arguments": ""},
                    }
                ]
            }
        )
        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]})
    return deltas


def finish_reason(done: Done) -> str:
    return "length" if done.stats.finish_reason == "length" else "stop"


def usage(done: Done) -> dict[str, Any]:
    s = done.stats
    return {
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.generated_tokens,
        "total_tokens": s.prompt_tokens + s.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": s.cached_tokens},  # KV a slot already held
        # OpenAI's field for predicted outputs, as vLLM fills it for its speculative decoding; `quartet` extras
        "completion_tokens_details": {
            "accepted_prediction_tokens": s.accepted_tokens,
            "rejected_prediction_tokens": s.drafted_tokens - s.accepted_tokens,
        },
        "quartet": {"drafted_tokens": s.drafted_tokens, "accepted_tokens": s.accepted_tokens, "steps": s.steps},
    }
