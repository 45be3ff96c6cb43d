"""An OpenAI-compatible server as the engine's backend: the boards' vendor runtime, vLLM, llama-server.

Quartet's scheduler stays in front of it (queue, positions, background slots, `parallel` = answers in
flight upstream); each answer is one streamed request on its own thread. Stop closes the request at once,
also while the upstream sends nothing. No upstream holds a slot for ever: an answer ends at its
`max_tokens` and its text bound (answer.py), at a line too long (stream.py), and at `upstream_answer_s` in
all. A stream cut short of its end fails naming the upstream, never reads as a finished answer. An upstream
that is down or slow past `upstream_timeout_s` fails the answer naming it and is treated as a lost backend:
the supervisor waits for its /models to answer again and connects anew.
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
    GenerationRequest,
    ModelInfo,
    Token,
)
from app.engine.upstream.answer import Budget
from app.engine.upstream.client import Probed, UpstreamClient
from app.engine.upstream.stream import Hangup, UpstreamError, deadline

log = logging.getLogger(__name__)
CANCELLED, LATE, STOPPED = "cancelled", "late", "stopped"  # why Quartet hung up on an answer


class UpstreamBackend:
    def __init__(self, config: EngineConfig, on_lost: OnLost) -> None:
        self._config = config
        self._on_lost = on_lost
        self._client = _client(config)
        self._sinks = JobSinks()
        self._hangups: dict[int, Hangup] = {}  # each running answer's way to end its request
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
        hangup = Hangup()
        with self._lock:
            self._hangups[job_id] = hangup
        self._sinks.add(job_id, sink)
        threading.Thread(
            target=self._answer, args=(job_id, request, hangup), name=f"upstream-{job_id}", daemon=True
        ).start()

    def cancel(self, job_id: int) -> None:
        """Stop: the answer's request is closed now, also while the upstream sends nothing."""
        self._hang_up(CANCELLED, job_id)

    def count(self, items: list[Countable], *, timeout: float) -> list[int]:
        return [self._count(item) for item in items]

    def alive(self) -> bool:
        return self._lost is None

    def stop(self) -> None:
        """Disconnect: streams still open (a hung upstream sends no next chunk) close now, with the client."""
        self._lost = self._lost or WorkerLost(f"{self._client.name()} was disconnected")
        self._hang_up(STOPPED)
        self._client.close()

    def _hang_up(self, reason: str, *job_ids: int) -> None:
        with self._lock:
            hangups = [hangup for job, hangup in self._hangups.items() if not job_ids or job in job_ids]
        for hangup in hangups:
            hangup.end(reason)

    # -- one answer ------------------------------------------------------------------------------

    def _answer(self, job_id: int, request: GenerationRequest, hangup: Hangup) -> None:
        try:
            event = self._answered(job_id, request, hangup)
        except UpstreamError as err:  # named; and if the upstream is gone, so is this backend
            self._end(job_id, Failed(str(err)))
            self._check_alive(err)
            return
        self._end(job_id, event)

    def _end(self, job_id: int, event: Done | Failed) -> None:
        with self._lock:
            self._hangups.pop(job_id, None)
        self._sinks.deliver(job_id, event)

    def _answered(self, job_id: int, request: GenerationRequest, hangup: Hangup) -> Done | Failed:
        budget, prompt_tokens = Budget(request.max_tokens), 0
        try:
            route, body = self._body(request)
            prompt_tokens = self._count(request)
            if self._n_ctx - prompt_tokens < MIN_ROOM:
                raise overflow(prompt_tokens, self._n_ctx)
            # at most the room the context leaves (vLLM refuses a prompt and max_tokens longer than its context)
            body["max_tokens"] = min(body["max_tokens"], self._n_ctx - prompt_tokens)
            with deadline(hangup, self._config.upstream_answer_s, LATE):
                self._stream(job_id, route, body, budget, hangup)
        except UpstreamError:
            if hangup.reason is None:
                raise
        except EngineError as err:
            return err.failed()
        except Exception as err:  # the client closed under the stream (the backend stopped): nobody listens now
            log.info("upstream answer %d ended: %s", job_id, type(err).__name__)
            return Failed(f"{self._client.name()} was disconnected during the answer")
        if hangup.reason is not None and not budget.complete():
            return self._hung_up(hangup.reason, budget, prompt_tokens)
        return Done(budget.stats(prompt_tokens))

    def _stream(self, job_id: int, route: str, body: dict[str, Any], budget: Budget, hangup: Hangup) -> None:
        """The answer's text to its sink, until the upstream ends it or a bound does (which closes the request);
        a stream that stops short of its end (no finish_reason, no [DONE]) fails naming the upstream."""
        budget.began = time.monotonic()  # its time runs from its request (counting its prompt came before)
        with self._client.stream(route, body, hangup) as stream:
            try:
                for chunk in stream:
                    text = budget.take(chunk)
                    if text:
                        self._sinks.deliver(job_id, Token(text))
                    if budget.full():
                        return
            finally:
                if stream.skipped:  # one line an answer, however many it skipped
                    log.warning(
                        "upstream answer %d: skipped %d line(s) from %s that are not an OpenAI stream's "
                        "(the first: %r)",
                        job_id, stream.skipped, self._client.url, stream.first_skipped,
                    )  # fmt: skip
            budget.done = stream.done
        if not budget.complete() and hangup.reason is None:
            raise UpstreamError(
                f"{self._client.name()} broke off the answer after {budget.tokens()} tokens: its stream ended "
                "without a finish_reason or [DONE]"
            )

    def _hung_up(self, reason: str, budget: Budget, prompt_tokens: int) -> Done | Failed:
        """How an answer this side ended ends: Stop is an answer cancelled, a deadline or a disconnect a failure."""
        name = self._client.name()
        if reason == CANCELLED:
            return Done(budget.stats(prompt_tokens, "cancelled"))
        if reason == LATE:
            return Failed(
                f"{name} did not finish the answer within {self._config.upstream_answer_s:g} s "
                f"(engine.upstream_answer_s): it was ended after {budget.tokens()} tokens"
            )
        return Failed(f"{name} was disconnected during the answer")

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
