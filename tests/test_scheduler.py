"""The scheduler (app/engine/service.py) on a scripted backend (tests/scripted_backend.py): the queue, the
slots, holds, cancellation, model switches and lost backends, step by step. No model, no cards, no clock:
each test moves the answers itself and takes milliseconds. Every answer asked ends with exactly one Done or
Failed, and nothing after it (`Line.close`, after every test)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import pytest

from app.engine import service as scheduler
from app.engine import supervisor
from app.engine.backend import Down
from app.engine.events import (
    Capabilities,
    Done,
    EngineError,
    Failed,
    GenerationRequest,
    Message,
    ModelInfo,
    Queued,
    Reading,
    Token,
)
from app.engine.queue_view import empty_stats
from tests.harness import wait_until
from tests.scheduler_answers import Answer
from tests.scripted_backend import Script, Stage

SCRIPTS = {
    "long": Script(tuple(f"w{i} " for i in range(100))),  # runs until stopped
    "reading": Script(("late",), read=100),  # in a slot, no token yet
}
CARD = "127.0.0.1:2"
SWITCHING = "switching to Model B"
NOTICE = f"the answer was stopped: the administrator is {SWITCHING}"


class Line:
    """A started scheduler on a scripted backend, and every answer asked of it."""

    def __init__(self, stage: Stage, **settings: int) -> None:
        self.stage = stage
        self.config = scheduler.EngineConfig(model_name="Model A", cards=("127.0.0.1:1",), **settings)  # type: ignore[arg-type]
        self.service = scheduler.EngineService(self.config, kinds=stage.kinds)
        self.answers: list[Answer] = []
        self.service.start()

    def ask(self, text: str, **options: bool) -> Answer:
        request = GenerationRequest(messages=(Message("user", text),), **options)  # type: ignore[arg-type]
        answer = Answer(self.service.submit(request))
        self.answers.append(answer)
        return answer

    def switch(self, model: str, grace_s: float) -> Future[ModelInfo]:
        """A switch to `model`, under way on a thread of its own (it returns when the new model is ready)."""
        pool = ThreadPoolExecutor(1)
        future = pool.submit(self.service.switch, replace(self.config, model_name=model), grace_s=grace_s)
        pool.shutdown(wait=False)
        return future

    def close(self) -> None:
        self.service.stop()
        for answer in self.answers:
            answer.settle()
        queue = self.service.status().queue
        assert (queue.running, queue.waiting) == (0, 0), queue


@pytest.fixture
def line(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Line]]:
    """`line(parallel=2, ...)`: a started scheduler on a scripted backend, ready; closed after the test."""
    monkeypatch.setattr(supervisor, "RETRY_S", 0.01)  # what is down is looked at again (the loader)
    monkeypatch.setattr(scheduler, "RETRY_S", 0.01)  # a hold is looked at again (the dispatcher)
    lines: list[Line] = []

    def make(stage: Stage | None = None, **settings: int) -> Line:
        lines.append(Line(stage or Stage(dict(SCRIPTS)), **settings))
        assert lines[-1].service.wait_ready(10), lines[-1].service.status()
        return lines[-1]

    yield make
    for made in lines:
        made.close()


def test_waiting_answers_hear_their_places_in_order_and_move_up_as_slots_free(line: Callable[..., Line]) -> None:
    q = line(parallel=2)
    a, b = q.ask("a1 a2"), q.ask("b1 b2 b3")
    backend = q.stage.wait_jobs(a.id, b.id)
    c, d, e = q.ask("c1 c2 c3 c4 c5"), q.ask("d1"), q.ask("e1")
    assert [c.next(), d.next(), e.next()] == [Queued(1), Queued(2), Queued(3)]
    backend.step(2)  # a ends: its slot goes to c, the others move up
    assert a.finished() == ("stop", 2) and a.text() == "a1 a2 "
    assert [c.next(), d.next(), e.next()] == [Reading(), Queued(1), Queued(2)]
    q.stage.wait_jobs(b.id, c.id).step()  # b ends
    assert [d.next(), e.next()] == [Reading(), Queued(1)]
    q.stage.wait_jobs(c.id, d.id).step()  # d ends
    assert e.next() == Reading()
    q.stage.wait_jobs(c.id, e.id).step(3)
    assert all(isinstance(x.end(), Done) for x in (b, c, d, e)) and c.text() == "c1 c2 c3 c4 c5 "
    assert [x.positions() for x in (a, b, c, d, e)] == [[], [], [1], [2, 1], [3, 2, 1]]
    assert backend.submitted == [a.id, b.id, c.id, d.id, e.id]


def test_slots_are_taken_first_come_first_served_never_more_than_parallel(line: Callable[..., Line]) -> None:
    q = line(parallel=3)
    answers = [q.ask(f"t{i}") for i in range(7)]
    for wave in (answers[:3], answers[3:6], answers[6:]):  # each step ends every answer in a slot
        backend = q.stage.wait_jobs(*(x.id for x in wave))
        backend.step()
        assert [x.finished() for x in wave] == [("stop", 1)] * len(wave)
    assert backend.submitted == [x.id for x in answers] and backend.peak == 3
    assert [x.positions()[:1] for x in answers[3:]] == [[1], [2], [3], [4]]
    assert [x.text() for x in answers] == [f"t{i} " for i in range(7)]


def test_background_work_takes_its_slots_and_people_go_first(line: Callable[..., Line]) -> None:
    q = line(parallel=3, background_slots=1)
    parts = [q.ask(f"part{i}", background=True) for i in range(3)]
    assert [p.next() for p in parts[1:]] == [Queued(1), Queued(2)]
    person, other = q.ask("p1 p2 p3"), q.ask("o1 o2 o3")  # they came last and start first
    backend = q.stage.wait_jobs(parts[0].id, person.id, other.id)
    queue = q.service.status().queue
    assert (queue.background, queue.background_slots, queue.background_waiting) == (1, 1, 2)
    backend.step()  # the first part ends: the second takes the one background slot
    assert parts[0].finished() == ("stop", 1)
    assert [parts[1].next(), parts[2].next()] == [Reading(), Queued(1)]
    q.stage.wait_jobs(person.id, other.id, parts[1].id).step(2)
    assert parts[2].next() == Reading() and person.end() and other.end() and person.positions() == []


def test_a_waiting_answer_cancelled_leaves_the_line_and_the_others_move_up(line: Callable[..., Line]) -> None:
    q = line(parallel=1)
    running = q.ask("long")
    backend = q.stage.wait_jobs(running.id)
    b, c, d = q.ask("b1"), q.ask("c1"), q.ask("d1")
    assert [b.next(), c.next(), d.next()] == [Queued(1), Queued(2), Queued(3)]
    c.ticket.cancel()
    assert c.next() == Done(empty_stats("cancelled")) and d.next() == Queued(2)
    assert q.service.status().queue.waiting == 2 and c.id not in backend.submitted
    backend.step()
    running.ticket.cancel()  # a running answer ends at its next step, with what it said
    assert running.until(Token) == Token("w0 ") and backend.cancels == [running.id]
    backend.step()
    assert running.finished() == ("cancelled", 1)
    assert [b.next(), d.next()] == [Reading(), Queued(1)]
    q.stage.wait_jobs(b.id).step()
    assert d.until(Reading) and q.stage.wait_jobs(d.id)
    q.stage.backend.step()
    assert b.finished() == ("stop", 1) and d.finished() == ("stop", 1)


def test_a_hold_keeps_new_answers_waiting_with_its_reason_and_releases_them(line: Callable[..., Line]) -> None:
    q = line(parallel=2)
    running = q.ask("r1 r2 r3")
    backend = q.stage.wait_jobs(running.id)
    why: list[str | None] = ["card 2 is too hot (91 °C)"]
    q.service.hold_when(lambda: why[0])
    a = q.ask("a1")
    assert a.next() == Queued(1, why[0])
    b = q.ask("b1")
    assert b.next() == Queued(2, why[0]) and q.service.status().queue.held == why[0]
    backend.step(2)  # the running answer goes on
    why[0] = None
    assert a.next() == Reading() and b.next() == Queued(1)
    q.stage.wait_jobs(running.id, a.id).step()
    assert running.finished() == ("stop", 3)
    assert b.until(Reading) and q.stage.wait_jobs(b.id)
    backend.step()
    assert a.end() and b.end() and q.service.status().queue.held is None


def test_a_switch_waits_for_running_answers_within_the_grace(line: Callable[..., Line]) -> None:
    q = line(parallel=2)
    a = q.ask("a1 a2 a3")
    old = q.stage.wait_jobs(a.id)
    old.step()
    switched = q.switch("Model B", grace_s=60)
    wait_until(lambda: q.service.status().switching == SWITCHING, timeout=10, every=0.002)
    b = q.ask("b1")
    assert b.next() == Queued(1, SWITCHING)
    old.step(2)
    assert a.finished() == ("stop", 3) and a.text() == "a1 a2 a3 "
    assert switched.result(timeout=10).name == "Model B" and old.stopped
    assert b.next() == Reading() and q.stage.wait_jobs(b.id) is not old
    q.stage.backend.step()
    assert b.end() and q.service.loaded()[0] == "Model B" and old.cancels == []


def test_a_switch_stops_answers_past_the_grace_with_a_notice(line: Callable[..., Line]) -> None:
    q = line(parallel=2)
    a, b = q.ask("long"), q.ask("reading")
    old = q.stage.wait_jobs(a.id, b.id)
    old.step()
    switched = q.switch("Model B", grace_s=0)
    wait_until(lambda: old.cancels == [a.id, b.id], timeout=10, every=0.002)
    old.step()
    assert a.end() == Failed(NOTICE) and b.end() == Failed(NOTICE) and a.text() == "w0 "
    assert switched.result(timeout=10).name == "Model B"


@pytest.mark.parametrize("deaf", ["ignore_cancel", "hung"])
def test_answers_whose_backend_ignores_the_stop_end_once_after_the_drain(
    line: Callable[..., Line], monkeypatch: pytest.MonkeyPatch, deaf: str
) -> None:
    monkeypatch.setattr(scheduler, "_DRAIN_S", 0.05)
    q = line(parallel=2)
    a, b = q.ask("long"), q.ask("reading")
    old = q.stage.wait_jobs(a.id, b.id)
    old.step()
    setattr(old, deaf, True)
    assert q.switch("Model B", grace_s=0).result(timeout=10).name == "Model B"
    assert a.end() == Failed(NOTICE) and b.end() == Failed(NOTICE)
    setattr(old, deaf, False)
    old.step(3)  # what the old backend says afterwards reaches nobody (Line.close checks)
    c = q.ask("c1")
    q.stage.wait_jobs(c.id).step()
    assert c.finished() == ("stop", 1)


def test_stop_ends_the_answer_for_its_caller_while_a_hung_card_holds_its_step(
    line: Callable[..., Line], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler, "STOP_GRACE_S", 0.05)
    q = line(parallel=1)
    a = q.ask("long")
    backend = q.stage.wait_jobs(a.id)
    backend.step()
    backend.hung = True  # a card that hangs: no step ends, the cancel is never honoured
    a.ticket.cancel()
    assert a.finished() == ("cancelled", 1)  # the caller hears the end at once, with what it heard...
    assert q.service.status().queue.running == 1  # ...while the slot stays taken: the backend still holds it
    b = q.ask("b1")
    assert b.next() == Queued(1)
    backend.die("card 0 (127.0.0.1:1) stopped responding", card="127.0.0.1:1")  # the step timeout ends the worker
    assert b.until(Reading)  # a's slot is free again; a hears nothing more (Line.close checks)
    q.stage.wait_jobs(b.id).step()
    assert b.finished() == ("stop", 1)


def test_a_model_that_does_not_load_gives_the_old_one_back(line: Callable[..., Line]) -> None:
    q = line(Stage(dict(SCRIPTS), broken={"Model B"}))
    with pytest.raises(EngineError, match=r"^Model B could not be loaded .*; Model A is loaded again$"):
        q.switch("Model B", grace_s=0).result(timeout=10)
    a = q.ask("a1")
    q.stage.wait_jobs(a.id).step()
    assert a.end() and q.service.loaded()[0] == "Model A" and len(q.stage.built) == 3


def test_a_lost_card_fails_every_running_answer_naming_it_until_it_is_back(line: Callable[..., Line]) -> None:
    q = line(parallel=2)
    a, b = q.ask("long"), q.ask("reading")
    backend = q.stage.wait_jobs(a.id, b.id)
    backend.step()
    q.stage.down = Down("card 2 (127.0.0.1:2)", CARD, "not responding")
    backend.die("card 2 (127.0.0.1:2) stopped answering during the answer", card=CARD)
    for answer in (a, b):  # no retry: the card is named
        assert answer.end() == Failed("card 2 (127.0.0.1:2) stopped answering during the answer", CARD, "card")
    wait_until(lambda: q.service.status().state == "recovering", timeout=10, every=0.002)
    assert q.service.status().down_card == CARD
    c = q.ask("c1")
    assert c.next() == Failed("card 2 (127.0.0.1:2) is not responding; answers resume when it is back", CARD, "card")
    q.stage.down = None
    assert q.service.wait_ready(10)
    d = q.ask("d1")
    q.stage.wait_jobs(d.id).step()
    assert d.finished() == ("stop", 1) and len(q.stage.built) == 2


def test_a_lost_worker_retries_once_the_answers_that_had_said_nothing(line: Callable[..., Line]) -> None:
    q = line(parallel=2)
    spoke, silent = q.ask("long"), q.ask("reading")
    first = q.stage.wait_jobs(spoke.id, silent.id)
    first.step()
    first.die()
    assert spoke.end() == Failed("the engine worker stopped during an answer")
    second = q.stage.wait_jobs(silent.id)  # the rebuilt backend took it again
    assert second is not first and [silent.next(), silent.next()] == [Reading(), Reading()]
    second.die()  # once only
    assert silent.end() == Failed("the engine worker stopped during an answer")
    q.stage.scripts["reading"] = Script(("now",))
    again = q.ask("reading")
    q.stage.wait_jobs(again.id).step()
    assert again.finished() == ("stop", 1) and len(q.stage.built) == 3


def test_answers_on_a_worker_that_froze_are_not_retried(line: Callable[..., Line]) -> None:
    """The engine made no progress with every card answering: one of its answers may be why, and would freeze
    the rebuilt engine too (issue 47: 100,000 tiny messages froze it twice)."""
    q = line(parallel=2)
    silent = q.ask("reading")
    first = q.stage.wait_jobs(silent.id)
    first.die("the engine made no progress for 30 s (every card answers); restarting it", retry=False)
    assert silent.end() == Failed("the engine made no progress for 30 s (every card answers); restarting it")
    assert q.service.wait_ready(10)
    after = q.ask("c1")
    q.stage.wait_jobs(after.id).step()
    assert after.finished() == ("stop", 1) and len(q.stage.built) == 2


def test_stopping_the_service_ends_every_answer_once(line: Callable[..., Line]) -> None:
    q = line(parallel=2)
    spoke, silent = q.ask("long"), q.ask("reading")
    backend = q.stage.wait_jobs(spoke.id, silent.id)
    backend.step()
    waiting = q.ask("w1")
    assert waiting.next() == Queued(1)
    q.service.stop()
    for answer in (spoke, silent):
        assert answer.end() == Failed("the engine stopped before the answer ended")
    assert waiting.end() == Failed("the engine is shutting down")
    backend.step(3)  # the stopped backend's last words reach nobody (Line.close checks)
    waiting.ticket.cancel()  # nor does a cancel after its end
    with pytest.raises(EngineError, match=r"^the engine is shutting down; try again once it is back$"):
        q.ask("late")  # nobody would serve it


def test_stopping_while_an_answer_waits_for_the_rebuilt_backend_ends_it_once(line: Callable[..., Line]) -> None:
    q = line(parallel=1)
    silent = q.ask("reading")
    backend = q.stage.wait_jobs(silent.id)
    backend.stop_gate = gate = threading.Event()  # the rebuild waits for the lost backend to stop
    backend.die()  # it is taken again, and waits for the rebuilt backend
    wait_until(lambda: q.service.status().queue.running == 1, timeout=10, every=0.002)
    q.service.stop()
    gate.set()
    assert silent.end() == Failed("the engine stopped before the answer ended")


def test_a_full_queue_refuses_new_answers_as_busy(line: Callable[..., Line]) -> None:
    q = line(parallel=1, max_queue=2)
    running = q.ask("long")
    q.stage.wait_jobs(running.id)
    q.ask("b1"), q.ask("c1")
    with pytest.raises(EngineError, match="2 answers are waiting") as refused:
        q.service.submit(GenerationRequest(messages=(Message("user", "d1"),)))
    assert refused.value.kind == "busy"


def test_the_status_says_what_the_loaded_backend_can_do(line: Callable[..., Line]) -> None:
    q = line(Stage(capabilities=Capabilities(logprobs=False, placement=False)), parallel=3, background_slots=5)
    status = q.service.status()
    assert (status.queue.parallel, status.queue.background_slots, status.isolated) == (3, 3, False)
    model = status.model
    assert model is not None and model.name == "Model A" and model.backend == "scripted"
    assert not model.can("logprobs") and not model.can("placement") and model.can("json_schema")
