"""The four-card engine: one llama.cpp model split across RPC cards, several answers batched.

This runs wherever llama.cpp lives: in the engine worker process (the default) or in the app
process. It knows nothing about queues or processes: `serve` runs the batcher's loop on messages,
`generate` runs one answer alone. A cancel takes effect at the next step (one token, one prompt chunk).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import llama_cpp
from llama_cpp import _internals as llama_internals
from llama_cpp import llama_chat_format

from app.engine.cards import check_cards
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError, Event, GenerationRequest, ModelInfo
from app.engine.llama import chat_prompt, ggml, placement, prompt_tokens
from app.engine.llama.batcher import Batcher
from app.engine.llama.drafts import DraftConfig
from app.engine.llama.grammar import grammar_for
from app.engine.llama.loop import Emit, Inbox, serve
from app.engine.llama.prompt_tokens import utf8
from app.engine.llama.slots import Prepared

log = logging.getLogger(__name__)

_SPLIT_MODES = {"layer": llama_cpp.LLAMA_SPLIT_MODE_LAYER}
_KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0}


class _LogCapture:
    """Collects llama's log lines while a model loads (the placement lines are DEBUG level).

    llama.cpp keeps the callback pointer for the life of the process and calls it again later
    (warnings, and while a context is freed), so the ctypes callback is one module-level object
    that is never collected: a callback owned by a short-lived object is freed memory that llama
    then calls (a segfault on close, depending on what reused that memory)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def __enter__(self) -> _LogCapture:
        with self.lock:
            self.lines = []
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        return self

    def __exit__(self, *_exc: object) -> None:
        pass  # keep the callback: later lines (warnings) still reach the logger

    def feed(self, level: int, line: str) -> None:
        with self.lock:
            if len(self.lines) < 100_000:
                self.lines.append(line)
        if level in (3, 4):  # ggml: 3 warn, 4 error
            log.warning("llama: %s", line.rstrip())

    def text(self) -> str:
        with self.lock:
            return "".join(self.lines)


_CAPTURE = _LogCapture()


