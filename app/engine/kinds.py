"""Which backend serves a configuration (`[engine] backend`): the composition root hands this to the engine."""

from __future__ import annotations

from app.engine.backend import BackendKind
from app.engine.engine_config import EngineConfig


def backend_kind(config: EngineConfig) -> BackendKind:
    if config.backend == "upstream":
        from app.engine.upstream.backend import UPSTREAM

        return UPSTREAM
    from app.engine.llama.backend import CARDS

    return CARDS
