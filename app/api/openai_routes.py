"""The OpenAI-compatible API under /v1, sharing the engine's queue with the UI.

Errors are raised as they are (a `QuartetError`) and turned into OpenAI's status and body in one place,
app/api/errors.py. A streaming answer's status is decided by its first event, so a request that fails
before any token still gets a real status.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import time
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse

from app.api.answers import ChatShape, CompletionShape
from app.api.errors import ApiError
from app.api.following import respond
from app.api.gate import Keys, key_refused
from app.api.model_names import EMBEDDER_NAMES, aliases, check, model_id
from app.api.preparing import off_loop, prepared
from app.api.request_models import ChatRequest, CompletionRequest, EmbeddingRequest, StreamOptions
from app.api.responses import add_routes as add_responses
from app.api.token_ids import decoded
from app.context import AppContext
from app.errors import QuartetError
from app.knowledge.long_texts import TooLong


def require_key(request: Request, keys: Keys) -> None:
    """401 in OpenAI's shape unless the request carries one of `keys` as its Bearer token (none set: open).
    Under /v1 the gate (app/api/gate.py) has checked it already, before the body was read."""
    if not keys.allows(request.headers.get("authorization", "")):
        raise key_refused()


def build_router(ctx: AppContext) -> APIRouter:
    def authorised(request: Request) -> None:
        require_key(request, ctx.api_keys)

    router = APIRouter(prefix="/v1", dependencies=[Depends(authorised)])

    def served() -> str:
        """The id of the model loaded now (read per request: an admin may have switched it)."""
        return model_id(ctx.engine.loaded()[0])

    @router.get("/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": served(), "object": "model", "created": 0, "owned_by": "quartet"}]}

    def answering(asked: str) -> str:
        """The id of the model that answers a request for `asked` (404 `model_not_found` for none)."""
        served_now = served()
        check(asked, aliases(ctx), served_now)
        return served_now

    @router.get("/models/{name}")
    def model(name: str) -> dict[str, Any]:
        return {"id": answering(name), "object": "model", "created": 0, "owned_by": "quartet"}

    @router.post("/chat/completions", response_model=None)
    async def chat(body: ChatRequest, http: Request) -> JSONResponse | EventSourceResponse:
        model = answering(body.model)
        tool_plan, request = await off_loop(lambda: prepared(body, ctx))
        shape = ChatShape(_head("chatcmpl", model), tool_plan, logprobs=body.logprobs)
        return await respond(
            ctx, request, shape, stream=body.stream, include_usage=_usage(body.stream_options), client=http
        )

    @router.post("/completions", response_model=None)
    async def completions(body: CompletionRequest, http: Request) -> JSONResponse | EventSourceResponse:
        model = answering(body.model)
        engine = ctx.settings.engine
        request = await off_loop(
            lambda: body.to_engine(
                default_max_tokens=ctx.settings.api_max_tokens(), default_temperature=engine.temperature
            )
        )
        shape = CompletionShape(
            _head("cmpl", model), echo=request.prompt if body.echo else None, logprobs=body.logprobs is not None
        )
        return await respond(
            ctx, request, shape, stream=body.stream, include_usage=_usage(body.stream_options), client=http
        )

    add_responses(router, ctx, answering)

    @router.post("/embeddings")
    def embeddings(body: EmbeddingRequest) -> dict[str, Any]:
        check(body.model, EMBEDDER_NAMES, "all-minilm-l6-v2")
        embed = ctx.embed
        if embed is None:
            raise QuartetError("no embedder is configured", kind="engine")
        texts = _texts(body.input)
        _check_embedding_size(
            texts, max_inputs=ctx.settings.web.embed_max_inputs, max_chars=ctx.settings.web.embed_max_chars
        )
        try:  # a text longer than the model's window is embedded in windows, pooled (app/knowledge/long_texts.py)
            vectors, tokens = embed(texts)
        except TooLong as err:
            raise ApiError(str(err), param="input") from err
        if body.dimensions is not None and vectors and body.dimensions != len(vectors[0]):
            raise ApiError(
                f"dimensions: this embedder (MiniLM) gives {len(vectors[0])} dimensions only; a shorter vector "
                "cut from it would not be a valid embedding (MiniLM is not trained for that): leave it out",
                param="dimensions",
            )
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


def _texts(given: str | list[str] | list[int] | list[list[int]]) -> list[str]:
    """The texts to embed: text as sent; token ids (`[ids]` or `[[ids], …]`) as cl100k_base ids, what OpenAI's
    clients count in, decoded to their text with the packaged vocabulary (app/api/token_ids.py)."""
    if isinstance(given, str):
        return [given]
    if all(isinstance(item, str) for item in given):
        return [str(item) for item in given]
    if all(isinstance(item, int) for item in given):
        return decoded([[item for item in given if isinstance(item, int)]])
    return decoded([list(item) for item in given if isinstance(item, list)])


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


def _usage(options: StreamOptions | None) -> bool:
    return bool(options and options.include_usage)


def _head(prefix: str, model: str) -> dict[str, Any]:
    return {
        "id": f"{prefix}-{uuid.uuid4().hex[:24]}",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": fingerprint(model),
    }


def fingerprint(model: str) -> str:
    """OpenAI's `system_fingerprint`: the same while the same model serves (a switch changes it)."""
    return "fp_" + hashlib.sha256(f"quartet:{model}".encode()).hexdigest()[:10]
