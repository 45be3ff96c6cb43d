"""The engine's front door with its worker process (engine_isolation on), on two real card agents:
`follow()`, exact token counts through the worker, error kinds, and "queued" told apart from "reading"."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from app.engine.events import Done, EngineError, Event, Failed, GenerationRequest, Message, Queued, Reading, Token
from app.engine.follow import follow
from app.engine.service import EngineService
from app.errors import QuartetError
from tests.engine_host import EngineHost

N_CTX = 1024


@pytest.fixture(scope="module")
def engine(engine_host: EngineHost) -> EngineService:
    service: EngineService = engine_host.service(isolated=True, n_ctx=N_CTX, parallel=2)
    return service


def ask(text: str, max_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest(messages=(Message("user", text),), temperature=0.0, max_tokens=max_tokens)


@dataclass
class Watched:
    """One answer's events as they came, each with the time it came, followed on a thread of its own."""

    events: list[tuple[float, Event]] = field(default_factory=list)
    thread: threading.Thread | None = None

    def kinds(self) -> list[str]:
        return [type(event).__name__ for _, event in self.events]

    def first(self, kind: type) -> float:
        return next(at for at, event in self.events if isinstance(event, kind))

    def end(self) -> Event:
        assert self.thread is not None
        self.thread.join(timeout=300)
        return self.events[-1][1]


def watch(engine: EngineService, request: GenerationRequest) -> Watched:
    watched = Watched()
    ticket = engine.submit(request)

    def run() -> None:
        for event in follow(ticket):
            watched.events.append((time.monotonic(), event))

    watched.thread = threading.Thread(target=run, daemon=True)
    watched.thread.start()
    return watched


def test_an_answer_with_a_free_slot_is_read_at_once_and_never_told_to_wait(engine: EngineService) -> None:
    alone = watch(engine, ask("Say hello."))
    assert isinstance(alone.end(), Done)
    kinds = alone.kinds()
    assert "Queued" not in kinds, kinds  # nobody was ahead: no "waiting, position 1"
    assert kinds[0] == "Reading" and kinds[-1] == "Done" and "Token" in kinds, kinds


def test_with_every_slot_full_the_next_answers_wait_then_are_read(engine: EngineService) -> None:
    # the two slots are given back one at a time (40 tokens, then 80): each waiting answer moves up in turn
    long = [watch(engine, ask(f"Tell a long story about ship number {i}.", max_tokens=40 * (i + 1))) for i in range(2)]
    deadline = time.monotonic() + 120
    while not all("Token" in w.kinds() for w in long) and time.monotonic() < deadline:
        time.sleep(0.02)  # both slots are generating now
    assert all(w.kinds()[0] == "Reading" for w in long)
    third = watch(engine, ask("Say yes.", max_tokens=4))
    fourth = watch(engine, ask("Say no.", max_tokens=4))
    assert all(isinstance(w.end(), Done) for w in [*long, third, fourth])
    third_queued = [e.position for _, e in third.events if isinstance(e, Queued)]
    fourth_queued = [e.position for _, e in fourth.events if isinstance(e, Queued)]
    assert third_queued and third_queued[0] == 1, third.kinds()  # two answers ahead in the slots, first in line
    assert fourth_queued[:1] == [2] and fourth_queued[-1] == 1, fourth_queued
    for waited in (third, fourth):
        kinds = waited.kinds()
        assert kinds.index("Reading") > max(i for i, k in enumerate(kinds) if k == "Queued")  # read after waiting
        assert kinds.index("Reading") < kinds.index("Token"), kinds
    first_free = min(w.first(Done) for w in long)
    # it got its slot only when one was given back; the two watcher threads stamp the events as they take
    # them, so the later event can be stamped first by a few µs (80 µs seen): 10 ms is well under one step
    assert third.first(Reading) >= first_free - 0.01


def test_token_counts_come_through_the_worker_and_are_exact(engine: EngineService) -> None:
    request = ask("Which is the longest river in Africa?", max_tokens=4)
    counted = engine.count_tokens(request)
    watched = watch(engine, request)
    done = watched.end()
    assert isinstance(done, Done) and done.stats.prompt_tokens == counted > 5
    assert engine.count_text([]) == []
    assert engine.count_text(["river " * 50])[0] in range(45, 106)


def test_follow_stops_an_answer_past_its_timeout_with_the_kind_timeout(engine: EngineService) -> None:
    ticket = engine.submit(ask("Write a very long essay about the history of bridges.", max_tokens=900))
    started = time.monotonic()
    events = list(follow(ticket, timeout=0.5))
    end = events[-1]
    assert isinstance(end, Failed) and end.kind == "timeout" and "0.5 s" in end.message, end
    assert time.monotonic() - started < 30 and any(isinstance(e, Token) for e in events)
    assert engine.status().queue.running == 0


def test_follow_stops_an_answer_when_cancelled_says_so(engine: EngineService) -> None:
    seen: list[Event] = []
    ticket = engine.submit(ask("Write a very long essay about the history of tunnels.", max_tokens=900))
    for event in follow(ticket, cancelled=lambda: sum(isinstance(e, Token) for e in seen) >= 3):
        seen.append(event)
    end = seen[-1]
    assert isinstance(end, Done) and end.stats.finish_reason == "cancelled"
    assert end.stats.generated_tokens < 40, end.stats


def test_an_overflowing_prompt_fails_with_the_kind_context(engine: EngineService) -> None:
    request = ask("Repeat after me. " + "alpha beta gamma delta " * 400)
    assert engine.count_tokens(request) > N_CTX
    end = list(follow(engine.submit(request)))[-1]
    assert isinstance(end, Failed) and end.kind == "context", end
    refused = EngineError("the appliance is busy", kind="busy")
    assert isinstance(refused, QuartetError) and refused.kind == "busy" and refused.card is None
    assert EngineError("card 2 is down", card="127.0.0.1:1").kind == "card"
