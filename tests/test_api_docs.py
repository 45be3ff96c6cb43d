"""docs/api.md's table of every /v1 field against the request models: a field a model declares, or refuses
by name, must be in the table for its route, so the documentation cannot fall behind the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from app.api import request_models, response_request
from app.api.request_models import ChatRequest, CompletionRequest, EmbeddingRequest
from app.api.response_request import ResponsesRequest

API_MD = Path(__file__).resolve().parent.parent / "docs" / "api.md"
ROUTES: list[tuple[str, type[BaseModel], tuple[str, ...]]] = [
    ("POST /v1/chat/completions", ChatRequest, request_models.UNSUPPORTED),
    ("POST /v1/completions", CompletionRequest, request_models.UNSUPPORTED_COMPLETION),
    ("POST /v1/embeddings", EmbeddingRequest, ()),
    ("POST /v1/responses", ResponsesRequest, response_request.UNSUPPORTED),
]


def documented() -> dict[str, dict[str, str]]:
    """Route → field → what the table says, from the rows of "Every field, route by route"."""
    text = API_MD.read_text(encoding="utf-8")
    section = text.split("### Every field, route by route", 1)[1].split("\n\n", 3)[2]
    table: dict[str, dict[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`POST"):
            continue
        route = cells[0].strip("`")
        for field in re.findall(r"`([a-z_]+)`", cells[1]):
            table.setdefault(route, {})[field] = cells[2]
    return table


@pytest.mark.parametrize(("route", "model", "refused"), ROUTES, ids=[r[0] for r in ROUTES])
def test_every_field_of_the_request_models_is_in_the_table(
    route: str, model: type[BaseModel], refused: tuple[str, ...]
) -> None:
    rows = documented().get(route, {})
    fields = {info.alias or name for name, info in model.model_fields.items()}
    missing = sorted(fields - set(rows))
    assert not missing, f"docs/api.md lacks rows for {route}: {missing}"
    wrong = [name for name in refused if not rows.get(name, "").startswith("refused")]
    assert not wrong, f"docs/api.md does not say {route} refuses {wrong}"
    not_in_model = [name for name, says in rows.items() if says.startswith("supported") and name not in fields]
    assert not not_in_model, f"docs/api.md says {route} supports {not_in_model}, which its model lacks"
