"""The engine's backend under supervision: loaded when every card answers, rebuilt when lost,
replaced on request (a model switch) with the old model back if the new one fails.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Literal

from app.engine import cards as card_probe
from app.engine.backends import Backend, InProcessBackend, WorkerBackend, WorkerLost
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError, ModelInfo
from app.engine.ticket import Ticket

log = logging.getLogger(__name__)

State = Literal["starting", "loading", "ready", "recovering", "failed", "stopped"]
RETRY_S = 0.5
RETRY_READY_S = 60.0  # how long a retried answer waits for the rebuilt engine


class BackendSupervisor:
    def __init__(self, config: EngineConfig, *, isolated: bool) -> None:
        self.config = config
        self.isolated = isolated
        self._cond = threading.Condition()
        self._running: dict[int, Ticket] = {}  # answers in the engine's slots, by job id
        self._backend: Backend | None = None
        self._state: State = "starting"
        self._message = "starting"
        self._down_card: str | None = None
        self._info: ModelInfo | None = None
        self._switching: str | None = None
        self._switch_stopped: set[int] = set()
        self._threads: list[threading.Thread] = []

    def _make_backend(self) -> Backend:
        home = WorkerBackend if self.isolated else InProcessBackend
        return home(self.config, self._backend_lost)

    def _backend_lost(self, backend: Backend, err: WorkerLost, jobs: list[int]) -> None:
        """The backend died with `jobs` running (called from its reader thread)."""
        self._recover(err, backend)

    def start(self) -> None:
        """Load the model in the background (as soon as every card answers)."""
        self._spawn(self._bring_up, "engine-loader")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def wait_ready(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state in ("ready", "failed"), timeout) and (
                self._state == "ready"
            )

    def stop(self) -> None:
        with self._cond:
            self._state = "stopped"
            backend, self._backend = self._backend, None
            self._cond.notify_all()
        if backend:
            backend.stop()

    def _set_state(self, state: State, message: str, card: str | None = None) -> None:
        with self._cond:
            if self._state == "stopped":
                return
            self._state, self._message, self._down_card = state, message, card
            self._cond.notify_all()
        log.info("engine %s: %s", state, message)

    def _bring_up(self) -> None:
        self._load_when_cards_answer()

    def _load_when_cards_answer(self) -> None:
        """Wait for every card, then load; repeat until it works or the service stops."""
        while self._state != "stopped":
            down = card_probe.first_card_down(self.config.cards, health_offset=self.config.health_offset)
            if down:
                index, endpoint, reason = down
                if self._state != "recovering" or self._down_card != endpoint:
                    self._set_state("recovering", f"waiting for card {index} ({endpoint}): {reason}", endpoint)
                time.sleep(RETRY_S)
                continue
            self._set_state("loading", f"loading {self.config.model_name} across {len(self.config.cards)} cards")
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
            self._set_state("ready", f"{info.name} ready on {len(info.cards)} cards")
            return

    def _recover(self, err: EngineError, failed: Backend) -> None:
        """Drop the backend that failed and rebuild; a no-op if it was already replaced."""
        with self._cond:
            if self._backend is not failed or self._state == "stopped":
                return
            self._backend = None
            self._state, self._message, self._down_card = "recovering", str(err), err.card
            self._cond.notify_all()
        log.info("engine recovering: %s", err)
        failed.stop()
        threading.Thread(target=self._bring_up, name="engine-recover", daemon=True).start()

    def switch(self, config: EngineConfig, *, grace_s: float = 5.0) -> ModelInfo:
        """Load another model (or the same one with other settings). New answers wait; the running one
        has `grace_s` to finish, then is stopped with a notice; the old model is unloaded first. If the
        new one fails to load, the old one is loaded again and the error says why."""
        with self._cond:
            if self._switching:
                raise EngineError(f"a switch is already under way ({self._switching})", kind="busy")
            self._switching = f"switching to {config.model_name}"
            self._cond.notify_all()
        previous = self.config
        try:
            self._drain(grace_s)
            try:
                return self._load(config)
            except EngineError as err:
                log.warning("switch to %s failed: %s; loading %s again", config.model_name, err, previous.model_name)
                self._load(previous)
                raise EngineError(
                    f"{config.model_name} could not be loaded ({err}); {previous.model_name} is loaded again",
                    kind=err.kind,
                ) from err
        finally:
            with self._cond:
                self._switching = None
                self._cond.notify_all()

    def _drain(self, grace_s: float) -> None:
        """Let the running answers finish within `grace_s`, then stop them (each ends with a notice)."""
        with self._cond:
            if self._cond.wait_for(lambda: not self._running, grace_s):
                return
            jobs, backend = list(self._running), self._backend
            self._switch_stopped.update(jobs)
        if backend is not None:
            for job in jobs:
                backend.cancel(job)
        with self._cond:
            self._cond.wait_for(lambda: not self._running, 30)

    def _load(self, config: EngineConfig) -> ModelInfo:
        with self._cond:
            old, self._backend = self._backend, None
            self.config = config
            self._state, self._message, self._down_card = "loading", f"{self._switching}…", None
            self._cond.notify_all()
        if old is not None:
            old.stop()  # unload first: the cards may not hold two models
        backend = self._make_backend()
        try:
            info = backend.start()
        except EngineError as err:
            backend.stop()
            self._set_state("failed", str(err), err.card)
            raise
        with self._cond:
            self._backend, self._info = backend, info
        self._set_state("ready", f"{info.name} ready on {len(info.cards)} cards")
        return info

    def _watch_backend(self) -> None:
        backend = self._backend
        if backend is not None and self._state == "ready" and not self._running and not backend.alive():
            self._recover_async(WorkerLost("the engine worker stopped while idle"), backend)

    def note_card_down(self, index: int, endpoint: str, reason: str) -> None:
        """The card monitor saw a card stop answering. If the engine is idle, rebuild it now rather
        than fail the next user's answer on a dead connection."""
        with self._cond:
            backend = self._backend if self._state == "ready" and not self._running else None
        if backend is not None and endpoint in self.config.cards:
            self._recover_async(EngineError(f"card {index} ({endpoint}) is down: {reason}", card=endpoint), backend)

    def _recover_async(self, err: EngineError, failed: Backend) -> None:
        threading.Thread(target=self._recover, args=(err, failed), name="engine-recover", daemon=True).start()

    def _usable_backend(self) -> Backend | EngineError:
        """The backend to run on; while it is being rebuilt, wait only if every card answers."""
        if self._state == "recovering":
            down = card_probe.first_card_down(self.config.cards, health_offset=self.config.health_offset)
            if down:
                index, endpoint, reason = down
                return EngineError(
                    f"{card_probe.describe(index, endpoint, reason)}; answers resume when it is back", card=endpoint
                )
            self.wait_ready(RETRY_READY_S)
        backend = self._backend
        if backend is None or self._state != "ready":
            return EngineError(f"the engine is not available: {self._message}", card=self._down_card)
        return backend
