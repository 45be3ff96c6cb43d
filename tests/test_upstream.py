"""The upstream backend: Quartet in front of an OpenAI-compatible server it did not write — llama-cpp-python's
own server with the demo model — and in front of a proxy that offers only what the boards' vendor server
offers (streaming chat and the model list). Through it: chat streams and stops, a cited answer, a whole
document read, an extraction with a table, a JSON-schema answer and a tool call through /v1, and the
upstream killed mid-answer (named; the app serves; the next answer works once it is back)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from tests.browser_helpers import ingest
from tests.gradio_api import Client
from tests.harness import (
    API_KEY,
    PORT_OFFSET,
    UPSTREAM_PORT,
    Appliance,
    api_client,
    get_json,
    metric,
    models_folder,
    wait_until,
)
from tests.library import handbook
from tests.table_documents import lab_report, pdf
from tests.test_admin import login
from tests.upstream_server import ChatOnlyProxy, LlamaCppServer

PROXY_PORT = 28091 + PORT_OFFSET
HANDBOOK = "quartet-handbook.pdf"  # four pages; page 3 says the cards throttle at 85 °C
LAB = "lab-report-upstream.pdf"
RESULTS = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "maxItems": 6,
            "items": {
                "type": "object",
                "required": ["analyte"],
                "properties": {"analyte": {"type": "string"}, "value": {"type": ["number", "null"]}},
            },
        }
    },
    "required": ["results"],
}


@pytest.fixture(scope="module")
def llama_server(work_dir: Path) -> Iterator[LlamaCppServer]:
    logs = work_dir / "upstream-logs"
    logs.mkdir(exist_ok=True)
    server = LlamaCppServer(UPSTREAM_PORT, logs)
    server.start()
    yield server
    server.kill()


def _appliance(work_dir: Path, name: str, url: str, **more: str) -> Appliance:
    home = work_dir / name
    (home / "logs").mkdir(parents=True, exist_ok=True)
    settings = {
        "QUARTET_ENGINE__BACKEND": "upstream",
        "QUARTET_ENGINE__UPSTREAM_URL": url,
        "QUARTET_ENGINE__N_CTX": "2048",  # the server's context (llama_cpp.server reports none)
        "QUARTET_ENGINE__UPSTREAM_TIMEOUT_S": "20",
        **more,
    }
    return Appliance(None, home / "var", home / "logs", models_folder(work_dir / "models"), settings=settings)


@pytest.fixture(scope="module")
def upstream_app(llama_server: LlamaCppServer, work_dir: Path) -> Iterator[Appliance]:
    app = _appliance(work_dir, "upstream-full", llama_server.url)
    app.start()
    yield app
    app.stop()


@pytest.fixture(scope="module")
def chat_only(llama_server: LlamaCppServer, work_dir: Path) -> Iterator[tuple[Appliance, ChatOnlyProxy]]:
    proxy = ChatOnlyProxy(PROXY_PORT, UPSTREAM_PORT)
    app = _appliance(  # read it all's notes and answer kept short: the test of a blank answer reads one twice
        work_dir,
        "upstream-chat-only",
        proxy.url,
        QUARTET_KNOWLEDGE__SUMMARY_NOTES_TOKENS="48",
        QUARTET_KNOWLEDGE__SUMMARY_ANSWER_TOKENS="48",
    )
    app.start()
    yield app, proxy
    app.stop()
    proxy.close()


def api(app: Appliance) -> openai.OpenAI:
    return openai.OpenAI(base_url=app.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def status(app: Appliance) -> dict[str, Any]:
    found: dict[str, Any] = Client(app.url, verbose=False).predict(api_name="/status")
    return found


def test_the_upstream_is_probed_and_its_capabilities_shown(upstream_app: Appliance) -> None:
    model = status(upstream_app)["model"]
    assert (model["name"], model["backend"], model["n_ctx"]) == ("demo", "upstream", 2048)
    can = model["capabilities"]
    assert can["json_schema"] and can["completions"]  # llama_cpp.server honours a schema, has /v1/completions
    assert not can["logprobs"] and not can["placement"] and not can["exact_counts"]
    assert [m.id for m in api(upstream_app).models.list().data] == ["demo"]


def test_chat_streams_from_the_upstream_and_is_saved(upstream_app: Appliance) -> None:
    c = Client(upstream_app.url, verbose=False)
    job = c.submit("Say hello to the upstream.", "", "", 24, api_name="/chat")
    updates = list(job)
    answer, cid, progress = job.result()
    assert len(updates) > 2 and answer.strip()
    stats = progress["stats"]
    assert stats["generated_tokens"] > 0 and stats["finish_reason"] in ("stop", "length")
    saved = c.predict(cid, api_name="/history")
    assert [m["role"] for m in saved] == ["user", "assistant"] and saved[1]["content"] == answer


def test_a_json_schema_answer_and_a_tool_call_through_v1(upstream_app: Appliance) -> None:
    person: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = api(upstream_app).chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "Name a famous scientist."}],
        max_tokens=40,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": person}},
    )
    jsonschema.validate(json.loads(answer.choices[0].message.content or ""), person)
    weather: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    called = api(upstream_app).chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        max_tokens=60,
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": weather}}],
        tool_choice="required",
    )
    calls = called.choices[0].message.tool_calls or []
    assert calls and called.choices[0].finish_reason == "tool_calls"
    for call in calls:
        assert call.function.name == "get_weather"  # type: ignore[union-attr]
        jsonschema.validate(json.loads(call.function.arguments), weather)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def documents(upstream_app: Appliance, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("upstream-docs")
    (folder / HANDBOOK).write_bytes(handbook())
    (folder / LAB).write_bytes(pdf(lab_report().pages))
    c = Client(upstream_app.url, verbose=False)
    c.predict([handle_file(str(folder / HANDBOOK)), handle_file(str(folder / LAB))], api_name="/ingest")

    def ready() -> dict[str, dict[str, Any]] | None:
        docs = {d["name"]: d for d in c.predict(api_name="/documents")}
        return docs if all(docs.get(n, {}).get("status") == "ok" for n in (HANDBOOK, LAB)) else None

    found: dict[str, dict[str, Any]] = wait_until(ready, timeout=180, every=0.5)
    return found


def test_a_document_question_cites_its_page(upstream_app: Appliance, documents: dict[str, dict[str, Any]]) -> None:
    c = Client(upstream_app.url, verbose=False)
    answer, sources = c.submit(
        "At what temperature do the cards throttle?", [documents[HANDBOOK]["id"]], api_name="/ask"
    ).result()
    assert answer.strip() and sources
    assert any("throttle at 85" in s["text"] and s["page"] == 3 for s in sources)


def test_a_whole_document_is_read_through_the_upstream(
    upstream_app: Appliance, documents: dict[str, dict[str, Any]]
) -> None:
    c = Client(upstream_app.url, verbose=False)
    summary = c.submit(documents[HANDBOOK]["id"], "", api_name="/summarize").result()
    text = summary[0] if isinstance(summary, list | tuple) else summary
    assert isinstance(text, str) and len(text.split()) > 5


def test_an_extraction_with_a_table_is_constrained_and_grounded(
    upstream_app: Appliance, documents: dict[str, dict[str, Any]]
) -> None:
    c = Client(upstream_app.url, verbose=False)
    result = c.predict(LAB, "", json.dumps(RESULTS), 200, api_name="/extract")
    jsonschema.validate(result["record"], RESULTS)
    rows = result["record"]["results"]
    places = result["fields"]["results"]["rows"]
    assert len(places) == len(rows)
    assert all(p["page"] == 1 for p in places if p["verified"])  # the lab report is one page


def test_the_upstream_killed_mid_answer_is_named_and_the_next_answer_works_once_back(
    upstream_app: Appliance, llama_server: LlamaCppServer
) -> None:
    stream = api(upstream_app).chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "Write a long story about a cat."}],
        max_tokens=400, stream=True,
    )  # fmt: skip
    chunks = iter(stream)
    while not (chunk := next(chunks)).choices or not chunk.choices[0].delta.content:
        pass  # until the answer streams
    llama_server.kill()
    with pytest.raises(openai.APIError, match=f"upstream at {llama_server.url}"):
        for _ in chunks:
            pass
    health = wait_until(lambda: (h := get_json(f"{upstream_app.url}/health")) and h["engine"] != "ready" and h, 30)
    assert health["engine"] == "recovering" and llama_server.url in health["message"]
    llama_server.start()
    upstream_app.wait_ready(60)
    again = api(upstream_app).chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "Hello?"}], max_tokens=8
    )
    assert again.choices[0].message.content


def test_a_chat_only_upstream_says_what_it_cannot_and_refuses_it(chat_only: tuple[Appliance, ChatOnlyProxy]) -> None:
    app, proxy = chat_only
    now = status(app)
    assert now["cards"] == []  # no card agents listed: the panels say "not reported by this engine"
    can = now["model"]["capabilities"]
    assert not can["json_schema"] and not can["completions"] and not can["cached_tokens"]
    assert "POST /v1/completions" in proxy.refused  # probed, found missing
    with pytest.raises(openai.BadRequestError, match="takes chat messages only"):
        api(app).completions.create(model="demo", prompt="Hello", max_tokens=4)
    with pytest.raises(openai.BadRequestError, match="cannot hold an answer to a JSON Schema"):
        api(app).chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        )  # fmt: skip


def test_stop_closes_the_upstreams_stream_at_once(chat_only: tuple[Appliance, ChatOnlyProxy]) -> None:
    app, proxy = chat_only
    before = len(proxy.streams)
    stream = api(app).chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "Write a very long poem about rivers."}],
        max_tokens=500, stream=True,
    )  # fmt: skip
    seen = 0
    for chunk in stream:
        seen += bool(chunk.choices and chunk.choices[0].delta.content)
        if seen >= 3:
            break
    stream.close()  # the client leaves: Quartet stops the answer and closes its stream upstream
    stopped_at = time.monotonic()
    ended = wait_until(lambda: proxy.streams[before:], timeout=10)
    passed, left = ended[0]
    assert left, "the upstream's stream ran to its end after Stop"
    assert passed < 100, f"{passed} chunks passed upstream after Stop of a 500-token answer"
    assert time.monotonic() - stopped_at < 5
    state = wait_until(lambda: (s := status(app)) and not s["queue"]["running"] and s, timeout=5)
    assert state["last_stats"]["finish_reason"] == "cancelled"


def test_the_admin_switches_cards_to_the_upstream_and_back(appliance: Appliance, llama_server: LlamaCppServer) -> None:
    """A catalog entry may be an upstream: the four-card appliance switches to it and back, the page's status
    and /v1 naming the model loaded after each switch."""
    c = api_client(appliance.url)
    token = login(c)
    switched = c.predict("upstream-demo", token, api_name="/switch_model")
    assert (switched["model"], switched["backend"], switched["n_ctx"]) == ("demo", "upstream", 2048)
    model = c.predict(api_name="/status")["model"]
    assert (model["backend"], model["gguf_file"]) == ("upstream", llama_server.url)
    assert [m.id for m in api(appliance).models.list().data] == ["demo"]
    _answer, _cid, progress = c.predict("Hello, upstream.", "", "", 8, api_name="/chat")
    assert progress["stats"]["generated_tokens"] > 0
    # the cards' own health still feeds the panels, /metrics and the thermal hold: no llama.cpp needed for it
    cards = c.predict(api_name="/status")["cards"]
    assert [card["endpoint"] for card in cards] == appliance.endpoints
    assert all(card["state"] == "up" and card["temperature_c"] == 45.0 and not card["layers"] for card in cards)
    card0 = f'card="0",endpoint="{appliance.endpoints[0]}"'
    assert metric(appliance, f"quartet_card_temperature_celsius{{{card0}}}") == 45.0
    back = c.predict("demo", token, api_name="/switch_model")
    assert (back["model"], back["backend"]) == ("Gemma 3 270M (demo)", "cards")
    assert [card["endpoint"] for card in c.predict(api_name="/status")["cards"]] == appliance.endpoints
    assert [m.id for m in api(appliance).models.list().data] == ["gemma-3-270m-demo"]


def test_extraction_on_an_upstream_without_schemas_is_checked_and_marked_unconstrained(
    chat_only: tuple[Appliance, ChatOnlyProxy], tmp_path: Path
) -> None:
    app, _proxy = chat_only
    (tmp_path / "memo.txt").write_text("Memo\nTitle: Cooling of the four cards\nAuthor: Ada Lovelace\n", "utf-8")
    ingest(app, tmp_path / "memo.txt")
    c = Client(app.url, verbose=False)
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "author": {"type": "string"}}}
    try:
        result = c.predict("memo.txt", "", json.dumps(schema), 96, api_name="/extract")
    except AppError as err:  # the demo model, free, often writes no valid JSON twice: said so, and why
        assert "no part gave a valid answer" in str(err) and "unconstrained: the engine cannot hold" in str(err)
        return
    assert result["constrained"] is False and result["problems"][-1].startswith("unconstrained:")
    jsonschema.validate(result["record"], schema)  # checked against the schema though the engine could not hold it


def test_a_blank_whole_document_answer_is_written_again_then_refused_in_words(
    chat_only: tuple[Appliance, ChatOnlyProxy], tmp_path: Path
) -> None:
    """Read it all's last step, the answer, comes back empty (the proxy ends its stream with no words, as a server
    that answered an empty message): it is written once more, sampled; empty twice, the reader is told so, not
    shown a blank."""
    app, proxy = chat_only
    (tmp_path / "pumps.txt").write_text("Pump care\nThe coolant pump of card two is replaced every 400 hours.\n")
    doc_id = ingest(app, tmp_path / "pumps.txt")
    c = Client(app.url, verbose=False)
    final = "part by part, with their pages"  # only the answer's prompt says so (assets/prompts/summary_reduce.txt)

    def finals_after(start: int) -> list[float | None]:
        return [temperature for prompt, temperature in proxy.asked[start:] if final in prompt]

    start, proxy.blank = len(proxy.asked), (final, 1)
    text, progress = c.submit(doc_id, "", api_name="/summarize").result()
    assert text.strip(), f"a blank answer was shown (progress {progress!r})"
    first, again = finals_after(start)  # the suite's knowledge temperature is 0: the second is sampled
    assert first == 0 and again is not None and again >= 0.7, (first, again)
    start, proxy.blank = len(proxy.asked), (final, 2)
    with pytest.raises(AppError, match="empty answer twice"):
        c.submit(doc_id, "", api_name="/summarize").result()
    assert len(finals_after(start)) == 2 and proxy.blank == (final, 0)
