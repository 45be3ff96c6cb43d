"""No upstream holds a slot for ever, and none is taken at its word: the upstream backend in process against a
misbehaving loopback fake (tests/misbehaving_upstream.py) that ignores max_tokens, sends only keep-alives or empty
deltas, one endless line, a 10 MB token, lines that are not JSON, stops mid-answer, or sends nothing at all. Each
answer ends bounded and named, its sink hears its Done or Failed (its slot is free), and the fake sees its
connection closed by Quartet. Through the engine service: four such answers, their clients gone, free every slot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from itertools import count

import pytest

from app.engine.backend import WorkerLost
from app.engine.engine_config import EngineConfig
from app.engine.events import Done, Event, Failed, GenerationRequest, Message, Token
from app.engine.follow import follow
from app.engine.kinds import backend_kind
from app.engine.meter import CacheUse
from app.engine.service import EngineService
from app.engine.upstream.answer import TEXT_PER_TOKEN
from app.engine.upstream.backend import UpstreamBackend
from app.engine.upstream.stream import MAX_LINE_BYTES, lines
from tests.harness import wait_until
from tests.misbehaving_upstream import WORDS, MisbehavingUpstream, Misbehaviour

QUICK_S = 5.0  # what any bounded end here takes at most (they take well under a second)
_JOBS = count(1)


def config(fake: MisbehavingUpstream, *, answer_s: float = 30.0, parallel: int = 4) -> EngineConfig:
    """The upstream backend on the fake; a silence may last 30 s (longer than any test), an answer `answer_s`."""
    return EngineConfig(
        backend="upstream",
        upstream_url=fake.url,
        n_ctx=2048,
        parallel=parallel,
        upstream_timeout_s=30.0,
        upstream_answer_s=answer_s,
    )


class Answer:
    """One answer's sink: the events it heard, and its end."""

    def __init__(self) -> None:
        self.events: list[Event | CacheUse] = []
        self.ended = threading.Event()

    def __call__(self, event: Event | CacheUse) -> None:
        assert not self.ended.is_set(), f"{event!r} after the answer's end"
        self.events.append(event)
        if isinstance(event, Done | Failed):
            self.ended.set()

    def end(self) -> Done | Failed:
        assert self.ended.wait(QUICK_S), f"the answer did not end within {QUICK_S} s: {self.events[-3:]!r}"
        last = self.events[-1]
        assert isinstance(last, Done | Failed)
        return last

    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, Token))


class Upstream:
    """A misbehaving fake and the upstream backend started against it (`lost`: what it reported lost)."""

    def __init__(self, misbehaviour: Misbehaviour, *, answer_s: float = 30.0) -> None:
        self.fake = MisbehavingUpstream(misbehaviour)
        self.lost: list[WorkerLost] = []
        self.backend = UpstreamBackend(
            config(self.fake, answer_s=answer_s), lambda _b, err, _jobs: self.lost.append(err)
        )
        self.backend.start()

    def ask(self, max_tokens: int = 50) -> tuple[int, Answer]:
        job, answer = next(_JOBS), Answer()
        request = GenerationRequest((Message("user", "Tell me a story."),), max_tokens=max_tokens)
        self.backend.submit(job, request, answer)
        return job, answer

    def close(self) -> None:
        self.backend.stop()
        self.fake.close()


Start = Callable[..., Upstream]  # (misbehaviour, *, answer_s) → an Upstream, closed after the test


@pytest.fixture
def start() -> Iterator[Start]:
    made: list[Upstream] = []

    def started(misbehaviour: Misbehaviour, *, answer_s: float = 30.0) -> Upstream:
        made.append(Upstream(misbehaviour, answer_s=answer_s))
        return made[-1]

    yield started
    for upstream in made:
        upstream.close()


def left(upstream: Upstream) -> None:
    """The fake saw its one answer's connection closed by Quartet."""
    served = wait_until(lambda: upstream.fake.served, QUICK_S, what="the fake's answer")
    assert served[0].left.wait(QUICK_S), "the upstream's request stayed open"


