"""The whole appliance through its named API: four real cards, the engine worker, the web app."""

from __future__ import annotations

import signal
import threading
import time
import urllib.request
from typing import Any

import pytest
from gradio_client.exceptions import AppError

from app.telemetry.views import ApplianceStatus
from app.ui import display, panels
from tests.gradio_api import Client
from tests.harness import STEP_TIMEOUT_S, Appliance, api_client, get_json, wait_until


def client(appliance: Appliance) -> Client:
    return api_client(appliance.url)


def status(appliance: Appliance) -> dict[str, Any]:
    result: dict[str, Any] = client(appliance).predict(api_name="/status")
    return result


def test_layers_are_on_the_four_cards(appliance: Appliance) -> None:
    found = status(appliance)
    assert found["state"] == "ready"
    assert found["isolated"] is True
    assert found["model"]["n_layers"] == 18
    cards = found["cards"]
    assert [c["endpoint"] for c in cards] == appliance.endpoints
    placed = sorted(layer for card in cards for layer in card["layers"])
    assert placed == list(range(19))
    for card in cards:
        assert card["state"] == "up"
        assert card["layers"], f"card {card['index']} holds no layers"

    def holding() -> bool:  # the card agent's own memory reading (sampled twice a second, so read it again
        # after an earlier test's reload): each card holds at least the weights it was sent
        return all(c["mem_used_bytes"] > c["layer_bytes"] > 1_000_000 for c in status(appliance)["cards"])

    wait_until(holding, timeout=20, every=0.5)


def test_every_page_handler_is_handed_what_it_asks_for(appliance: Appliance) -> None:
    """Gradio hands a handler the request only where its annotations say so and fills a parameter it cannot see
    with None, warning as the app builds its pages: so a logged-in person's version arrows (a functools.partial)
    looked for the browser's chats instead of the person's."""
    said = "".join(p.read_text(errors="replace") for p in sorted(appliance.log_dir.glob("app-*.log")))
    wrong = [line for line in said.splitlines() if "arguments for function" in line or "Filling with None" in line]
    assert "Quartet ready" in said and not wrong, wrong


def test_chat_streams_tokens(appliance: Appliance) -> None:
    job = client(appliance).submit("Say hello to the four cards.", "", "", 32, api_name="/chat")
    texts = [out[0] for out in job]
    answer, cid, progress = job.result()
    assert len(texts) >= 3, "the answer arrived in one piece, not streamed"
    assert texts[-1] == answer and answer.strip()
    assert any(0 < len(t) < len(answer) for t in texts), "no partial answer was streamed"
    stats = progress["stats"]
    assert progress["done"] is True
    assert 0 < stats["generated_tokens"] <= 32
    assert stats["ttft_s"] > 0 and stats["decode_tps"] > 0
    saved = client(appliance).predict(cid, api_name="/history")
    assert [m["role"] for m in saved] == ["user", "assistant"]
    assert saved[1]["content"] == answer and saved[1]["stats"]["generated_tokens"] == stats["generated_tokens"]


def test_stop_frees_the_engine_within_half_a_second(appliance: Appliance) -> None:
    c = client(appliance)
    job = c.submit("Write a very long story about a lighthouse keeper.", "", "", 1000, api_name="/chat")
    wait_until(lambda: job.outputs() and job.outputs()[-1][0], timeout=60)
    asked = time.monotonic()
    assert c.predict(api_name="/stop") is True
    _answer, _cid, progress = job.result(timeout=10)
    assert progress["stats"]["finish_reason"] == "cancelled"
    assert progress["stats"]["generated_tokens"] < 1000
    found = wait_until(lambda: (s := status(appliance)) and not s["queue"]["running"] and s, timeout=2, every=0.02)
    # measured inside the engine: from the cancel to the engine taking the next answer
    assert found["last_cancel_s"] < 0.5, f"the engine was busy {found['last_cancel_s']} s after Stop"
    # and seen from the client, HTTP round trips on a busy 2-core machine included
    assert time.monotonic() - asked < 2.0


