"""Several answers at once: continuous batching across the four cards (the shared appliance, parallel = 4)."""

from __future__ import annotations

import threading
import time
import urllib.request
from dataclasses import dataclass, field

import openai
import pytest

from tests.harness import API_KEY, Appliance, get_json, wait_until

PROMPTS = [
    "Describe a lighthouse at night.",
    "List five uses of copper.",
    "Explain how a bicycle gear works.",
    "Write a short letter to a neighbour about a lost cat.",
]


@dataclass
class Run:
    text: str = ""
    first_at: float | None = None
    ended_at: float | None = None
    finish: str | None = None
    error: str | None = None
    pieces: list[float] = field(default_factory=list)


def api(appliance: Appliance) -> openai.OpenAI:
    return openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=180)


def stream(appliance: Appliance, prompt: str, run: Run, *, max_tokens: int, leave_after: int = 0) -> None:
    """One streaming client; with `leave_after`, it closes the connection after that many pieces."""
    try:
        response = api(appliance).chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
            stream=True,
        )
        for chunk in response:
            for choice in chunk.choices:
                if choice.delta.content:
                    now = time.monotonic()
                    run.first_at = run.first_at or now
                    run.pieces.append(now)
                    run.text += choice.delta.content
                run.finish = choice.finish_reason or run.finish
            if leave_after and len(run.pieces) >= leave_after:
                response.close()
                break
    except openai.APIError as err:
        run.error = str(err)
    run.ended_at = time.monotonic()


def at_once(appliance: Appliance, prompts: list[str], *, max_tokens: int, **options: int) -> list[Run]:
    runs = [Run() for _ in prompts]
    threads = [
        threading.Thread(target=stream, args=(appliance, p, r), kwargs={"max_tokens": max_tokens, **options})
        for p, r in zip(prompts, runs, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return runs


def solo(appliance: Appliance, prompt: str, *, max_tokens: int) -> str:
    run = Run()
    stream(appliance, prompt, run, max_tokens=max_tokens)
    assert run.error is None, run.error
    return run.text


def common_words(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split(), b.split(), strict=False):
        if x != y:
            break
        n += 1
    return n


def test_four_clients_stream_at_once_and_each_gets_its_own_answer(appliance: Appliance) -> None:
    alone = [solo(appliance, p, max_tokens=48) for p in PROMPTS]
    runs = at_once(appliance, PROMPTS, max_tokens=48)
    for run in runs:
        assert run.error is None and run.text.strip(), run.error
    firsts = [r.first_at for r in runs if r.first_at]
    ends = [r.ended_at for r in runs if r.ended_at]
    assert len(firsts) == 4
    assert max(firsts) < min(ends), "an answer finished before another had its first token: not batched"
    # Temperature 0: each batched answer is the one its prompt gets alone, up to llama.cpp's batched
    # arithmetic (several rows take other kernels, which round differently and can flip a near tie:
    # test_engine_service measured a split after 5 words). Sequences mixing would part from the first
    # token on and resemble another prompt's answer more than their own.
    for i, batched in enumerate(runs):
        own = common_words(batched.text, alone[i])
        assert own >= min(4, len(alone[i].split())), f"{PROMPTS[i]!r}: batched {batched.text!r} vs {alone[i]!r}"
        assert all(own > common_words(batched.text, other) for j, other in enumerate(alone) if j != i)
    identical = sum(r.text == s for r, s in zip(runs, alone, strict=True))
    print(f"batched answers identical to their solo answers: {identical} of 4")


def test_stopping_one_of_four_lets_the_others_finish_and_frees_its_slot(appliance: Appliance) -> None:
    runs = [Run() for _ in range(5)]
    threads = [
        threading.Thread(target=stream, args=(appliance, PROMPTS[i % 4], runs[i]),
                         kwargs={"max_tokens": 160, "leave_after": 3 if i == 0 else 0})
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: all(r.first_at for r in runs[1:4]) and runs[0].ended_at, timeout=120)
    status = get_json(appliance.url + "/health")
    assert status["engine"] == "ready"
    # a fifth answer takes the freed slot while the other three still stream
    fifth = threading.Thread(target=stream, args=(appliance, "Name a colour.", runs[4]), kwargs={"max_tokens": 8})
    fifth.start()
    for thread in [*threads, fifth]:
        thread.join(timeout=300)
    left = runs[0]
    assert left.error is None and len(left.pieces) == 3
    for run in runs[1:4]:
        assert run.error is None and run.finish in ("stop", "length"), run
        assert len(run.pieces) > 3
    assert runs[4].first_at is not None and runs[4].error is None
    still_running = [r for r in runs[1:4] if r.ended_at and r.ended_at > runs[4].first_at]
    assert still_running, "the fifth answer only started once the other three were done"


def test_more_answers_than_slots_wait_with_their_place_in_line(appliance: Appliance) -> None:
    runs = at_once(appliance, [*PROMPTS, "Say hello.", "Say goodbye."], max_tokens=64)
    assert all(r.error is None and r.text for r in runs), [r.error for r in runs]
    firsts = sorted(r.first_at for r in runs if r.first_at)
    ends = sorted(r.ended_at for r in runs if r.ended_at)
    # six answers, four slots: at least one of them started only after another had ended
    assert firsts[-1] > ends[0]


def test_a_card_killed_while_four_answers_run_fails_all_four_naming_it(appliance: Appliance) -> None:
    cards = appliance.cards
    victim = 2
    endpoint = cards.settings.cards[victim]
    runs = [Run() for _ in PROMPTS]
    threads = [
        threading.Thread(target=stream, args=(appliance, p, r), kwargs={"max_tokens": 400})
        for p, r in zip(PROMPTS, runs, strict=True)
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: all(r.first_at for r in runs), timeout=120)
    cards.kill(victim)
    for thread in threads:
        thread.join(timeout=60)
    for run in runs:
        assert run.error is not None and f"card {victim} ({endpoint})" in run.error, run
    with urllib.request.urlopen(appliance.url + "/", timeout=5) as page:
        assert page.status == 200
    cards.start(victim)
    cards.wait_healthy(victim)
    wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)
    again = at_once(appliance, PROMPTS, max_tokens=8)
    assert all(r.error is None and r.text for r in again), [r.error for r in again]


@pytest.fixture(autouse=True)
def _engine_ready(appliance: Appliance) -> None:
    wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)
