"""The Responses API's request (`POST /v1/responses`) and its translation to a chat request, so that it
runs on the same engine path as /v1/chat/completions: the same tool plans, grammar and chat templates.

`input` is text or items — messages, `function_call`s and `function_call_output`s — read as the chat
messages they stand for; `instructions` is a system message; a `previous_response_id`'s conversation is
put before them (app/api/response_store.py keeps it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from app.api.errors import ApiError
from app.api.request_models import (
    MAX_MESSAGES,
    MAX_PARTS,
    MAX_TOOLS,
    ChatMessage,
    ChatRequest,
    OpenAIBody,
    ResponseFormat,
    refuse_long_lists,
)
from app.api.tools import Tool, ToolFunction

# Options that would change the answer's meaning and that the appliance cannot honour: refused by name.
UNSUPPORTED = ("prompt", "conversation", "background")
_TEXT_PARTS = ("input_text", "output_text", "text")


class ResponseTool(OpenAIBody):
    model_config = ConfigDict(extra="allow")
    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class TextFormat(OpenAIBody):
    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class TextOptions(OpenAIBody):
    model_config = ConfigDict(extra="allow")
    format: TextFormat | None = None


class ResponsesRequest(OpenAIBody):
    model_config = ConfigDict(extra="allow")  # unknown options (store, metadata, include...) are ignored

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        return refuse_long_lists(data, {"input": MAX_MESSAGES, "tools": MAX_TOOLS})

    model: str
    input: str | list[dict[str, Any]] = Field(min_length=1)
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    stream: bool | None = False
    tools: list[ResponseTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    text: TextOptions | None = None

    def chat(self, earlier: list[ChatMessage]) -> ChatRequest:
        """This request as the chat request it stands for, after the conversation `earlier` (may be empty)."""
        given = [name for name in UNSUPPORTED if (self.model_extra or {}).get(name) not in (None, False, {}, [], "")]
        if given:
            raise ApiError(f"{', '.join(given)}: not supported by this appliance (leave it out)", param=given[0])
        system = [ChatMessage(role="system", content=self.instructions)] if self.instructions else []
        return ChatRequest(
            model=self.model,
            messages=[*system, *earlier, *self.messages()],
            max_tokens=self.max_output_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            tools=self.chat_tools(),
            tool_choice=self.chat_tool_choice(),
            parallel_tool_calls=True if self.parallel_tool_calls is None else self.parallel_tool_calls,
            response_format=self.response_format(),
        )

    def messages(self) -> list[ChatMessage]:
        if isinstance(self.input, str):
            return [ChatMessage(role="user", content=self.input)]
        return as_messages(self.input)

    def chat_tools(self) -> list[Tool] | None:
        if not self.tools:
            return None
        tools = []
        for index, tool in enumerate(self.tools):
            if tool.type != "function" or not tool.name:
                raise ApiError(
                    f"tools[{index}]: only function tools are supported here (this one is {tool.type!r})",
                    param="tools",
                )
            parameters = tool.parameters or {"type": "object", "properties": {}}
            tools.append(
                Tool(function=ToolFunction(name=tool.name, description=tool.description or "", parameters=parameters))
            )
        return tools

    def chat_tool_choice(self) -> str | dict[str, Any] | None:
        choice = self.tool_choice
        if isinstance(choice, dict):
            if choice.get("type") != "function" or not choice.get("name"):
                raise ApiError(
                    "tool_choice must be 'auto', 'none', 'required' or {type: function, name}", param="tool_choice"
                )
            return {"type": "function", "function": {"name": choice["name"]}}
        return choice

    def response_format(self) -> ResponseFormat | None:
        fmt = self.text.format if self.text is not None else None
        if fmt is None or fmt.type == "text":
            return None
        if fmt.type == "json_object":
            return ResponseFormat(type="json_object")
        if not isinstance(fmt.schema_, dict):
            raise ApiError("text.format.schema must be a JSON schema object", param="text")
        return ResponseFormat(type="json_schema", json_schema={"name": fmt.name or "answer", "schema": fmt.schema_})


def as_messages(items: list[dict[str, Any]]) -> list[ChatMessage]:
    """Input items as chat messages; a run of function calls is one assistant turn, as the model wrote it."""
    messages: list[ChatMessage] = []
    for index, item in enumerate(items):
        message = _message(item, index)
        if message is None:
            continue
        previous = messages[-1] if messages else None
        if message.tool_calls and previous is not None and previous.tool_calls and not previous.content:
            previous.tool_calls.extend(message.tool_calls)  # parallel calls: one assistant turn
        else:
            messages.append(message)
    return messages


def _message(item: dict[str, Any], index: int) -> ChatMessage | None:
    """One input item as a chat message (None: an item with nothing for the model, such as reasoning)."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in ("system", "developer", "user", "assistant"):
            raise ApiError(
                f"input[{index}]: a message's role must be system, developer, user or assistant", param="input"
            )
        return ChatMessage(role=role, content=_text(item.get("content"), index))
    if kind == "function_call":
        call = {"id": item.get("call_id") or item.get("id"), "type": "function"}
        call["function"] = {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}
        return ChatMessage(role="assistant", content=None, tool_calls=[call])
    if kind == "function_call_output":
        output = item.get("output")
        return ChatMessage(role="tool", tool_call_id=item.get("call_id"), content=_text(output, index))
    if kind == "reasoning":
        return None
    raise ApiError(f"input[{index}]: items of type {kind!r} are not supported here", param="input")


def _text(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        if len(content) > MAX_PARTS:
            raise ApiError(
                f"input[{index}].content: {len(content):,} parts; at most {MAX_PARTS:,} are taken", param="input"
            )
        parts = [p for p in content if isinstance(p, dict)]
        if len(parts) != len(content) or any(p.get("type") not in _TEXT_PARTS for p in parts):
            raise ApiError(f"input[{index}]: only text content parts are supported", param="input")
        return "".join(str(p.get("text", "")) for p in parts)
    raise ApiError(f"input[{index}]: content must be text or a list of text parts", param="input")
