"""Hostile input on the running appliance: one request must never take down the engine worker, nor
another client's answer. A lone UTF-16 surrogate on every entry point, and a schema whose grammar would
be huge on every path that makes one."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from tests.gradio_queue import call, named_step, page_config
from tests.harness import API_KEY, Appliance, api_client, wait_until
from tests.test_schema_limits import anyof_tree, tool_body

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

    def __init__(self, appliance: Appliance, max_tokens: int = 64) -> None:
        self.appliance = appliance
        self.max_tokens = max_tokens
        self.times: list[float] = []  # when each piece came (monotonic)
        self.tokens = 0
        self.finish: str | None = None
        self.events: list[Any] = []
        self.started = threading.Event()
        self.enough = threading.Event()  # set: the stream is closed at its next piece (the client hangs up)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = {"model": "demo", "prompt": "Once upon a time, in a harbour town,", "max_tokens": self.max_tokens}
        body["stream"] = True
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
                    self.times.append(time.monotonic())
                    self.finish = choice.get("finish_reason") or self.finish
                self.started.set()
                if self.enough.is_set():
                    break

    def __enter__(self) -> Witness:
        self.thread.start()
        assert self.started.wait(60), "the witness stream gave no token within 60 s"
        return self

    def __exit__(self, *_exc: object) -> None:
        self.thread.join(120)


@pytest.fixture(scope="module")
def note(appliance: Appliance, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A one-line document to summarise (its id), removed afterwards (the appliance is shared)."""
    path = tmp_path_factory.mktemp("hostile") / NOTE
    path.write_text("The four cards of the appliance are cooled by one fan.\n", encoding="utf-8")
    c = api_client(appliance.url)
    c.predict([handle_file(str(path))], api_name="/ingest")

    def indexed() -> int | None:
        docs = {d["name"]: d for d in c.predict(api_name="/documents")}
        return docs[NOTE]["id"] if NOTE in docs and docs[NOTE]["status"] == "ok" else None

    found: int = wait_until(indexed, timeout=120, every=0.5)
    yield found
    assert c.predict(found, api_name="/delete_document")


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
    completion = post(appliance, "/v1/completions", {"model": "demo", "prompt": SURROGATE, "max_tokens": 3})
    assert completion.status_code == 200, completion.text
    messages = [{"role": "system", "content": SURROGATE}, {"role": "user", "content": "Say hi."}]
    for chat in (messages, [{"role": "user", "content": SURROGATE}]):
        reply = post(appliance, "/v1/chat/completions", {"model": "demo", "messages": chat, "max_tokens": 3})
        assert reply.status_code == 200, reply.text
    echoed = post(appliance, "/v1/completions", {"model": "demo", "prompt": SURROGATE, "max_tokens": 1, "echo": True})
    assert echoed.status_code == 200 and echoed.json()["choices"][0]["text"].startswith("hello \ufffd world")
    embedded = post(appliance, "/v1/embeddings", {"model": "all-minilm-l6-v2", "input": [SURROGATE, "plain"]})
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
    saved = api_client(appliance.url).predict(cid, api_name="/history")
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
    chat = {"model": "demo", "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8}
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
    c = api_client(appliance.url)
    with pytest.raises(AppError, match="/properties/name/minLength: 100000000 is above") as refused:
        started = time.monotonic()
        c.predict("any.txt", "", custom, api_name="/extract")
    assert time.monotonic() - started < 1.0 and refused.value
    assert worker_pid(appliance) == before
    assert httpx.get(appliance.url + "/health", timeout=5).json()["engine"] == "ready"


class HealthWatch:
    """`GET /health` asked again and again in a thread while a test runs: how long each answer took."""

    def __init__(self, appliance: Appliance) -> None:
        self.url, self.took, self.stop = appliance.url + "/health", list[float](), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self.stop.is_set():
                started = time.monotonic()
                assert client.get(self.url).status_code == 200
                self.took.append(time.monotonic() - started)
                self.stop.wait(0.05)

    def __enter__(self) -> HealthWatch:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(120)


def test_a_1_mb_tool_schema_is_refused_at_once_and_health_answers_meanwhile(appliance: Appliance) -> None:
    """Issue 47, item 4: 27,000 nested anyOf subschemas as a tool's parameters were meta-validated on the event
    loop before their cost was checked: refused after 50.9 s, /health 50.1 s. The cost is checked first now, and
    a schema within the limits whose meta-validation takes seconds is checked off the loop."""
    typo = {"type": "strin"}
    function = {"name": "look", "parameters": anyof_tree(30, 3)}
    responses = {"model": "demo", "input": "x", "tools": [{"type": "function", **function}]}
    with HealthWatch(appliance) as health:
        for path, body in (("/v1/chat/completions", tool_body(anyof_tree(30, 3))), ("/v1/responses", responses)):
            reply, took = refused_fast(lambda path=path, body=body: post(appliance, path, body))
            assert reply.status_code == 400 and took < 1.0, (path, reply.status_code, took)
            assert "limit of 5000 subschemas" in reply.json()["error"]["message"], reply.text[:300]
        slow, took = refused_fast(lambda: post(appliance, "/v1/chat/completions", tool_body(anyof_tree(50, 2, typo))))
    assert slow.status_code == 400 and "not a valid JSON Schema" in slow.json()["error"]["message"], slow.text[:300]
    print(f"meta-validation refused in {took:.2f} s; /health took at most {max(health.took):.3f} s")
    assert len(health.took) >= 3 and max(health.took) < 1.0, health.took  # 0.30 s measured here, busy


# -- the door of /v1: the key and the body's size before the body is read ------------------------------------

HUNDRED_MB = 100 * 2**20


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def raw_post(
    appliance: Appliance, headers: dict[str, str], body: bytes, *, timeout: float = 5
) -> tuple[bytes, dict[str, Any]]:
    """POST to /v1/chat/completions by hand, `body` being all or only the start of what the headers announce:
    the response's status line and its JSON (a socket timeout if the server waits for the rest first)."""
    head = "".join(f"{name}: {value}\r\n" for name, value in {"Host": "127.0.0.1", **headers}.items())
    with socket.create_connection(("127.0.0.1", appliance.port), timeout=timeout) as sock:
        sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\n{head}\r\n".encode() + body)
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        top, rest = received.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"(?i)content-length: *(\d+)", top).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            rest += sock.recv(65536)
    return top.split(b"\r\n", 1)[0], json.loads(rest)


