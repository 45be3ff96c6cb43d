"""The request bodies of the OpenAI-compatible API, and their translation to engine requests."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api import tools as calling
from app.api.errors import ApiError
from app.engine.events import GenerationRequest, Message, Role
from app.valid_text import valid_values


class RequestBody(BaseModel):
    """A request's body: every string in it (texts, names, schemas, tools) made valid Unicode once, before
    the fields are read: a lone surrogate becomes U+FFFD (app/valid_text.py)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_text(cls, data: Any) -> Any:
        return valid_values(data)


# How many items a request may carry, checked before any of them is read: a conversation of 100,000 tiny
# messages is small in bytes but costs the chat template and the tokenizer minutes. OpenAI takes at most 128
# tools; no real conversation nears 4,096 turns (a long agent session has a few hundred).
MAX_MESSAGES = 4096  # chat messages, or Responses input items (with the earlier turns they continue)
MAX_PARTS = 256  # content parts of one message
MAX_TOOLS = 128


def refuse_long_lists(data: Any, limits: dict[str, int]) -> Any:
    """Refuse (400, naming the field) a request body whose list fields are longer than `limits` allows, before
    pydantic reads their items."""
    if isinstance(data, dict):
        for name, limit in limits.items():
            given = data.get(name)
            if isinstance(given, list) and len(given) > limit:
                raise ApiError(f"{name}: {len(given):,} items; at most {limit:,} are taken", param=name)
    return data


class OpenAIBody(RequestBody):
    """A request body as OpenAI takes it: its text made valid (RequestBody), and an explicit `null` for an
    optional field means "not given"."""

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_absent(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None  # an assistant's earlier calls
    tool_call_id: str | None = None  # a tool message: the call it answers
    name: str | None = None

    def for_model(self) -> Message:
        """This message as the model reads it: tool calls and results written out as text."""
        if self.role == "tool":
            return Message("user", f"Result of tool call {self.tool_call_id or ''} {self.name or ''}:\n{self.text()}")
        if self.role == "assistant" and self.tool_calls:
            return Message("assistant", calling.as_text(self.tool_calls))
        return Message("system" if self.role == "developer" else self.role, self.text())

    def text(self) -> str:
        if isinstance(self.content, list):
            parts = [p.get("text", "") for p in self.content if p.get("type") == "text"]
            if len(parts) != len(self.content):
                raise ApiError("only text content parts are supported", param="messages")
            return "".join(parts)
        return self.content or ""


class ResponseFormat(OpenAIBody):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class StreamOptions(OpenAIBody):
    include_usage: bool = False


# Known OpenAI options that would change the answer's meaning and that the appliance cannot honour:
# refused by name rather than silently dropped. Any other unknown option is ignored.
UNSUPPORTED = ("logit_bias", "functions", "function_call", "audio", "prediction")


class ChatRequest(OpenAIBody):
    model_config = ConfigDict(extra="allow")  # unknown OpenAI options are accepted and ignored

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        refuse_long_lists(data, {"messages": MAX_MESSAGES, "tools": MAX_TOOLS})
        messages = data.get("messages") if isinstance(data, dict) else None
        for index, message in enumerate(messages if isinstance(messages, list) else []):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list) and len(content) > MAX_PARTS:
                raise ApiError(
                    f"messages[{index}].content: {len(content):,} parts; at most {MAX_PARTS:,} are taken",
                    param="messages",
                )
        return data

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    seed: int | None = None
    n: int = 1
    tools: list[calling.Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)

    def refuse_unsupported(self) -> None:
        refuse_unsupported(self.n, self.model_extra, UNSUPPORTED)
        if self.top_logprobs and not self.logprobs:
            raise ApiError("top_logprobs needs logprobs: true", param="top_logprobs")
        if self.logprobs and self.tools and self.tool_choice != "none":
            raise ApiError(
                "logprobs cannot be combined with tools here (the tokens would be those of the "
                "calls' JSON): leave one of them out",
                param="logprobs",
            )

    def logprobs_wanted(self) -> int | None:
        """None: no log-probabilities; else each token's, with this many alternatives."""
        return (self.top_logprobs or 0) if self.logprobs else None

    def tool_plan(self) -> calling.ToolPlan | None:
        """The tools' plan; under `auto` an answer that does not call meets the request's format, if it has one
        (the Agents SDK's `output_type`: a call or the typed answer). A forced call answers in calls only."""
        return calling.plan(self.tools, self.tool_choice, parallel=self.parallel_tool_calls, answer=self._format())

    def to_engine(
        self, *, default_max_tokens: int, default_temperature: float, tool_plan: calling.ToolPlan | None = None
    ) -> GenerationRequest:
        self.refuse_unsupported()
        messages = [m.for_model() for m in self.messages]
        if tool_plan is not None:
            messages.insert(0, Message("system", tool_plan.instruction))
            where = "tools and response_format (their schemas together)" if tool_plan.typed else "tools"
            calling.affordable(tool_plan.schema, where=f"{where} (the answer's whole schema)", param="tools")
        schema = tool_plan.schema if tool_plan is not None else self._format()
        return GenerationRequest(
            messages=_alternating(messages),
            max_tokens=self.max_completion_tokens or self.max_tokens or default_max_tokens,
            temperature=default_temperature if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            stop=_stops(self.stop),
            seed=self.seed,
            json_schema=json.dumps(schema) if schema is not None else None,
            logprobs=self.logprobs_wanted(),
            tools=tool_plan.tools_json if tool_plan is not None else None,
            tools_text=tool_plan.listing if tool_plan is not None else "",
        )

    def _format(self) -> dict[str, Any] | None:
        """The schema `response_format` asks the answer to meet (None: free text)."""
        fmt = self.response_format
        if fmt is None or fmt.type == "text":
            return None
        if fmt.type == "json_object":
            return {"type": "object"}
        schema = (fmt.json_schema or {}).get("schema")
        if not isinstance(schema, dict):
            raise ApiError(
                "response_format.json_schema.schema must be a JSON schema object",
                param="response_format",
            )
        calling.affordable(schema, where="response_format.json_schema.schema", param="response_format")
        return schema


