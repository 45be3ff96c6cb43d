"""One error vocabulary (issue 16): every error a person can meet is a QuartetError with a kind from
app/errors.py's KINDS, translated in exactly two places — app/ui/errors.py for Gradio handlers, and
app/api/errors.py for /v1 — both shown here on a real Gradio app and a real FastAPI app."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import fastapi
import gradio as gr
import pytest
from fastapi.testclient import TestClient
from gradio_client.exceptions import AppError
from pydantic import BaseModel

from app.admin import AdminDenied
from app.api.errors import STATUS, ApiError, close_prefix, install
from app.chat.service import ConversationNotFound
from app.database import DiskFull
from app.engine.events import EngineError, FailureKind
from app.errors import KINDS, NotFound, QuartetError, Refused
from app.extraction.extractor import ExtractionFailed
from app.extraction.json_schema import SchemaProblem
from app.jobs import JobBusy
from app.knowledge.loaders.types import ERROR_KINDS, LoadError
from app.knowledge.uploads import UploadError
from app.ui.errors import TITLES, explained
from tests.gradio_api import Client
from tests.gradio_queue import call, named_step, page_config
from tests.harness import free_port

APP = Path(__file__).resolve().parent.parent / "app"


def test_every_error_a_person_meets_shares_the_base_with_a_kind_of_the_vocabulary() -> None:
    made = [
        LoadError("encrypted", "a.pdf is password-protected"),
        UploadError("a.pdf is larger than 1 MB", kind="too_large"),
        SchemaProblem("name is empty", "row 2"),
        AdminDenied("wrong admin password"),
        ConversationNotFound("There is no conversation x."),
        JobBusy("another action is still running: switch"),
        ApiError("prompt is empty", param="prompt"),
        EngineError("card 1 failed", card="127.0.0.1:1"),
        ExtractionFailed("stopped before the end", kind="cancelled"),
        NotFound("no document 7 in the knowledge base"),
        Refused("the message is empty"),
    ]
    for err in made:
        assert isinstance(err, QuartetError) and err.kind in KINDS, (type(err).__name__, err.kind)
        assert err.message == str(err)
    assert [e.kind for e in made[:6]] == ["encrypted", "too_large", "request", "denied", "not_found", "busy"]
    assert set(get_args(FailureKind)) <= set(KINDS) and set(ERROR_KINDS) <= set(KINDS)
    assert set(TITLES) == set(KINDS) == set(STATUS), "each kind has its title on the page and its /v1 status"
    # kept for callers that catch the builtin sort: a refusal is a ValueError, a missing thing a LookupError
    assert isinstance(made[2], ValueError) and isinstance(made[4], LookupError)


def test_gradio_error_translation_is_written_once() -> None:
    """Handlers raise QuartetErrors; gr.Error is made only in app/ui/errors.py, and nobody branches on
    an error's message text."""
    makers, text_tests = [], []
    for path in APP.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if path != APP / "ui" / "errors.py" and re.search(r"\bgr\.Error\(", source):
            makers.append(path.relative_to(APP))
        if re.search(r"in str\((e|err|exc|error)\)|\.args\[0\]", source):
            text_tests.append(path.relative_to(APP))
    assert makers == [] and text_tests == [], (makers, text_tests)


@pytest.fixture(scope="module")
def gradio_app() -> Iterator[str]:
    @explained
    def missing(name: str) -> str:
        raise NotFound(f"there is no conversation {name}")

    @explained
    def broken() -> str:
        return {"a": "b"}["text"]  # a fault of ours

    @explained
    def streamed(words: int) -> Iterator[str]:
        yield "one"
        raise Refused(f"only one word, not {words}")

    @explained
    def who(request: gr.Request = None) -> str:  # type: ignore[assignment]
        return request.client.host if request and request.client else "nobody"

    @explained
    def echo(text: str, words: list[str]) -> str:
        return ascii([text, words])

    with gr.Blocks() as demo:
        for fn in (missing, broken, streamed, who, echo):
            gr.api(fn, api_name=fn.__name__)
    # show_error off: without the wrapper neither message would reach the caller
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, show_error=False)
    try:
        yield demo.local_url
    finally:
        demo.close()


@pytest.mark.slow
def test_the_gradio_wrapper_shows_a_quartet_error_as_it_is_written(gradio_app: str) -> None:
    client = Client(gradio_app, verbose=False)
    with pytest.raises(AppError, match=r"^there is no conversation abc$"):
        client.predict("abc", api_name="/missing")
    job = client.submit(3, api_name="/streamed")
    with pytest.raises(AppError, match="only one word, not 3"):
        job.result()
    deadline = time.monotonic() + 5
    while not job.outputs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.outputs() == ["one"], "a generator handler still streams through the wrapper"
    assert client.predict(api_name="/who") == "127.0.0.1", "gr.Request still reaches the handler"


def test_the_gradio_wrapper_words_an_unexpected_error_and_points_to_the_log(gradio_app: str) -> None:
    client = Client(gradio_app, verbose=False)
    with pytest.raises(AppError) as caught:
        client.predict(api_name="/broken")
    assert str(caught.value) == "Something went wrong on our side (KeyError: 'text'); the app's log has the details."


class Body(BaseModel):
    n: int


class Inputs(BaseModel):
    input: str | list[str]


