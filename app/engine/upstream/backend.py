"""An OpenAI-compatible server as the engine's backend: the boards' vendor runtime, vLLM, llama-server.

Quartet's scheduler stays in front of it (queue, positions, background slots, `parallel` = answers in
flight upstream); each answer is one streamed request on its own thread. Stop closes the stream at the
next chunk. An upstream that is down or slow past `upstream_timeout_s` fails the answer naming it and is
treated as a lost backend: the supervisor waits for its /models to answer again and connects anew.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any

from app.engine.backend import BackendKind, Down, JobSinks, OnLost, Sink, WorkerLost
from app.engine.counts import MIN_ROOM, Countable, overflow
from app.engine.engine_config import EngineConfig
from app.engine.events import (
    Capabilities,
    Done,
    EngineError,
    Failed,
    FinishReason,
    GenerationRequest,
    ModelInfo,
    Stats,
    Token,
)
from app.engine.upstream.client import Probed, UpstreamClient, UpstreamError, delta_text, finish_of

log = logging.getLogger(__name__)
_FINISH: dict[str, FinishReason] = {"length": "length"}  # the rest (stop, tool_calls, eos) end as "stop"


class UpstreamBackend:
    def __init__(self, config: EngineConfig, on_lost: OnLost) -> None:
        self._config = config
        self._on_lost = on_lost
        self._client = _client(config)
        self._sinks = JobSinks()
        self._cancelled: set[int] = set()
        self._lock = threading.Lock()
        self._probed: Probed | None = None
        self._n_ctx = config.n_ctx
        self._lost: WorkerLost | None = None

    def start(self) -> ModelInfo:
        began = time.monotonic()
        try:
            probed = self._client.probe(self._config.upstream_model)
        except UpstreamError as err:  # named by its URL: the supervisor waits for it and tries again
            raise EngineError(str(err), card=self._client.url) from None
        self._probed, self._n_ctx = probed, probed.n_ctx or self._config.n_ctx
        log.info("upstream %s: model %s, %s", self._client.url, probed.model, probed)
        return ModelInfo(
            name=probed.model,
            path=self._client.url,
            n_layers=0,
            n_ctx=self._n_ctx,
            cards=(),
            load_s=time.monotonic() - began,
            backend="upstream",
            capabilities=Capabilities(
                json_schema=bool(probed.schema_style),
                exact_counts=False,  # its chat template is its own: counts are estimates (tokenizer-backed if any)
                cached_tokens=probed.usage_in_stream,
                logprobs=False,
                completions=probed.completions,
                placement=False,
                catalog=False,
            ),
        )

    def submit(self, job_id: int, request: GenerationRequest, sink: Sink) -> None:
        if self._lost is not None:
            raise self._lost
        self._sinks.add(job_id, sink)
        threading.Thread(target=self._answer, args=(job_id, request), name=f"upstream-{job_id}", daemon=True).start()

    def cancel(self, job_id: int) -> None:
        with self._lock:
            self._cancelled.add(job_id)

    def count(self, items: list[Countable], *, timeout: float) -> list[int]:
        return [self._count(item) for item in items]

    def alive(self) -> bool:
        return self._lost is None

    def stop(self) -> None:
        """Disconnect: streams still open (a hung upstream sends no next chunk) close now, with the client."""
        self._lost = self._lost or WorkerLost(f"{self._client.name()} was disconnected")
        self._client.close()

    # -- one answer ------------------------------------------------------------------------------

    def _answer(self, job_id: int, request: GenerationRequest) -> None:
        try:
            route, body = self._body(request)
            prompt_tokens = self._count(request)
            if self._n_ctx - prompt_tokens < MIN_ROOM:
                raise overflow(prompt_tokens, self._n_ctx)
            event: Done | Failed = self._stream(job_id, route, body, prompt_tokens)
        except UpstreamError as err:
            self._sinks.deliver(job_id, Failed(str(err)))
            self._check_alive(err)
            return
        except EngineError as err:
            event = err.failed()
        except Exception as err:  # the client closed under the stream (the backend stopped): nobody listens now
            log.info("upstream answer %d ended: %s", job_id, type(err).__name__)
            event = Failed(f"{self._client.name()} was disconnected during the answer")
        with self._lock:
            self._cancelled.discard(job_id)
        self._sinks.deliver(job_id, event)

    def _stream(self, job_id: int, route: str, body: dict[str, Any], prompt_tokens: int) -> Done | Failed:
        began = time.monotonic()
        first: float | None = None
        pieces, finish = 0, "stop"
        usage: dict[str, Any] = {}
        with self._client.stream(route, body) as chunks:
            for chunk in chunks:
                if self._stopped(job_id):
                    finish = "cancelled"
                    break
                text = delta_text(chunk)
                if text:
                    first = first or time.monotonic()
                    pieces += 1
                    self._sinks.deliver(job_id, Token(text))
                finish = finish_of(chunk) or finish
                usage = chunk.get("usage") or usage
        return Done(_stats(usage, prompt_tokens, pieces, began, first, _FINISH.get(finish, finish_reason(finish))))

    def _stopped(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._cancelled or self._lost is not None

    def _body(self, request: GenerationRequest) -> tuple[str, dict[str, Any]]:
        probed = self._probed
        assert probed is not None, "submit before start"
        body: dict[str, Any] = {
            "model": probed.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream": True,
        }
        if probed.usage_in_stream:
            body["stream_options"] = {"include_usage": True}
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.logprobs is not None:
            raise EngineError(f"{self._client.name()} does not give log-probabilities", kind="request")
        if request.json_schema is not None:
            body["response_format"] = _response_format(probed, request.json_schema, self._client.name())
        if request.prompt is not None:
            if not probed.completions:
                raise EngineError(f"{self._client.name()} takes chat messages only, not a plain prompt", kind="request")
            prompt = list(request.prompt_ids) if request.prompt_ids is not None else request.prompt
            return "completions", {**body, "prompt": prompt}
        return "chat/completions", {**body, "messages": _messages(request)}

    # -- counts and health -----------------------------------------------------------------------

    def _count(self, item: Countable) -> int:
        """Tokens of a text or a request's prompt: the upstream's tokenizer where it has one (plus a few tokens
        a message for its template), else an estimate on the safe side (a token per three bytes)."""
        if isinstance(item, str):
            return self._text_tokens(item)
        if item.prompt_ids is not None:
            return len(item.prompt_ids)
        texts = [item.prompt] if item.prompt is not None else [m["content"] for m in _messages(item)]
        return sum(self._text_tokens(text) + 4 for text in texts) + 3

    def _text_tokens(self, text: str) -> int:
        probed = self._probed
        if probed is not None and probed.tokenizer is not None and text:
            try:
                return self._client.count(probed.tokenizer, text)
            except UpstreamError:
                pass
        return math.ceil(len(text.encode("utf-8", "replace")) / 3)

    def _check_alive(self, err: UpstreamError) -> None:
        """An answer failed: if the upstream is gone, so is this backend (the supervisor waits for it)."""
        if self._lost is not None:
            return
        try:
            self._client.models()
        except UpstreamError as gone:
            self._lost = WorkerLost(str(gone), card=self._client.url)
            self._on_lost(self, self._lost, self._sinks.drop_all())


def finish_reason(finish: str) -> FinishReason:
    return "cancelled" if finish == "cancelled" else "stop"


def _stats(
    usage: dict[str, Any], prompt_tokens: int, pieces: int, began: float, first: float | None, finish: FinishReason
) -> Stats:
    now = time.monotonic()
    ttft = (first or now) - began
    generated = int(usage.get("completion_tokens") or pieces)
    details = usage.get("prompt_tokens_details") or {}
    prompt = int(usage.get("prompt_tokens") or prompt_tokens)
    decode_s = now - (first or now)
    return Stats(
        prompt_tokens=prompt,
        cached_tokens=int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0,
        generated_tokens=generated,
        ttft_s=ttft,
        prompt_tps=prompt / ttft if ttft > 0 else 0.0,
        decode_tps=(generated - 1) / decode_s if decode_s > 0 and generated > 1 else 0.0,
        total_s=now - began,
        finish_reason=finish,
    )


def _messages(request: GenerationRequest) -> list[dict[str, str]]:
    """The conversation as the upstream takes it; the tools' description goes first in the system message
    (the answer's shape is held by the schema, as for a chat template that knows no tools)."""
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    if request.tools_text:
        if messages and messages[0]["role"] == "system":
            messages[0]["content"] = f"{request.tools_text}\n\n{messages[0]['content']}"
        else:
            messages.insert(0, {"role": "system", "content": request.tools_text})
    return messages


def _response_format(probed: Probed, schema_text: str, name: str) -> dict[str, Any]:
    if not probed.schema_style:
        raise EngineError(f"{name} cannot hold an answer to a JSON Schema", kind="request")
    schema = json.loads(schema_text) if schema_text not in ("", "{}") else {"type": "object"}
    if probed.schema_style == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return {"type": "json_object", "schema": schema}


def _client(config: EngineConfig) -> UpstreamClient:
    return UpstreamClient(
        config.upstream_url, key=config.upstream_key.get_secret_value(), timeout_s=config.upstream_timeout_s
    )


def _first_down(config: EngineConfig) -> Down | None:
    client = _client(config)
    try:
        client.models()
    except UpstreamError as err:
        return Down(client.name(), client.url, str(err).removeprefix(client.name()).strip())
    finally:
        client.close()
    return None


UPSTREAM = BackendKind("upstream", build=UpstreamBackend, first_down=_first_down, uses_cards=False)