def test_a_client_that_leaves_cancels_its_answer(appliance: Appliance) -> None:
    c = client(appliance)
    job = c.submit("Write a very long poem about rivers.", "", "", 1000, api_name="/chat")
    wait_until(lambda: job.outputs() and job.outputs()[-1][0], timeout=60)
    job.cancel()
    wait_until(lambda: not status(appliance)["queue"]["running"], timeout=3)
    history = status(appliance)["last_stats"]
    assert history["finish_reason"] == "cancelled"


def test_two_chats_at_once_stream_side_by_side(appliance: Appliance) -> None:
    results: dict[str, Any] = {}
    first: dict[str, float] = {}

    def chat(name: str, delay: float) -> None:
        time.sleep(delay)
        job = client(appliance).submit(f"Chat {name}: tell me about GPUs.", "", "", 48, api_name="/chat")
        for text, _cid, _progress in job:
            if text and name not in first:
                first[name] = time.monotonic()
        results[name] = (*job.result(), time.monotonic())

    threads = [threading.Thread(target=chat, args=("a", 0.0)), threading.Thread(target=chat, args=("b", 0.3))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert set(results) == {"a", "b"}
    for answer, _cid, progress, _ended in results.values():
        assert answer.strip() and progress["done"]
    assert first["b"] < results["a"][3], "the second chat waited for the first to finish: no batching"


def test_a_conversation_survives_an_app_restart(appliance: Appliance) -> None:
    answer, cid, _ = client(appliance).predict("My name is Ada.", "", "", 16, api_name="/chat")
    appliance.restart()
    saved = client(appliance).predict(cid, api_name="/history")
    assert [m["content"] for m in saved] == ["My name is Ada.", answer]
    _follow, same, progress = client(appliance).predict("What is my name?", cid, "", 16, api_name="/chat")
    assert same == cid
    assert progress["stats"]["prompt_tokens"] > 15  # the earlier turn is part of the prompt
    assert len(client(appliance).predict(cid, api_name="/history")) == 4


def test_a_card_killed_mid_answer_fails_that_answer_only(appliance: Appliance) -> None:
    cards = appliance.card_agents
    victim = 2
    endpoint = cards.endpoints[victim]
    c = client(appliance)
    job = c.submit("Write a long essay about the history of computing.", "", "", 1000, api_name="/chat")
    wait_until(lambda: job.outputs() and job.outputs()[-1][0], timeout=60)
    cards.kill(victim)
    with pytest.raises(AppError) as failure:
        job.result(timeout=30)
    assert f"card {victim} ({endpoint})" in str(failure.value)
    # the app still serves pages and says which card is down
    with urllib.request.urlopen(appliance.url + "/", timeout=5) as page:
        assert page.status == 200
    down = wait_until(
        lambda: (s := status(appliance))["state"] != "ready" and s["cards"][victim]["state"] == "down" and s,
        timeout=5,
    )
    assert down["down_card"] == endpoint
    with pytest.raises(AppError, match=rf"card {victim}"):
        c.predict("Are you there?", "", "", 8, api_name="/chat")
    # the card comes back: so does the engine, without restarting the app
    cards.start(victim)
    cards.wait_healthy(victim)
    wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)
    _answer, _cid, progress = client(appliance).predict("Hello again.", "", "", 8, api_name="/chat")
    assert progress["done"] and progress["stats"]["generated_tokens"] > 0


def test_a_card_lost_while_idle_is_noticed_before_anyone_asks(appliance: Appliance) -> None:
    cards = appliance.card_agents
    victim = 1
    endpoint = cards.endpoints[victim]
    cards.kill(victim)
    found = wait_until(lambda: (s := status(appliance))["down_card"] == endpoint and s, timeout=5)
    assert found["state"] == "recovering"
    started = time.monotonic()
    with pytest.raises(AppError, match=rf"card {victim} \({endpoint}\)"):
        client(appliance).predict("Anyone there?", "", "", 8, api_name="/chat")
    assert time.monotonic() - started < 5, "a chat waited for a card that is down instead of saying so"
    cards.start(victim)
    cards.wait_healthy(victim)
    wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)
    _answer, _cid, progress = client(appliance).predict("Back?", "", "", 8, api_name="/chat")
    assert progress["stats"]["generated_tokens"] > 0