@llama_cpp.llama_log_callback  # type: ignore[misc]
def _log_callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
    _CAPTURE.feed(level, text.decode("utf-8", errors="replace"))


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        if config.split_mode not in _SPLIT_MODES:
            raise EngineError(
                f"split mode {config.split_mode!r} is not supported over RPC (it aborts llama.cpp); use 'layer'"
            )
        if config.kv_type not in _KV_TYPES:
            raise EngineError(f"KV cache type {config.kv_type!r} is not one of {', '.join(_KV_TYPES)}", kind="request")
        if config.n_batch <= config.parallel:
            raise EngineError(
                f"n_batch ({config.n_batch}) must be larger than parallel ({config.parallel}): a step holds one "
                "token of every answer plus a chunk of a prompt",
                kind="request",
            )
        self.config = config
        self._llm: llama_cpp.Llama | None = None
        self._formatter: llama_chat_format.Jinja2ChatFormatter | None = None
        self._template_tools = False  # the chat template renders a request's `tools` itself
        self.info: ModelInfo | None = None
        self.check_picked_token = True  # constrained answers: check the picked token, not the vocabulary
        self.last_refused = 0  # tokens the grammar refused in the last constrained answer
        self._batcher: Batcher | None = None
        self._solo_ids = itertools.count(1)

    def load(self) -> ModelInfo:
        cfg = self.config
        if not cfg.model_path.is_file():
            raise EngineError(f"model file {cfg.model_path} does not exist")
        check_cards(cfg.cards, health_offset=cfg.health_offset)
        ggml.register_rpc_cards(list(cfg.cards))
        devices = {d.name: d.description for d in ggml.devices() if d.description in cfg.cards}
        started = time.monotonic()
        with _CAPTURE as capture:
            try:
                self._llm = llama_cpp.Llama(
                    str(cfg.model_path),
                    n_gpu_layers=-1,
                    split_mode=_SPLIT_MODES[cfg.split_mode],
                    tensor_split=list(cfg.tensor_split) if cfg.tensor_split else None,
                    n_ctx=cfg.n_ctx,
                    n_batch=cfg.n_batch,
                    n_ubatch=cfg.n_ubatch,
                    n_threads=cfg.n_threads,
                    n_threads_batch=cfg.n_threads,
                    type_k=_KV_TYPES[cfg.kv_type],
                    type_v=_KV_TYPES[cfg.kv_type],
                    # Flash attention keeps V untransposed, so a sequence's KV is copied to and from host
                    # memory a run of cells at a time instead of row by row over RPC (thousands of calls):
                    # measured, a 1,523-token conversation came back in 0.13 s instead of 3.4 s (slower
                    # than reading it again, 3.0 s). llama-server turns it on wherever it is supported too.
                    flash_attn=True,
                    swa_full=cfg.swa_full,
                    verbose=False,
                )
            except ValueError as err:
                raise EngineError(f"llama.cpp could not load {cfg.model_path.name}: {err}") from err
        _widen_context(self._llm, parallel=cfg.parallel, n_ctx=cfg.n_ctx)
        n_ctx = self._llm.n_ctx() // cfg.parallel
        self._batcher = Batcher(
            self._llm,
            parallel=cfg.parallel,
            n_ctx=n_ctx,
            prompt_chunk=min(cfg.prompt_chunk, cfg.n_batch - cfg.parallel),
            max_tokens=cfg.max_tokens_limit,
            kv_cache_bytes=cfg.kv_cache_mb * 1024 * 1024,
            v_transposed=False,  # flash attention: V rows are not transposed
            n_batch=cfg.n_batch,
            drafts=DraftConfig(ngram=cfg.draft_ngram, max_tokens=cfg.draft_max),
            ctx_checkpoints=0 if cfg.swa_full else cfg.ctx_checkpoints,
        )
        n_layers = int(llama_cpp.llama_model_n_layer(self._llm._model.model))
        cards, host = placement.place(capture.text(), devices=devices, n_layers=n_layers)
        self._formatter = self._make_formatter(self._llm)
        self._template_tools = chat_prompt.renders_tools(self._formatter)
        self.info = ModelInfo(
            name=cfg.model_name,
            path=str(cfg.model_path),
            n_layers=n_layers,
            n_ctx=n_ctx,
            cards=cards,
            host_layers=host,
            load_s=time.monotonic() - started,
        )
        return self.info

    def _make_formatter(self, llm: llama_cpp.Llama) -> llama_chat_format.Jinja2ChatFormatter:
        override = self.config.chat_template
        if override:
            path = self.config.template_dir / override
            if not path.is_file():
                raise EngineError(f"chat template {override} is not in {self.config.template_dir}", kind="request")
            template = path.read_text(encoding="utf-8")
        else:
            template = llm.metadata.get("tokenizer.chat_template") or self._fallback_template(llm)
        model = llm._model
        return llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(llm.token_eos()),
            bos_token=model.token_get_text(llm.token_bos()),
        )

    def _fallback_template(self, llm: llama_cpp.Llama) -> str:
        """A GGUF without a chat template gets the one shipped for its architecture family."""
        arch = llm.metadata.get("general.architecture", "")
        for name in (arch, arch.rstrip("0123456789")):
            path = self.config.template_dir / f"{name}.jinja"
            if name and path.is_file():
                return path.read_text(encoding="utf-8")
        raise EngineError(
            f"{self.config.model_path.name} has no chat template and none is shipped for architecture "
            f"{arch!r}; add {self.config.template_dir}/{arch}.jinja"
        )

    def close(self) -> None:
        if self._batcher is not None:
            self._batcher.close()
            self._batcher = None
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    def count_tokens(self, item: GenerationRequest | str) -> int:
        """Exactly the tokens the model reads: a request's whole prompt (chat template included), or a
        piece of text as it reads inside one."""
        if isinstance(item, str):
            assert self._llm is not None
            return len(self._llm.tokenize(utf8(item), add_bos=False, special=False))
        return len(self._prompt_tokens(item)[0])

    def prepare(self, request: GenerationRequest) -> Prepared:
        """A request as the model reads it (raises EngineError for one it cannot): safe to call beside a step."""
        assert self._llm is not None
        prompt, stops = self._prompt_tokens(request)
        return Prepared(prompt, stops, grammar_for(request.json_schema, self._llm._model.vocab))

    def _prompt_tokens(self, request: GenerationRequest) -> tuple[list[int], list[str]]:
        assert self._llm is not None and self._formatter is not None
        if request.prompt_ids is not None:  # token ids as a client sent them: read as they are
            vocab = self._llm.n_vocab()
            if any(not 0 <= i < vocab for i in request.prompt_ids):
                raise EngineError(
                    f"prompt: a token id is not in the model's vocabulary (0 to {vocab - 1})", kind="request"
                )
            return list(request.prompt_ids), list(request.stop)
        if request.prompt is not None:  # a plain completion: the text as the client wrote it (special tokens too)
            return self._tokenize(utf8(request.prompt), add_bos=True), list(request.stop)
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        shown: dict[str, Any] = {}
        if request.tools is not None and self._template_tools:
            shown["tools"] = json.loads(request.tools)
        elif request.tools_text:
            messages = chat_prompt.with_system(messages, request.tools_text)
        try:
            formatted = self._formatter(messages=messages, **shown)  # type: ignore[arg-type]
        except Exception as err:  # jinja raises its own errors for unsupported message orders
            raise EngineError(f"the model's chat template refused this conversation: {err}", kind="request") from err
        tokens = self._tokenize(utf8(formatted.prompt), add_bos=False)
        stops = [s for s in (formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]) if s]
        return tokens, stops + list(request.stop)

    def _tokenize(self, text: bytes, *, add_bos: bool) -> list[int]:
        """A prompt's tokens, or EngineError when it is surely longer than an answer's context (prompt_tokens.py)."""
        assert self._llm is not None
        return prompt_tokens.tokenize(self._llm, text, add_bos=add_bos, n_ctx=self.batcher.n_ctx)

    @property
    def batcher(self) -> Batcher:
        if self._batcher is None:
            raise EngineError("no model is loaded")
        return self._batcher

    def serve(self, inbox: Inbox, emit: Emit) -> None:
        """Run answers in batches until Close arrives (see loop.serve)."""
        serve(self.batcher, inbox, emit, check_picked=lambda: self.check_picked_token)

    def generate(
        self,
        request: GenerationRequest,
        *,
        cancelled: Callable[[], bool],
        on_step: Callable[[], None] = lambda: None,
    ) -> Iterator[Event]:
        """One answer alone (benches, tests): its events; `on_step` is called after every step."""
        batcher = self.batcher
        if batcher.busy():
            raise EngineError("the engine is serving other answers", kind="busy")
        job = next(self._solo_ids)
        batcher.add(job, request, self.prepare(request), check_picked=self.check_picked_token)
        try:
            while batcher.busy():
                if cancelled():
                    batcher.cancel(job)
                for _job, event in batcher.step():
                    yield event
                on_step()
        finally:
            batcher.cancel(job)
            if batcher.busy():
                batcher.step()  # ends the abandoned answer
            self.last_refused = batcher.last_refused


def _widen_context(llm: llama_cpp.Llama, *, parallel: int, n_ctx: int) -> None:
    """Give the model a context of `parallel` sequences, `n_ctx` tokens each, in one unified KV cache.

    llama-cpp-python's Llama makes a one-sequence context and has no option for more, so that one is
    freed and replaced (same parameters otherwise) before any answer runs."""
    params = llm.context_params
    params.n_seq_max = parallel
    params.kv_unified = True
    params.n_ctx = n_ctx * parallel
    llm._ctx.close()
    try:
        llm._ctx = llama_internals.LlamaContext(model=llm._model, params=params, verbose=False)
    except ValueError as err:
        raise EngineError(
            f"llama.cpp could not make a context of {parallel} × {n_ctx} tokens (parallel × n_ctx); "
            "lower parallel or n_ctx"
        ) from err
