"""Hostile input on the running appliance: one request must never take down the engine worker, nor
another client's answer. A lone UTF-16 surrogate on every entry point, and a schema whose grammar would
be huge on every path that makes one."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from tests.gradio_queue import call, named_step, page_config
from tests.harness import API_KEY, Appliance, wait_until

SURROGATE = "hello \udc80 world"
HEADERS = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
NOTE = "hostile-note.txt"


def worker_pid(appliance: Appliance) -> int:
    """The engine worker's pid: the app's one child started by multiprocessing's spawn."""
    assert appliance.proc is not None
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == appliance.proc.pid and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    assert len(found) == 1, f"engine workers of the app: {found}"
    return found[0]


def post(appliance: Appliance, path: str, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
    """POST `body` as JSON with \\u escapes, as any client may send it (a lone surrogate has no UTF-8 form)."""
    return httpx.post(appliance.url + path, content=json.dumps(body), headers=HEADERS, timeout=timeout)


class Witness:
    """Another client's streamed answer, running while the hostile requests arrive."""

    def __init__(self, appliance: Appliance) -> None:
        self.appliance = appliance
        self.tokens = 0
        self.finish: str | None = None
        self.events: list[Any] = []
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = {"model": "m", "prompt": "Once upon a time, in a harbour town,", "max_tokens": 64, "stream": True}
        with httpx.stream(
            "POST", self.appliance.url + "/v1/completions", json=body, headers=HEADERS, timeout=120
        ) as response:
            for line in response.iter_lines():
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                event = json.loads(line[5:])
                self.events.append(event)
                for choice in event.get("choices", []):
                    self.tokens += 1
                    self.finish = choice.get("finish_reason") or self.finish
                self.started.set()

    def __enter__(self) -> Witness:
        self.thread.start()
        assert self.started.wait(60), "the witness stream gave no token within 60 s"
        return self

    def __exit__(self, *_exc: object) -> None:
        self.thread.join(120)


@pytest.fixture(scope="module")
def note(appliance: Appliance, tmp_path_factory: pytest.TempPathFactory) -> int:
    """A one-line document to summarise (its id)."""
    path = tmp_path_factory.mktemp("hostile") / NOTE
    path.write_text("The four cards of the appliance are cooled by one fan.\n", encoding="utf-8")
    c = Client(appliance.url, verbose=False)
    c.predict([handle_file(str(path))], api_name="/ingest")

    def indexed() -> int | None:
        docs = {d["name"]: d for d in c.predict(api_name="/documents")}
        return docs[NOTE]["id"] if NOTE in docs and docs[NOTE]["status"] == "ok" else None

    found: int = wait_until(indexed, timeout=120, every=0.5)
    return found


@pytest.fixture()
def watched(appliance: Appliance) -> Iterator[Witness]:
    """A witness stream around the test; afterwards the same engine worker, ready, and the stream whole."""
    before = worker_pid(appliance)
    with Witness(appliance) as witness:
        yield witness
    assert witness.finish in ("stop", "length"), f"the other client's stream ended: {witness.events[-2:]}"
    assert worker_pid(appliance) == before, "the engine worker was replaced"
    assert httpx.get(appliance.url + "/health", timeout=5).json()["engine"] == "ready"


def test_a_lone_surrogate_on_every_v1_entry_point_answers_and_leaves_the_worker_up(
    appliance: Appliance, watched: Witness
) -> None:
    completion = post(appliance, "/v1/completions", {"model": "m", "prompt": SURROGATE, "max_tokens": 3})
    assert completion.status_code == 200, completion.text
    messages = [{"role": "system", "content": SURROGATE}, {"role": "user", "content": "Say hi."}]
    for chat in (messages, [{"role": "user", "content": SURROGATE}]):
        reply = post(appliance, "/v1/chat/completions", {"model": "m", "messages": chat, "max_tokens": 3})
        assert reply.status_code == 200, reply.text
    echoed = post(appliance, "/v1/completions", {"model": "m", "prompt": SURROGATE, "max_tokens": 1, "echo": True})
    assert echoed.status_code == 200 and echoed.json()["choices"][0]["text"].startswith("hello \ufffd world")
    embedded = post(appliance, "/v1/embeddings", {"model": "e", "input": [SURROGATE, "plain"]})
    assert embedded.status_code == 200, embedded.text
    assert len(embedded.json()["data"]) == 2


def named(appliance: Appliance, api_name: str, *data: Any, until: Callable[[Any], bool] | None = None) -> list[Any]:
    """A named endpoint called through Gradio's queue with \\u-escaped JSON (gradio_client cannot send a
    lone surrogate: httpx writes UTF-8); what it returned last (with `until`: its first output that `until`
    accepts, then it is stopped), or the test fails with its error."""
    step = named_step(page_config(appliance.url), api_name)
    done = call(appliance.url, step, list(data), timeout=120, until=until)
    assert done.get("success"), f"{api_name}: {done.get('output')}"
    returned: list[Any] = done["output"]["data"][0]  # a gr.api step has one output: the function's value
    return returned


def test_a_lone_surrogate_through_the_named_endpoints_answers_and_is_saved_valid(
    appliance: Appliance, note: int, watched: Witness
) -> None:
    answer, cid, _ = named(appliance, "chat", SURROGATE, "", SURROGATE, 3)
    assert cid and isinstance(answer, str)
    saved = Client(appliance.url, verbose=False).predict(cid, api_name="/history")
    assert [m["content"] for m in saved if m["role"] == "user"] == ["hello \ufffd world"]
    asked, _sources = named(appliance, "ask", SURROGATE, [note])
    assert isinstance(asked, str)
    # until the part was read (its prompt held the question) and the answer is on its way, then stopped
    named(appliance, "summarize", note, SURROGATE, until=lambda data: "writing the answer" in json.dumps(data))


HUGE = {"type": "string", "maxLength": 1_000_000_000}
LONG = {"type": "string", "minLength": 100_000_000}


def refused_fast(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_a_huge_length_bound_is_refused_at_once_on_every_path(appliance: Appliance) -> None:
    before = worker_pid(appliance)
    chat = {"model": "m", "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8}
    for schema, keyword, value in ((HUGE, "maxLength", 1_000_000_000), (LONG, "minLength", 100_000_000)):
        fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
        reply, took = refused_fast(
            lambda fmt=fmt: post(appliance, "/v1/chat/completions", {**chat, "response_format": fmt})
        )
        assert reply.status_code == 400 and took < 1.0, (reply.status_code, took)
        error = reply.json()["error"]
        assert error["param"] == "response_format"
        assert error["message"].startswith(f"response_format.json_schema.schema/{keyword}: {value} is above")
    tool = {
        "type": "function",
        "function": {"name": "look", "parameters": {"type": "object", "properties": {"q": HUGE}}},
    }
    reply, took = refused_fast(lambda: post(appliance, "/v1/chat/completions", {**chat, "tools": [tool]}))
    assert reply.status_code == 400 and took < 1.0, (reply.status_code, took)
    assert reply.json()["error"]["message"].startswith(
        "tools[0].function.parameters/properties/q/maxLength: 1000000000"
    )
    custom = json.dumps({"type": "object", "properties": {"name": LONG}})
    c = Client(appliance.url, verbose=False)
    with pytest.raises(AppError, match="/properties/name/minLength: 100000000 is above") as refused:
        started = time.monotonic()
        c.predict("any.txt", "", custom, api_name="/extract")
    assert time.monotonic() - started < 1.0 and refused.value
    assert worker_pid(appliance) == before
    assert httpx.get(appliance.url + "/health", timeout=5).json()["engine"] == "ready"
