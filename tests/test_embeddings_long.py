"""`/v1/embeddings` with texts longer than MiniLM's window (issue 51, item 3): in-process, the route with the
real embedder. A long text is embedded in windows and pooled, a text within one window keeps its vector,
usage counts every word piece read, and only a text or a request above the bounds is refused."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import fastapi
import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.api.errors import install
from app.api.gate import Keys
from app.api.openai_routes import build_router
from app.context import AppContext
from app.knowledge.embedder import Embedder
from app.knowledge.long_texts import MAX_INPUT_PIECES, MAX_REQUEST_PIECES, api_embed, windows
from app.settings import WebSettings
from tests.documents import chinese_prose

LIGHTHOUSE = [
    "The lighthouse keeper climbed the spiral stairs at dusk to light the great lamp.",
    "Ships passing the rocky headland watched for its beam sweeping across the dark water.",
    "In winter storms the waves broke over the gallery and salt crusted the thick glass.",
    "She trimmed the wicks, wound the clockwork that turned the lens, and logged every vessel she saw.",
    "Fog horns sounded from the tower when the mist rolled in from the open sea.",
    "Fishermen coming home late steered by the light to find the harbour mouth between the reefs.",
    "The keeper's cottage stood at the foot of the tower, its walls whitewashed against the wind.",
    "Supply boats brought oil, bread and letters once a fortnight when the sea allowed a landing.",
    "Her logbook recorded the weather, the state of the lamp and the names of ships that passed the rocks.",
    "On clear nights the beam could be seen twenty miles out by sailors on the coastal route.",
]
ABOUT_A = "A lighthouse keeper watches for ships at night from a tower on the rocky coast."
ABOUT_B = "The bakery sells fresh bread, cakes and croissants to the village every morning."


@pytest.fixture(scope="module")
def embedder() -> Iterator[Embedder]:
    yield Embedder.packaged()


@pytest.fixture(scope="module")
def v1(embedder: Embedder) -> TestClient:
    """The /v1 routes as the app builds them, in front of the real MiniLM as the app wires it."""
    ctx = SimpleNamespace(
        settings=SimpleNamespace(web=WebSettings()), api_keys=Keys(lambda: []), embed=api_embed(embedder)
    )
    api = fastapi.FastAPI()
    install(api)
    api.include_router(build_router(cast(AppContext, ctx)))
    return TestClient(api)


def embeddings(v1: TestClient, given: Any) -> Any:
    return v1.post("/v1/embeddings", json={"model": "all-minilm-l6-v2", "input": given})


def english(chars: int) -> str:
    text = " ".join(LIGHTHOUSE * (chars // 400 + 1))
    return text[:chars]


def test_long_english_and_chinese_texts_are_embedded_pooled_and_counted(v1: TestClient, embedder: Embedder) -> None:
    texts = [english(4000), chinese_prose()]
    pieces = embedder.count_tokens(texts)
    assert all(count > embedder.max_tokens for count in pieces), pieces
    reply = embeddings(v1, texts)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    for item in data["data"]:
        vector = np.array(item["embedding"])
        assert vector.shape == (384,) and abs(np.linalg.norm(vector) - 1) < 1e-5
    assert data["usage"] == {"prompt_tokens": sum(pieces), "total_tokens": sum(pieces)}
    one = embeddings(v1, texts[0]).json()  # each text's vector is its own, whatever else the request holds
    assert one["usage"]["prompt_tokens"] == pieces[0] > 254
    assert np.allclose(one["data"][0]["embedding"], data["data"][0]["embedding"], atol=1e-6)


def test_a_text_within_one_window_keeps_the_vector_it_always_had(v1: TestClient, embedder: Embedder) -> None:
    full = " ".join(["word"] * embedder.max_tokens)  # exactly one window
    texts = [ABOUT_A, full, "四张卡"]
    assert embedder.count_tokens([full]) == [embedder.max_tokens]
    reply = embeddings(v1, [*texts, english(4000)]).json()  # a long text beside them changes nothing
    alone = embedder.embed(texts)
    for item, vector in zip(reply["data"][:3], alone, strict=True):
        assert item["embedding"] == vector.tolist()
    # a window read as word pieces gives the vector of the text it comes from
    ids = embedder.token_ids(texts)
    assert np.allclose(embedder.embed_pieces(ids), alone, atol=1e-5)


def test_a_long_text_pooled_is_nearest_its_own_topic(v1: TestClient) -> None:
    reply = embeddings(v1, [english(4000), ABOUT_A, ABOUT_B]).json()
    long, a, b = (np.array(item["embedding"]) for item in reply["data"])
    assert long @ a > long @ b + 0.2, (long @ a, long @ b)


def test_windows_are_as_few_as_hold_the_text_and_near_one_size() -> None:
    assert [len(w) for w in windows(list(range(600)), 254)] == [200, 200, 200]
    assert [len(w) for w in windows(list(range(509)), 254)] == [169, 170, 170]
    assert windows(list(range(254)), 254) == [list(range(254))]
    cut = windows(list(range(8192)), 254)
    assert len(cut) == 33 and max(map(len, cut)) <= 254 and [p for w in cut for p in w] == list(range(8192))


def test_only_a_text_or_a_request_above_the_bounds_is_refused(v1: TestClient) -> None:
    too_long = " ".join(["word"] * (MAX_INPUT_PIECES + 1))
    reply = embeddings(v1, ["short", too_long])
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "input" and error["type"] == "invalid_request_error"
    assert "input[1]" in error["message"] and "8193" in error["message"] and "8192" in error["message"]
    many = [" ".join(["a"] * 8000)] * 9  # 72,000 word pieces in 144,000 characters: within web.embed_max_chars
    reply = embeddings(v1, many)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "input" and "72000" in error["message"] and str(MAX_REQUEST_PIECES) in error["message"]