@pytest.fixture(scope="module")
def v1() -> TestClient:
    api = fastapi.FastAPI()
    install(api)
    errors: dict[str, QuartetError] = {
        "request": ApiError("prompt is empty", param="prompt"),
        "context": EngineError("the conversation is 5000 tokens long; the context holds 4096", kind="context"),
        "denied": ApiError("invalid API key", kind="denied", code="invalid_api_key"),
        "not_found": NotFound("there is no model 'x' here"),
        "busy": JobBusy("another action is still running"),
        "card": EngineError("card 2 (127.0.0.1:3) failed", card="127.0.0.1:3"),
        "upstream": EngineError(
            "the upstream at http://10.0.0.9:8000/v1 does not answer", card="http://10.0.0.9:8000/v1"
        ),
        "disk_full": DiskFull(Path("/var/lib/quartet")),
        "engine": EngineError("the engine is loading"),
        "timeout": EngineError("no answer within 5 s", kind="timeout"),
        "encrypted": LoadError("encrypted", "a.pdf is password-protected"),
    }

    router = fastapi.APIRouter(prefix="/v1")  # as app/api/openai_routes.py makes its routes

    @router.get("/fail/{kind}")
    def fail(kind: str) -> None:
        raise errors[kind]

    @router.post("/body")
    def body(value: Body) -> int:
        return value.n

    @router.post("/inputs")
    def inputs(value: Inputs) -> int:
        return len(value.input)

    api.include_router(router)
    close_prefix(api)
    api.mount("/", _everything_else())  # as the served app mounts Gradio at /, after /v1
    return TestClient(api)


def _everything_else() -> fastapi.FastAPI:
    """An app that takes every path, as Gradio's page does (its own 404 for a path it does not know)."""
    pages = fastapi.FastAPI()

    @pages.get("/")
    def page() -> str:
        return "the page"

    return pages


@pytest.mark.parametrize(
    ("kind", "status", "type_", "param", "code"),
    [
        ("request", 400, "invalid_request_error", "prompt", None),
        ("context", 400, "invalid_request_error", "messages", "context_length_exceeded"),
        ("denied", 401, "invalid_request_error", None, "invalid_api_key"),
        ("not_found", 404, "invalid_request_error", None, None),
        ("busy", 503, "server_error", None, "busy"),
        ("card", 500, "server_error", None, "card_down"),
        ("upstream", 503, "server_error", None, "upstream_unavailable"),  # before: 500 card_down
        ("disk_full", 507, "server_error", None, "disk_full"),
        ("engine", 503, "server_error", None, "engine_unavailable"),
        ("timeout", 504, "server_error", None, "timeout"),
        ("encrypted", 422, "invalid_request_error", None, None),
    ],
)
def test_the_v1_handler_gives_each_kind_its_status_and_openais_body(
    v1: TestClient, kind: str, status: int, type_: str, param: str | None, code: str | None
) -> None:
    response = v1.get(f"/v1/fail/{kind}")
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["type"], error["param"], error["code"]) == (type_, param, code)
    assert error["message"] and "Traceback" not in error["message"]


def test_the_v1_handler_answers_a_body_that_does_not_validate_in_openais_shape(v1: TestClient) -> None:
    response = v1.post("/v1/body", json={"n": "many"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "n" and error["message"].startswith("n: ")


@pytest.mark.parametrize(
    "raw",
    [b'{"n": "\xff\xfe"}', b'{"n": ' + b"[" * 3000 + b"]" * 3000 + b"}"],
    ids=["invalid UTF-8", "nested 3,000 deep"],
)
def test_a_body_the_parser_cannot_read_gets_openais_shape(v1: TestClient, raw: bytes) -> None:
    """Before: FastAPI's own {"detail": "There was an error parsing the body"}."""
    response = v1.post("/v1/body", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and "not valid JSON" in error["message"], error


def test_n_other_than_one_says_n_must_be_1() -> None:
    from app.api.request_models import refuse_unsupported

    with pytest.raises(ApiError, match="n must be 1") as refused:
        refuse_unsupported(0, None, ())
    assert refused.value.param == "n"
    with pytest.raises(ApiError, match=r"n > 1 is not supported"):
        refuse_unsupported(2, None, ())


def test_the_gradio_wrapper_hands_the_handler_valid_text(gradio_app: str) -> None:
    step = named_step(page_config(gradio_app), "echo")
    done = call(gradio_app, step, ["hello \udc80 world", ["\ud800", "fine"]])  # sent as \\u escapes
    assert done["success"], done
    assert done["output"]["data"][0] == ascii(["hello \ufffd world", ["\ufffd", "fine"]])


def test_an_unknown_v1_route_or_method_answers_in_openais_shape(v1: TestClient) -> None:
    missing = v1.post("/v1/nothing-here", json={})
    assert missing.status_code == 404 and set(missing.json()) == {"error"}, missing.text
    assert "/v1/nothing-here" in missing.json()["error"]["message"]
    wrong = v1.get("/v1/body")
    assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "invalid_request_error", wrong.text
    assert wrong.headers["allow"] == "POST" and "GET is not allowed on /v1/body" in wrong.json()["error"]["message"]
    assert v1.get("/v1/fail/busy").status_code == 503  # the routes still answer (the catch-all comes after)
    assert v1.get("/elsewhere").json() == {"detail": "Not Found"}  # outside /v1, the pages' own answer
    assert v1.get("/").json() == "the page"


def test_a_body_that_is_not_json_or_a_union_that_fails_blames_a_field_by_its_name(v1: TestClient) -> None:
    broken = v1.post("/v1/body", content=b'{"n": 1,', headers={"content-type": "application/json"})
    assert broken.status_code == 400 and broken.json()["error"]["param"] is None, broken.text
    assert "not valid JSON" in broken.json()["error"]["message"]
    union = v1.post("/v1/inputs", json={"input": [[1, 2]]}).json()["error"]
    assert union["param"] == "input" and ".str" not in union["message"] and "list[" not in union["message"], union


def test_a_busy_refusal_says_when_to_retry(v1: TestClient) -> None:
    response = v1.get("/v1/fail/busy")
    assert response.status_code == 503 and response.headers["retry-after"].isdigit()
