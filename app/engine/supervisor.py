"""The engine's backend under supervision: loaded when what it needs answers (every card, or the
upstream), rebuilt when lost, replaced on request (a model switch), its tokenizer lent out for counts.

The supervisor owns one thing, the backend's life; it knows nothing about answers or queues. The
scheduler (service.py) holds it and talks to it through the methods below. It tells its holder
about changes through two callbacks, always called without its lock held: `on_change` (the state
moved) and `on_lost` (a backend died with these jobs running on it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.engine.backend import Backend, BackendKind, WorkerLost
from app.engine.counts import Countable
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError, ModelInfo

log = logging.getLogger(__name__)

State = Literal["starting", "loading", "ready", "recovering", "failed", "stopped"]
RETRY_S = 0.5
RETRY_READY_S = 60.0  # how long a retried answer waits for the rebuilt engine
OnLost = Callable[[WorkerLost, list[int]], None]
Kinds = Callable[[EngineConfig], BackendKind]  # which kind of backend serves a configuration


@dataclass(frozen=True)
class BackendView:
    """The backend's state as its holder sees it: one consistent snapshot."""

    state: State
    message: str
    down_card: str | None
    info: ModelInfo | None


class BackendSupervisor:
    def __init__(
        self,
        config: EngineConfig,
        *,
        kinds: Kinds,
        on_change: Callable[[], None] = lambda: None,
        on_lost: OnLost = lambda err, jobs: None,
        on_new_backend: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self._kinds = kinds
        self._on_change = on_change
        self._on_lost = on_lost
        self._on_new_backend = on_new_backend  # what the old backend held (its host KV cache) is gone
        self._cond = threading.Condition()
        self._backend: Backend | None = None
        self._state: State = "starting"
        self._message = "starting"
        self._down_card: str | None = None
        self._info: ModelInfo | None = None

    @property
    def kind(self) -> BackendKind:
        return self._kinds(self.config)

    # -- what the holder asks --------------------------------------------------------------

    def start(self) -> None:
        """Load the model in the background (as soon as every card answers)."""
        _spawn(self._load_when_cards_answer, "engine-loader")

    def stop(self) -> None:
        with self._cond:
            self._state = "stopped"
            backend, self._backend = self._backend, None
            self._cond.notify_all()
        self._on_change()
        if backend:
            backend.stop()

    def view(self) -> BackendView:
        with self._cond:
            return BackendView(self._state, self._message, self._down_card, self._info)

    def wait_ready(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state in ("ready", "failed", "stopped"), timeout) and (
                self._state == "ready"
            )

    def backend(self) -> Backend | EngineError:
        """The backend to run on; while it is being rebuilt, wait only if what it needs answers."""
        if self.view().state == "recovering":
            down = self.kind.first_down(self.config)
            if down:
                return EngineError(f"{down.message()}; answers resume when it is back", card=down.endpoint)
            self.wait_ready(RETRY_READY_S)
        with self._cond:
            if self._backend is None or self._state != "ready":
                return EngineError(f"the engine is not available: {self._message}", card=self._down_card)
            return self._backend

    def current(self) -> Backend | None:
        """The backend in use now, if any, without waiting (to cancel an answer on it)."""
        with self._cond:
            return self._backend

    def count(self, items: Sequence[Countable], *, wait_s: float) -> list[int]:
        """Exact token counts from the loaded model's tokenizer (waiting up to `wait_s` for it to load)."""
        if not self.wait_ready(wait_s):
            view = self.view()
            raise EngineError(f"the engine is not available to count tokens: {view.message}", card=view.down_card)
        backend = self.backend()
        if isinstance(backend, EngineError):
            raise backend
        return backend.count(list(items), timeout=self.config.step_timeout_s + 5)

    def recover(self, err: EngineError, failed: Backend) -> None:
        """Drop the backend that failed and rebuild it in the background; a no-op if it was replaced."""
        with self._cond:
            if self._backend is not failed or self._state == "stopped":
                return
            self._backend = None
            self._state, self._message, self._down_card = "recovering", str(err), err.card
            self._cond.notify_all()
        log.info("engine recovering: %s", err)
        self._on_change()

        def rebuild() -> None:
            failed.stop()
            self._load_when_cards_answer()

        _spawn(rebuild, "engine-recover")

    def check_idle(self) -> None:
        """Called while no answer runs: a worker that died meanwhile is rebuilt before anyone needs it."""
        with self._cond:
            backend = self._backend if self._state == "ready" else None
        if backend is not None and not backend.alive():
            self.recover(WorkerLost("the engine worker stopped while idle"), backend)

    def card_down(self, index: int, endpoint: str, reason: str) -> None:
        """A card stopped answering while no answer runs: rebuild now rather than fail the next answer."""
        with self._cond:
            backend = self._backend if self._state == "ready" else None
        if backend is not None and self.kind.uses_cards and endpoint in self.config.cards:
            self.recover(EngineError(f"card {index} ({endpoint}) is down: {reason}", card=endpoint), backend)

    def replace(self, config: EngineConfig, *, why: str) -> ModelInfo:
        """Unload the model (the cards may not hold two), then load `config`; raises EngineError if it fails."""
        with self._cond:
            old, self._backend = self._backend, None
            self.config = config
            self._state, self._message, self._down_card = "loading", f"{why}…", None
            self._cond.notify_all()
        self._on_change()
        if old is not None:
            old.stop()
        backend = self._make_backend()
        try:
            info = backend.start()
        except EngineError as err:
            backend.stop()
            self._set_state("failed", str(err), err.card)
            raise
        with self._cond:
            self._backend, self._info = backend, info
        self._set_state("ready", f"{info.name} ready {info.serving()}")
        return info

    # -- its own work ----------------------------------------------------------------------------

    def _make_backend(self) -> Backend:
        self._on_new_backend()
        return self.kind.build(self.config, self._lost)

    def _lost(self, backend: Backend, err: WorkerLost, jobs: list[int]) -> None:
        """The backend died with `jobs` running (called from its reader thread): rebuild, then tell the holder."""
        self.recover(err, backend)
        self._on_lost(err, jobs)

    def _set_state(self, state: State, message: str, card: str | None = None) -> None:
        with self._cond:
            if self._state == "stopped":
                return
            self._state, self._message, self._down_card = state, message, card
            self._cond.notify_all()
        log.info("engine %s: %s", state, message)
        self._on_change()

    def _load_when_cards_answer(self) -> None:
        """Wait for what the backend needs (every card, the upstream), then load; repeat until it works or
        the supervisor stops."""
        while self.view().state != "stopped":
            config = self.config
            down = self._kinds(config).first_down(config)
            if down:
                view = self.view()
                if view.state != "recovering" or view.down_card != down.endpoint:
                    self._set_state("recovering", f"waiting for {down.name}: {down.reason}", down.endpoint)
                time.sleep(RETRY_S)
                continue
            self._set_state("loading", _loading(config))
            backend = self._make_backend()
            try:
                info = backend.start()
            except EngineError as err:
                backend.stop()
                self._set_state("recovering" if err.card else "failed", str(err), err.card)
                if not err.card:
                    return
                time.sleep(RETRY_S)
                continue
            with self._cond:
                if self._state == "stopped":
                    backend.stop()
                    return
                self._backend, self._info = backend, info
            self._set_state("ready", f"{info.name} ready {info.serving()}")
            return


def _loading(config: EngineConfig) -> str:
    if config.backend == "upstream":
        return f"connecting to the upstream at {config.upstream_url}"
    return f"loading {config.model_name} across {len(config.cards)} cards"


def _spawn(target: Callable[[], None], name: str) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()