def test_a_polite_upstream_answers_whole_and_stops(start: Start) -> None:
    upstream = start("polite")
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Done) and end.stats.finish_reason == "stop"
    assert answer.text() == "".join(WORDS) and end.stats.generated_tokens == len(WORDS)


def test_the_upstream_is_asked_for_no_more_than_the_context_leaves(start: Start) -> None:
    """A /v1 request without max_tokens asks for engine.max_tokens_limit; vLLM refuses a prompt and max_tokens
    longer than its context, so the upstream is asked for at most the room the prompt leaves (n_ctx 2048)."""
    upstream = start("polite")
    _job, answer = upstream.ask(max_tokens=4096)
    assert isinstance(answer.end(), Done)
    asked = upstream.fake.served[0].asked["max_tokens"]
    assert 2000 < asked < 2048, asked


def test_an_upstream_that_ignores_max_tokens_is_cut_at_them_and_its_request_closed(start: Start) -> None:
    upstream = start("ignores_max_tokens")
    _job, answer = upstream.ask(max_tokens=50)
    end = answer.end()
    assert isinstance(end, Done) and end.stats.finish_reason == "length"
    assert end.stats.generated_tokens == 50 and answer.text() == "word " * 50
    assert upstream.fake.served[0].asked["max_tokens"] == 50  # it was asked, and ignored it
    left(upstream)


@pytest.mark.parametrize("misbehaviour", ["keep_alives", "empty_deltas"])
def test_a_stream_busy_with_nothing_ends_at_the_answer_deadline(start: Start, misbehaviour: Misbehaviour) -> None:
    upstream = start(misbehaviour, answer_s=0.5)  # its silence is never long: upstream_timeout_s is 30 s
    began = time.monotonic()
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Failed) and upstream.fake.url in end.message
    assert "did not finish the answer within 0.5 s (engine.upstream_answer_s)" in end.message
    assert 0.5 <= time.monotonic() - began < QUICK_S and not answer.text()
    left(upstream)
    assert not upstream.lost  # the upstream answers its /models: this answer failed, not the backend


@pytest.mark.parametrize("misbehaviour", ["silent", "mute"])
def test_a_silent_upstream_ends_at_the_answer_deadline(start: Start, misbehaviour: Misbehaviour) -> None:
    upstream = start(misbehaviour, answer_s=0.5)
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Failed) and "within 0.5 s" in end.message and upstream.fake.url in end.message
    left(upstream)


@pytest.mark.parametrize("misbehaviour", ["silent", "mute", "keep_alives"])
def test_stop_closes_the_upstreams_request_at_once_also_while_it_sends_nothing(
    start: Start, misbehaviour: Misbehaviour
) -> None:
    """A client that leaves cancels its answer: the request closes now, not at the upstream's next chunk (a
    silent one sends none: before, Stop waited for upstream_timeout_s, and then the slot was free)."""
    upstream = start(misbehaviour)
    job, answer = upstream.ask()
    wait_until(lambda: upstream.fake.served, QUICK_S, what="the fake's answer")
    stopped = time.monotonic()
    upstream.backend.cancel(job)
    end = answer.end()
    assert isinstance(end, Done) and end.stats.finish_reason == "cancelled"
    left(upstream)
    assert time.monotonic() - stopped < 2.0


@pytest.mark.parametrize("misbehaviour", ["endless_line", "huge_token"])
def test_a_line_past_the_bound_ends_the_answer_and_none_of_it_is_passed(
    start: Start, misbehaviour: Misbehaviour
) -> None:
    upstream = start(misbehaviour)
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Failed) and upstream.fake.url in end.message
    assert f"sent a line of more than {MAX_LINE_BYTES // 1024} KiB" in end.message
    assert not answer.text()  # the 10 MB "token" reached nobody
    left(upstream)


def test_an_error_with_an_endless_body_is_read_in_part_and_named(start: Start) -> None:
    upstream = start("endless_error")
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Failed) and f"the upstream at {upstream.fake.url} answered 500: xxx" in end.message
    assert len(end.message) < 400
    left(upstream)


def test_a_compressed_stream_is_refused_unread(start: Start) -> None:
    upstream = start("compressed")
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Failed) and "sent its stream compressed (gzip), though asked not to" in end.message
    assert upstream.fake.served[0].asked and not answer.text()
    left(upstream)


