"""The engine tests' engine: the demo model on the two engine cards, one engine at a time (a card serves
one host at a time), shared by the modules that ask for the same one (the `engine_host` fixture)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from app.engine.engine_config import EngineConfig
from app.settings import DEMO_MODEL
from launcher.cluster import CardProcesses

_LIVE: list[EngineHost] = []


def vocab_only(model: Path = DEMO_MODEL) -> Any:
    """A vocab-only `llama_cpp.Llama` of `model`, for tests that tokenize or build grammars in this process.

    Loading any model, even vocab-only, makes llama.cpp ask every RPC device this process has registered (the
    engine tests' cards) for its memory. A card serves one host at a time: with an engine of this process still
    held on it, that question waits forever (a whole run hung so: test_engine_front_door, then
    test_openai_contract, on one worker). The engines held are closed first; the next engine test loads again."""
    import llama_cpp

    for host in _LIVE:
        host.close()
    return llama_cpp.Llama(str(model), vocab_only=True, verbose=False)


class EngineHost:
    """The one host of the two engine cards (a card serves one host at a time): it holds one engine, loaded,
    and hands it to each module that asks for the same one; asking for another closes the one held first."""

    def __init__(self, cards: CardProcesses) -> None:
        self.cards = cards
        self.loads = 0  # how many engines the session loaded on these cards
        self._key: tuple[object, ...] | None = None
        self._held: Any = None  # an Engine (llamacpp) or an EngineService
        self._close: Any = None
        _LIVE.append(self)

    def config(
        self, *, n_ctx: int, parallel: int = 4, template: tuple[Path, str] | None = None, isolation: bool = True
    ) -> EngineConfig:
        """The demo model on the engine cards, reading prompts in chunks of 64 tokens; `template` a chat
        template (its folder, its file) to use instead of the GGUF's."""
        cards = tuple(self.cards.endpoints)
        config = EngineConfig(
            DEMO_MODEL, "demo", cards, n_ctx=n_ctx, prompt_chunk=64, parallel=parallel, isolation=isolation
        )
        return replace(config, template_dir=template[0], chat_template=template[1]) if template else config

    def engine(self, *, n_ctx: int, template: tuple[Path, str] | None = None, parallel: int = 4) -> Any:
        """llama.cpp's adapter alone (no scheduler), loaded."""
        from app.engine.llama.engine import Engine

        key = ("engine", n_ctx, template, parallel)
        if key != self._key:
            engine = self._hold(Engine(self.config(n_ctx=n_ctx, template=template, parallel=parallel)), "close")
            engine.load()
            self._key = key
        return self._held

    def service(self, *, isolated: bool, n_ctx: int, parallel: int) -> Any:
        """The engine's front door (its scheduler and batcher; in a worker process when `isolated`), ready."""
        from app.engine.kinds import backend_kind
        from app.engine.service import EngineService

        key = ("service", isolated, n_ctx, parallel)
        if key != self._key:
            config = self.config(n_ctx=n_ctx, parallel=parallel, isolation=isolated)
            service = self._hold(EngineService(config, kinds=backend_kind), "stop")
            service.start()
            assert service.wait_ready(180), service.status()["message"]
            self._key = key
        return self._held

    def _hold(self, engine: Any, close: str) -> Any:
        self.close()
        self._held, self._close = engine, getattr(engine, close)
        self.loads += 1
        return engine

    def close(self) -> None:
        if self._close is not None:
            self._close()
        self._key = self._held = self._close = None


def run(engine: Any, request: Any, cancelled: Any = lambda: False) -> tuple[str, Any]:
    """An engine's whole answer to `request`: its text and its Done event."""
    from app.engine.events import Done, Token

    text, done = "", None
    for event in engine.generate(request, cancelled=cancelled):
        if isinstance(event, Token):
            text += event.text
        elif isinstance(event, Done):
            done = event
    assert done is not None
    return text, done