def test_an_unauthenticated_body_is_refused_before_it_is_read(appliance: Appliance) -> None:
    announced = {"Content-Type": "application/json", "Content-Length": str(HUNDRED_MB)}
    status, answer = raw_post(appliance, announced, b"x" * 2**20)  # 1 MB of the 100 sent: the answer comes now
    assert status.split()[1] == b"401" and answer["error"]["code"] == "invalid_api_key", (status, answer)
    assert appliance.proc is not None
    before, peak, done = rss_bytes(appliance.proc.pid), 0, threading.Event()

    def send_all() -> None:
        assert raw_post(appliance, announced, b"x" * HUNDRED_MB, timeout=30)[0].startswith(b"HTTP/1.1 401")
        done.set()

    threading.Thread(target=send_all, daemon=True).start()
    while not done.is_set():
        peak = max(peak, rss_bytes(appliance.proc.pid))
        done.wait(0.02)
    assert peak - before < 30 * 2**20, f"the app grew by {(peak - before) / 2**20:.0f} MB for an unauthenticated POST"
    malformed = httpx.post(appliance.url + "/v1/chat/completions", content=b"{not json", timeout=10)
    assert malformed.status_code == 401 and malformed.json()["error"]["code"] == "invalid_api_key"


def test_a_body_over_the_limit_gets_413_in_openais_shape(appliance: Appliance) -> None:
    over = 17 * 2**20  # web.max_body_mb is 16
    announced = {**HEADERS, "Content-Length": str(over)}
    status, answer = raw_post(appliance, announced, b"x" * 2**20)
    assert status.split()[1] == b"413", (status, answer)
    error = answer["error"]
    assert error["code"] == "request_too_large" and "16 MiB" in error["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
        for _ in range(over // 2**20):
            yield b"x" * 2**20

    chunked = httpx.post(appliance.url + "/v1/chat/completions", content=chunks(), headers=HEADERS, timeout=30)
    assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "request_too_large"
    fine = post(appliance, "/v1/completions", {"model": "demo", "prompt": "Hi", "max_tokens": 2})
    assert fine.status_code == 200, fine.text


def test_huge_prompts_are_refused_at_once_and_another_stream_keeps_its_pace(appliance: Appliance) -> None:
    """10 MB prompts were tokenised between two engine steps before their refusal (19–52 s each, another
    stream stalled 51.8 s): their size alone now refuses them, before the engine sees them."""
    huge = "harbour " * 1_300_000  # 10.4 MB of text: far more than any context holds
    bodies = [
        ("/v1/completions", {"model": "demo", "prompt": huge, "max_tokens": 4}),
        ("/v1/chat/completions", {"model": "demo", "messages": [{"role": "user", "content": huge}], "max_tokens": 4}),
        ("/v1/chat/completions", {"model": "demo", "messages": [{"role": "system", "content": huge}], "max_tokens": 4}),
    ]
    with Witness(appliance, max_tokens=240) as witness:
        for path, body in bodies:
            response, took = refused_fast(lambda path=path, body=body: post(appliance, path, body))
            assert response.status_code == 400, response.text
            assert "at least" in response.json()["error"]["message"] and took < 5, (response.text[:200], took)
        refused = time.monotonic()
        witness.enough.set()  # its pieces after the refusals show nothing more (~180 tokens a run: issue 27)
    # it gave a piece before the first refusal began (Witness waits for one) and another after the last one
    assert witness.times[-1] >= refused, f"the other stream had ended before the refusals did: {witness.finish}"
    gaps = [b - a for a, b in zip(witness.times, witness.times[1:], strict=False)]
    # measured here: the stream's largest gap while three 10 MB prompts came and went was 0.43 s on the busy
    # shared machine (51.8 s before); the bound leaves room for the load, never for a stall
    print(f"largest gap of the other stream: {max(gaps):.2f} s over {len(gaps)} gaps")
    assert max(gaps) < 3.0, f"another stream stalled {max(gaps):.1f} s"


def test_many_tiny_items_are_refused_at_once_and_nothing_else_stops(appliance: Appliance) -> None:
    """100,000 tiny messages (4 MB, under the body cap and the size estimate) froze the engine twice: the chat
    template and the tokenizer ran between two steps, the worker was restarted, the request retried. Item counts
    are now bounded at the edge; a long text the tokenizer would take minutes over (a megabyte of short lines:
    its cost grows with the square of the line breaks) is counted in pieces off the step loop and refused."""
    before = worker_pid(appliance)
    tiny = [{"role": "user", "content": "hi hi hi"}] * 100_000
    lines = "hi hi hi\n\n" * 150_000  # 1.5 MB: ~600,000 tokens, ~3 minutes for llama.cpp's tokenizer whole
    refusals = [
        ("/v1/chat/completions", {"model": "demo", "messages": tiny, "max_tokens": 4}, "messages", 1.0),
        ("/v1/responses", {"model": "demo", "input": tiny, "max_output_tokens": 16}, "input", 1.0),
        (
            "/v1/chat/completions",
            {"model": "demo", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}] * 5000}]},
            "messages",
            1.0,
        ),
        ("/v1/chat/completions", {"model": "demo", "messages": [{"role": "user", "content": lines}]}, None, 10.0),
    ]
    with Witness(appliance, max_tokens=240) as witness:
        for path, body, param, bound in refusals:
            response, took = refused_fast(lambda path=path, body=body: post(appliance, path, body))
            assert response.status_code == 400, response.text[:300]
            error = response.json()["error"]
            assert took < bound, (path, param, took)
            if param is not None:
                assert error["param"] == param and "at most" in error["message"], error
            else:
                assert "at least" in error["message"] and "context holds" in error["message"], error
        refused = time.monotonic()
        witness.enough.set()
    assert witness.times[-1] >= refused, f"the other stream had ended before the refusals did: {witness.finish}"
    gaps = [b - a for a, b in zip(witness.times, witness.times[1:], strict=False)]
    print(f"largest gap of the other stream: {max(gaps):.2f} s over {len(gaps)} gaps")
    assert max(gaps) < 3.0, f"another stream stalled {max(gaps):.1f} s"
    assert worker_pid(appliance) == before, "the engine worker was replaced"
