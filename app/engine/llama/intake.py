"""The step loop's inbox: each request is read — chat template, tokens, grammar — and each token count
answered on a thread of its own, so that no request holds the step loop (the answers already streaming)
for longer than its own step.

Messages are taken in the order they came: an answer's Cancel reaches the step loop after its request.
llama.cpp's tokenizer only reads the model's vocabulary, so it may run beside a llama_decode (llama-server
tokenizes on its HTTP threads the same way); the chat template and the grammar are Python and text.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from app.engine.events import EngineError, GenerationRequest
from app.engine.llama.messages import Cancel, Close, Count, Generate, ToEngine
from app.engine.llama.slots import Prepared

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ready:
    """A request read and ready to take a slot, or the error that refuses it."""

    job_id: int
    request: GenerationRequest
    prepared: Prepared | EngineError


StepMessage = Ready | Cancel | Close


class Intake:
    def __init__(
        self,
        receive: Callable[[], ToEngine],
        *,
        prepare: Callable[[GenerationRequest], Prepared],
        count: Callable[[Count], None],
    ) -> None:
        """`receive` blocks for the next message (raising EOFError or OSError when its sender is gone);
        `prepare` reads a request; `count` answers a Count to whoever asked."""
        self._receive = receive
        self._prepare = prepare
        self._count = count
        self._ready: queue.Queue[StepMessage] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="engine-intake", daemon=True)

    def start(self) -> Intake:
        self._thread.start()
        return self

    def next(self, block: bool) -> StepMessage | None:
        """The next message for the step loop (None: none waits and `block` is False)."""
        try:
            return self._ready.get(block=block)
        except queue.Empty:
            return None

    def _run(self) -> None:
        while True:
            try:
                message = self._receive()
            except (EOFError, OSError):  # the app went away: the loop ends as if closed
                message = Close()
            if isinstance(message, Count):
                self._count(message)
            elif isinstance(message, Generate):
                self._ready.put(Ready(message.job_id, message.request, self._read(message.request)))
            else:
                self._ready.put(message)
                if isinstance(message, Close):
                    return

    def _read(self, request: GenerationRequest) -> Prepared | EngineError:
        try:
            return self._prepare(request)
        except EngineError as err:
            return err
        except Exception as err:  # a request nothing above foresaw must not end the worker
            log.exception("reading a request failed")
            return EngineError(f"the engine could not read this request ({type(err).__name__})", kind="request")
