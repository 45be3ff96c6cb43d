"""The four-card engine: one llama.cpp model split across RPC cards, generating one answer at a time.

This runs wherever llama.cpp lives: in the engine worker process (the default) or in the app
process. It knows nothing about queues or processes; `cancelled` is polled between prompt chunks and
between tokens, so a cancel takes effect within one chunk of work.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import threading
import time
from collections.abc import Callable, Iterator

import llama_cpp
from llama_cpp import llama_chat_format

from app.engine import ggml, placement
from app.engine.cards import check_cards
from app.engine.engine_config import EngineConfig
from app.engine.events import (
    Done,
    EngineError,
    Event,
    GenerationRequest,
    ModelInfo,
    Stats,
    Token,
)
from app.engine.grammar import GrammarFirstChecked, grammar_for
from app.engine.stops import StopScanner

log = logging.getLogger(__name__)

_SPLIT_MODES = {"layer": llama_cpp.LLAMA_SPLIT_MODE_LAYER}
_KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0}
_MIN_ROOM = 8  # tokens an answer needs at least after the prompt


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
                f"split mode {config.split_mode!r} is not supported over RPC (it aborts llama.cpp); "
                "use 'layer'"
            )
        if config.kv_type not in _KV_TYPES:
            raise EngineError(f"KV cache type {config.kv_type!r} is not one of {', '.join(_KV_TYPES)}", kind="request")
        self.config = config
        self._llm: llama_cpp.Llama | None = None
        self._formatter: llama_chat_format.Jinja2ChatFormatter | None = None
        self.info: ModelInfo | None = None
        self.check_picked_token = True  # constrained answers: check the picked token, not the vocabulary
        self.last_refused = 0  # tokens the grammar refused in the last constrained answer
        self._on_step: Callable[[], None] = lambda: None

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
                    flash_attn=cfg.kv_type != "f16",
                    verbose=False,
                )
            except ValueError as err:
                raise EngineError(f"llama.cpp could not load {cfg.model_path.name}: {err}") from err
        n_layers = int(llama_cpp.llama_model_n_layer(self._llm._model.model))
        cards, host = placement.place(capture.text(), devices=devices, n_layers=n_layers)
        self._formatter = self._make_formatter(self._llm)
        self.info = ModelInfo(
            name=cfg.model_name,
            path=str(cfg.model_path),
            n_layers=n_layers,
            n_ctx=self._llm.n_ctx(),
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
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    def count_tokens(self, request: GenerationRequest) -> int:
        return len(self._prompt_tokens(request)[0])

    def _prompt_tokens(self, request: GenerationRequest) -> tuple[list[int], list[str]]:
        assert self._llm is not None and self._formatter is not None
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        try:
            formatted = self._formatter(messages=messages)  # type: ignore[arg-type]
        except Exception as err:  # jinja raises its own errors for unsupported message orders
            raise EngineError(f"the model's chat template refused this conversation: {err}", kind="request") from err
        tokens = self._llm.tokenize(formatted.prompt.encode("utf-8"), add_bos=False, special=True)
        stops = [s for s in (formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]) if s]
        return tokens, stops + list(request.stop)

    def generate(
        self,
        request: GenerationRequest,
        *,
        cancelled: Callable[[], bool],
        on_step: Callable[[], None] = lambda: None,
    ) -> Iterator[Event]:
        """The answer's events; `on_step` is called after every llama.cpp step (a prompt chunk, a token)."""
        llm = self._llm
        if llm is None:
            raise EngineError("no model is loaded")
        started = time.monotonic()
        tokens, stops = self._prompt_tokens(request)
        n_ctx = llm.n_ctx()
        room = n_ctx - len(tokens)
        if room < _MIN_ROOM:
            raise EngineError(
                f"the conversation is {len(tokens)} tokens long and the model's context holds "
                f"{n_ctx}; start a new chat or shorten the message",
                kind="context",
            )
        budget = min(request.max_tokens, self.config.max_tokens_limit, room)
        cached = self._reuse_prefix(llm, tokens)
        if request.seed is not None:
            llm.set_seed(request.seed)  # before the samplers are made: their random source takes it
        grammar = grammar_for(request.json_schema, llm._model.vocab)
        checked = None
        if grammar is not None and self.check_picked_token:
            checked = GrammarFirstChecked(llm, grammar, temperature=request.temperature, top_p=request.top_p)
            sample: Callable[[], int] = lambda: checked.sample(llm._ctx.ctx)  # noqa: E731
        else:
            llm._sampler = llm._init_sampler(temp=request.temperature, top_p=request.top_p, grammar=grammar)
            sample = llm.sample
        try:
            self._on_step = on_step
            yield from self._run(llm, sample, tokens[cached:], budget, stops, cancelled, started, len(tokens), cached)
        finally:
            llm._sampler = None
            if checked is not None:
                self.last_refused = checked.refused
                checked.close()

    @staticmethod
    def _reuse_prefix(llm: llama_cpp.Llama, tokens: list[int]) -> int:
        """Keep the KV cache of the longest shared prefix (a chat's earlier turns); return its length."""
        common = 0
        for a, b in zip(llm._input_ids[: llm.n_tokens], tokens, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # at least one token must be evaluated for logits
        if common > 0 and llm._ctx.kv_cache_seq_rm(-1, common, -1):
            llm.n_tokens = common
            return common
        llm.reset()
        return 0

    def _run(
        self,
        llm: llama_cpp.Llama,
        sample: Callable[[], int],
        pending: list[int],
        budget: int,
        stops: list[str],
        cancelled: Callable[[], bool],
        started: float,
        prompt_tokens: int,
        cached: int,
    ) -> Iterator[Event]:
        chunk = max(1, min(self.config.prompt_chunk, self.config.n_batch))
        for i in range(0, len(pending), chunk):
            if cancelled():
                yield Done(_stats(prompt_tokens, cached, 0, started, None, time.monotonic(), "cancelled"))
                return
            llm.eval(pending[i : i + chunk])
            self._on_step()
        prompt_done = time.monotonic()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = StopScanner(stops)
        generated, first_at, reason = 0, None, "length"
        while generated < budget:
            if cancelled():
                reason = "cancelled"
                break
            token = sample()
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                reason = "stop"
                break
            generated += 1
            first_at = first_at or time.monotonic()
            piece, hit = text.feed(decoder.decode(llm.detokenize([token])))
            if piece:
                yield Token(piece)
            if hit:
                reason = "stop"
                break
            llm.eval([token])
            self._on_step()
        tail = text.flush() if reason != "stop" else ""
        if tail:
            yield Token(tail)
        finished = time.monotonic()
        stats = _stats(prompt_tokens, cached, generated, started, first_at, finished, reason, prompt_done)
        yield Done(stats)


def _stats(
    prompt_tokens: int,
    cached: int,
    generated: int,
    started: float,
    first_at: float | None,
    finished: float,
    reason: str,
    prompt_done: float | None = None,
) -> Stats:
    prompt_s = (prompt_done or finished) - started
    decode_s = finished - first_at if first_at else 0.0
    return Stats(
        prompt_tokens=prompt_tokens,
        cached_tokens=cached,
        generated_tokens=generated,
        ttft_s=round((first_at - started) if first_at else 0.0, 4),
        prompt_tps=round((prompt_tokens - cached) / prompt_s, 1) if prompt_s > 0 else 0.0,
        decode_tps=round((generated - 1) / decode_s, 1) if generated > 1 and decode_s > 0 else 0.0,
        total_s=round(finished - started, 4),
        finish_reason=reason,  # type: ignore[arg-type]
    )
