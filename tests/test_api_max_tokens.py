"""A /v1 request that names no `max_tokens` gets what the context leaves (OpenAI's default), up to
`engine.max_tokens_limit` or the lower `web.api_default_max_tokens` an admin sets — not the page chat's
`engine.max_tokens` (512), which cut the whole-file edits of clients that send none (issue 51.4).

The translation is shown in process for every route's request; the answer on the demo model through the
engine's own scheduler (in this process, on the engine cards): a counted sequence runs past 512 tokens and
ends where the context does."""

from __future__ import annotations

from pathlib import Path

from app.api.request_models import ChatRequest, CompletionRequest
from app.api.response_request import ResponsesRequest
from app.engine.events import Done
from app.engine.follow import follow
from app.engine.service import EngineService
from app.settings import Settings
from tests.engine_host import EngineHost

COUNT = "Go on counting, one number after another: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"


def _settings(tmp_path: Path, **web: int) -> Settings:
    return Settings(data_dir=tmp_path, web=web)  # type: ignore[arg-type]


def test_no_max_tokens_on_v1_asks_for_the_limit_not_the_chats_default(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings.engine.max_tokens == 512 and settings.engine.max_tokens_limit == 4096  # the shipped defaults
    default = settings.api_max_tokens()
    assert default == 4096, default
    chat = ChatRequest(model="demo", messages=[{"role": "user", "content": COUNT}])  # type: ignore[list-item]
    responses = ResponsesRequest(model="demo", input=COUNT).chat([])
    completion = CompletionRequest(model="demo", prompt=COUNT)
    assert [
        r.to_engine(default_max_tokens=default, default_temperature=0.0).max_tokens
        for r in (chat, responses, completion)
    ] == [4096, 4096, 4096]
    named = ChatRequest(model="demo", messages=[{"role": "user", "content": COUNT}], max_tokens=7)  # type: ignore[list-item]
    assert named.to_engine(default_max_tokens=default, default_temperature=0.0).max_tokens == 7


def test_an_admin_may_bound_the_default_lower_never_above_the_limit(tmp_path: Path) -> None:
    assert _settings(tmp_path, api_default_max_tokens=300).api_max_tokens() == 300
    assert _settings(tmp_path, api_default_max_tokens=100_000).api_max_tokens() == 4096


def test_a_v1_answer_without_max_tokens_runs_past_512_to_the_end_of_the_context(
    engine_host: EngineHost, tmp_path: Path
) -> None:
    service: EngineService = engine_host.service(isolated=False, n_ctx=2048, parallel=3)
    body = ChatRequest(model="demo", messages=[{"role": "user", "content": COUNT}])  # type: ignore[list-item]
    request = body.to_engine(default_max_tokens=_settings(tmp_path).api_max_tokens(), default_temperature=0.0)
    events = list(follow(service.submit(request)))
    end = events[-1]
    assert isinstance(end, Done), end
    stats = end.stats
    assert stats.generated_tokens > 512, stats  # before: cut at engine.max_tokens
    room = 2048 - stats.prompt_tokens  # the context left after the prompt bounds it
    assert stats.generated_tokens <= room, stats
    assert stats.finish_reason == "stop" or stats.generated_tokens == room, stats
