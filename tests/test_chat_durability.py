"""A conversation never breaks and never loses what people saw: failed answers stay out of what the
model is sent, and a running answer is saved as it streams, so a crash of the app keeps it."""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

from app.chat.service import model_history
from app.chat.store import ChatStore, StoredMessage
from app.database import Database
from tests.harness import Appliance, api_client


def said(role: str, content: str, status: str = "ok") -> StoredMessage:
    return StoredMessage(0, role, content, status, None)


def test_only_answered_questions_go_back_to_the_model() -> None:
    messages = [
        said("user", "one"),
        said("assistant", "first answer"),
        said("user", "too long"),
        said("assistant", "", "error"),  # overflow: failed before a word
        said("user", "queued then stopped"),
        said("assistant", "", "stopped"),
        said("user", "card down"),
        said("assistant", "half an ans", "error"),
        said("user", "two"),
        said("assistant", "second, cut", "stopped"),
        said("user", "crashed"),
        said("assistant", "partial", "interrupted"),
        said("user", "no answer at all"),
        said("user", "three"),
    ]
    kept = [(m.role, m.content) for m in model_history(messages)]
    assert kept == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
        ("assistant", "second, cut"),
        ("user", "crashed"),
        ("assistant", "partial"),
        ("user", "three"),
    ]
    roles = [role for role, _ in kept]
    assert all(a != b for a, b in itertools.pairwise(roles)), "roles must alternate"


def test_an_answer_being_written_is_marked_interrupted_at_the_next_start(tmp_path: Path) -> None:
    store = ChatStore(Database(tmp_path / "q.db"))
    cid = store.create("", owner="browser:a")
    store.add(cid, "user", "hello")
    answer = store.add(cid, "assistant", "Hel", status="streaming")
    store.update(answer, "Hello the", status="streaming")
    again = ChatStore(Database(tmp_path / "q.db"))
    assert again.mark_interrupted() == 1
    last = again.messages(cid)[-1]
    assert (last.content, last.status) == ("Hello the", "interrupted")
    assert again.mark_interrupted() == 0


def test_a_failed_answer_does_not_break_the_conversation(appliance: Appliance) -> None:
    c = api_client(appliance.url)
    _answer, cid, _ = c.predict("Hello there.", "", "", 8, api_name="/chat")
    with pytest.raises(AppError, match=r"(?i)context|too long"):
        c.predict("word " * 20000, cid, "", 8, api_name="/chat")  # beyond the 16,384-token context
    _answer, same, progress = c.predict("And now a short one.", cid, "", 8, api_name="/chat")
    assert same == cid and progress["done"] and progress["stats"]["generated_tokens"] > 0
    roles = [m["role"] for m in c.predict(cid, api_name="/history")]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]


def test_the_app_killed_mid_answer_keeps_what_was_shown(appliance: Appliance) -> None:
    c = api_client(appliance.url)
    job = c.submit(
        "Write a very long story about a lighthouse keeper and the sea, in many chapters.",
        "",
        "",
        2000,
        api_name="/chat",
    )
    shown, cid = "", ""
    deadline = time.monotonic() + 120
    while len(shown) < 40:
        assert time.monotonic() < deadline, "the answer never got going"
        outputs = job.outputs()
        if outputs:
            shown, cid, progress = outputs[-1]
            assert not progress["done"], "the answer ended before the app could be killed; make it longer"
        time.sleep(0.05)
    time.sleep(0.6)  # well past one save interval (0.25 s)
    assert appliance.proc is not None
    appliance.proc.send_signal(signal.SIGKILL)
    appliance.proc.wait(timeout=10)
    appliance.start()
    saved = api_client(appliance.url).predict(cid, api_name="/history")
    assert saved[-1]["role"] == "assistant" and saved[-1]["status"] == "interrupted"
    assert saved[-1]["content"].startswith(shown), (shown, saved[-1]["content"])
