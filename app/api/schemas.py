"""The request bodies of the OpenAI-compatible API, and their translation to engine requests."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.engine.events import GenerationRequest, Message


class ApiError(Exception):
    """An error in OpenAI's shape: HTTP status, type, code, message."""

    def __init__(self, status: int, message: str, *, type_: str, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.type, self.code, self.param = status, type_, code, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            parts = [p.get("text", "") for p in self.content if p.get("type") == "text"]
            if len(parts) != len(self.content):
                raise ApiError(400, "only text content parts are supported", type_="invalid_request_error",
                               param="messages")
            return "".join(parts)
        return self.content or ""


class ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # unknown OpenAI options are accepted and ignored
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

    def to_engine(self, *, default_max_tokens: int, default_temperature: float) -> GenerationRequest:
        if self.n != 1:
            raise ApiError(400, "n > 1 is not supported", type_="invalid_request_error", param="n")
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return GenerationRequest(
            messages=tuple(
                Message("system" if m.role == "developer" else m.role, m.text()) for m in self.messages
            ),
            max_tokens=self.max_completion_tokens or self.max_tokens or default_max_tokens,
            temperature=default_temperature if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            stop=tuple(s for s in stops if s),
            seed=self.seed,
            json_schema=self._schema(),
        )

    def _schema(self) -> str | None:
        fmt = self.response_format
        if fmt is None or fmt.type == "text":
            return None
        if fmt.type == "json_object":
            return json.dumps({"type": "object"})
        schema = (fmt.json_schema or {}).get("schema")
        if not isinstance(schema, dict):
            raise ApiError(400, "response_format.json_schema.schema must be a JSON schema object",
                           type_="invalid_request_error", param="response_format")
        return json.dumps(schema)


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    input: str | list[str] = Field(min_length=1)
    encoding_format: Literal["float", "base64"] = "float"