def test_a_card_restarted_between_answers_costs_no_answer(appliance: Appliance) -> None:
    cards = appliance.card_agents
    cards.kill(3)
    cards.start(3)
    cards.wait_healthy(3)
    _answer, _cid, progress = client(appliance).predict("Still fine?", "", "", 8, api_name="/chat")
    assert progress["done"] and progress["stats"]["generated_tokens"] > 0


def _wait_for_stall(job: Any, quiet_s: float = 1.5) -> None:
    """Return once the streamed answer has not grown for `quiet_s` (every step needs every card)."""
    last, since = len(job.outputs()[-1][0]), time.monotonic()
    deadline = since + 30
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, "the answer kept streaming with a card stopped"
        time.sleep(0.1)
        now = len(job.outputs()[-1][0])
        if now != last:
            last, since = now, time.monotonic()


def test_a_card_that_hangs_mid_answer_cannot_freeze_the_box(appliance: Appliance) -> None:
    """SIGSTOP: the card neither dies nor answers, and ggml-rpc would wait in a socket read forever."""
    cards = appliance.card_agents
    victim = 1
    endpoint = cards.endpoints[victim]
    c = client(appliance)
    job = c.submit("Write a long essay about the history of lighthouses.", "", "", 1000, api_name="/chat")
    wait_until(lambda: job.outputs() and job.outputs()[-1][0], timeout=60)
    cards.procs[victim].send_signal(signal.SIGSTOP)
    try:
        hung_at = time.monotonic()
        # Stop only once the engine is inside a step on the stopped card: pressed between two steps (card 1 may
        # have finished its share of one), it would end the answer cleanly before the hang touched it.
        _wait_for_stall(job)
        stopped = time.monotonic()
        assert c.predict(api_name="/stop") is True  # Stop ends the answer for the person at once, hung card or not
        _answer, _cid, progress = job.result(timeout=10)
        assert progress["stats"]["finish_reason"] == "cancelled"
        assert time.monotonic() - stopped < 2.0, f"the answer ended {time.monotonic() - stopped:.1f} s after Stop"
        health = wait_until(lambda: (h := get_json(appliance.url + "/health"))["engine"] != "ready" and h, timeout=10)
        assert endpoint in health["message"]  # /health never says "ready" while a card does not answer
        with urllib.request.urlopen(appliance.url + "/", timeout=5) as page:  # the app serves meanwhile
            assert page.status == 200
        seen = wait_until(  # the step timeout ends the worker still held in the stopped card's step
            lambda: (
                (s := status(appliance))["cards"][victim]["state"] == "not-responding" and s["state"] != "ready" and s
            ),
            timeout=STEP_TIMEOUT_S + 10,
        )
        took = time.monotonic() - hung_at
        assert took < STEP_TIMEOUT_S + 8, f"the engine noticed the hung card {took:.1f} s after it stopped"
        assert seen["down_card"] == endpoint
        typed = ApplianceStatus.model_validate(seen)  # what the pages render, read back from /status
        assert f"card {victim} not responding" in display.header_html(typed)
        assert "not responding" in panels.card_strip(typed, compact=True)  # the kiosk's strip and the Cards tab
        asked = time.monotonic()
        with pytest.raises(AppError, match=rf"card {victim} \({endpoint}\).*not responding"):
            c.predict("Are you there?", "", "", 8, api_name="/chat")
        assert time.monotonic() - asked < 8, "a new answer waited on the hung card instead of saying so"
    finally:
        cards.procs[victim].send_signal(signal.SIGCONT)
    wait_until(lambda: get_json(appliance.url + "/health")["engine"] == "ready", timeout=120, every=0.5)
    assert status(appliance)["cards"][victim]["state"] in ("up", "busy")
    _answer, _cid, progress = client(appliance).predict("Hello again.", "", "", 8, api_name="/chat")
    assert progress["done"] and progress["stats"]["generated_tokens"] > 0