def refuse_unsupported(n: int, extra: dict[str, Any] | None, unsupported: tuple[str, ...]) -> None:
    """400 naming what the appliance cannot honour: n other than 1, or any of `unsupported` given a value."""
    if n > 1:
        raise ApiError("n > 1 is not supported: send one request per answer", param="n")
    if n != 1:
        raise ApiError(f"n must be 1 (one answer per request), not {n}", param="n")
    given = [name for name in unsupported if (extra or {}).get(name) not in (None, False, {}, [], "")]
    if given:
        raise ApiError(
            f"{', '.join(given)}: not supported by this appliance (leave it out)",
            param=given[0],
        )


def _stops(stop: str | list[str] | None) -> tuple[str, ...]:
    return tuple(s for s in ([stop] if isinstance(stop, str) else list(stop or [])) if s)


def _alternating(messages: list[Message]) -> tuple[Message, ...]:
    """Neighbours of the same role joined into one (system messages first): chat templates such as
    Gemma's refuse two user turns in a row, which tool results would otherwise make. (Each run is joined
    once: adding to a growing string message by message costs the square of a long conversation.)"""
    system = [m.content for m in messages if m.role == "system"]
    runs: list[tuple[Role, list[str]]] = [("system", system)] if system else []
    for message in (m for m in messages if m.role != "system"):
        if runs and runs[-1][0] == message.role:
            runs[-1][1].append(message.content)
        else:
            runs.append((message.role, [message.content]))
    return tuple(Message(role, "\n\n".join(texts)) for role, texts in runs)


class EmbeddingRequest(OpenAIBody):
    model_config = ConfigDict(extra="ignore")
    model: str
    input: str | list[str] | list[int] | list[list[int]] = Field(min_length=1)
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1)
    user: str | None = None


# Options of /v1/completions refused by name (as for chat); best_of > 1 and n > 1 are refused as well.
UNSUPPORTED_COMPLETION = ("logit_bias", "suffix")


class CompletionRequest(OpenAIBody):
    """A plain text completion (/v1/completions): the prompt is the model's input as written, no chat template."""

    model_config = ConfigDict(extra="allow")
    model: str
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    seed: int | None = None
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=5)
    n: int = 1
    best_of: int | None = None

    def token_ids(self) -> tuple[int, ...] | None:
        """The prompt as token ids of the model's vocabulary (`[ids]` or `[[ids]]`), or None for text."""
        given: list[Any] = [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)
        if given and all(isinstance(i, int) for i in given):
            return tuple(given)
        if len(given) == 1 and isinstance(given[0], list):
            return tuple(given[0])
        if any(isinstance(i, list) for i in given):
            raise ApiError(f"prompt is a list of {len(given)} token lists; send one prompt per request", param="prompt")
        return None

    def text(self) -> str:
        if isinstance(self.prompt, str):
            return self.prompt
        if self.token_ids() is not None:
            return ""
        if len(self.prompt) != 1:
            raise ApiError(
                f"prompt is a list of {len(self.prompt)} texts; send one prompt per request",
                param="prompt",
            )
        return str(self.prompt[0])

    def to_engine(self, *, default_max_tokens: int, default_temperature: float) -> GenerationRequest:
        refuse_unsupported(self.n, self.model_extra, UNSUPPORTED_COMPLETION)
        if self.best_of not in (None, 1):
            raise ApiError(
                "best_of > 1 is not supported: send one request per answer",
                param="best_of",
            )
        if self.echo and self.logprobs is not None:
            raise ApiError(
                "echo with logprobs is not supported (the prompt's own log-probabilities are not "
                "computed): leave one of them out",
                param="echo",
            )
        prompt, ids = self.text(), self.token_ids()
        if not prompt and not ids:
            raise ApiError("prompt is empty", param="prompt")
        if ids is not None and self.echo:
            raise ApiError("echo with a prompt of token ids is not supported: send the prompt as text", param="echo")
        return GenerationRequest(
            messages=(),
            prompt=prompt,
            prompt_ids=ids,
            max_tokens=self.max_tokens or default_max_tokens,
            temperature=default_temperature if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            stop=_stops(self.stop),
            seed=self.seed,
            logprobs=self.logprobs,
        )