def test_the_line_reader_holds_no_more_than_its_bound_of_an_endless_line() -> None:
    """What the app buffers of an endless line: the bound and one piece, then the line fails (the issue saw the
    app grow by 1.2 MB/s on one)."""
    read = 0

    def endless() -> Iterator[bytes]:
        nonlocal read
        yield b"data: ok\r\n: comment\nda"
        while True:
            read += 65536
            yield b"x" * 65536

    reader = lines(endless(), name="the upstream at test", limit=1 << 20)
    assert [next(reader), next(reader)] == [b"data: ok", b": comment"]
    with pytest.raises(Exception, match="the upstream at test sent a line of more than 1024 KiB"):
        next(reader)
    assert read <= (1 << 20) + 65536


def test_big_tokens_within_the_line_bound_are_cut_to_the_answers_text_bound(start: Start) -> None:
    upstream = start("big_tokens")
    _job, answer = upstream.ask(max_tokens=50)
    end = answer.end()
    assert isinstance(end, Done) and end.stats.finish_reason == "length"
    assert answer.text() == "y" * 50 * TEXT_PER_TOKEN  # of 100,000
    left(upstream)


def test_malformed_lines_are_skipped_counted_and_logged_once(start: Start, caplog: pytest.LogCaptureFixture) -> None:
    upstream = start("malformed")
    with caplog.at_level(logging.WARNING, logger="app.engine.upstream.backend"):
        _job, answer = upstream.ask()
        end = answer.end()
    assert isinstance(end, Done) and end.stats.finish_reason == "stop"
    assert answer.text() == "".join(WORDS[:3])
    said = [r.getMessage() for r in caplog.records if r.name == "app.engine.upstream.backend"]
    assert len(said) == 1, said  # one line for the answer, not one per bad line
    assert f"skipped 200 line(s) from {upstream.fake.url}" in said[0] and "garbage without a field" in said[0]


@pytest.mark.parametrize("misbehaviour", ["cut", "reset"])
def test_a_stream_cut_mid_answer_fails_naming_the_upstream_never_stop(start: Start, misbehaviour: Misbehaviour) -> None:
    upstream = start(misbehaviour)
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Failed), f"a cut stream ended as {end!r}"
    assert f"the upstream at {upstream.fake.url} broke off the answer" in end.message
    assert answer.text() == WORDS[0]
    assert not upstream.lost  # the server still answers: the backend stays


def test_an_upstream_killed_mid_answer_fails_it_and_is_lost(start: Start) -> None:
    upstream = start("dies")
    _job, answer = upstream.ask()
    end = answer.end()
    assert isinstance(end, Failed) and "broke off the answer" in end.message
    lost = wait_until(lambda: upstream.lost, QUICK_S, what="the backend lost")
    assert upstream.fake.url in str(lost[0]) and not upstream.backend.alive()


def test_four_endless_answers_whose_clients_left_free_every_slot() -> None:
    """The issue's finding through the engine service: four answers that never end hold all four slots; their
    clients leave; every slot is free again, every upstream request closed, and the next answer runs."""
    fake = MisbehavingUpstream("keep_alives")
    engine = EngineService(config(fake, parallel=4), kinds=backend_kind)
    engine.start()
    try:
        assert engine.wait_ready(QUICK_S)
        request = GenerationRequest((Message("user", "Tell me a story."),), max_tokens=50)
        tickets = [engine.submit(request) for _ in range(4)]
        wait_until(lambda: len(fake.served) == 4 and engine.status().running == 4, QUICK_S, what="four running")
        for ticket in tickets:
            ticket.cancel()  # each client leaves
        assert all(served.left.wait(QUICK_S) for served in fake.served)
        wait_until(lambda: engine.status().running == 0, QUICK_S, what="every slot free")
        fake.misbehaviour = "polite"
        events = list(follow(engine.submit(request), timeout=QUICK_S))
        assert isinstance(events[-1], Done) and events[-1].stats.finish_reason == "stop"
        assert "".join(e.text for e in events if isinstance(e, Token)) == "".join(WORDS)
    finally:
        engine.stop()
        fake.close()
