"""Which `model` names a `/v1` request may send: the id /v1/models lists, the loaded model's name, and the
catalog entry it was loaded from by its id or name (`demo`, `27b`), so that a client configured with any of
them is answered, and one that names a model this appliance does not serve gets 404 `model_not_found`
rather than another model's answer."""

from __future__ import annotations

import re

from app.api.errors import ApiError
from app.context import AppContext

EMBEDDER_NAMES = frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})


def model_id(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")


def aliases(ctx: AppContext) -> set[str]:
    """Every name (in lower case) the loaded model answers to."""
    name = ctx.engine.loaded()[0]
    names = {model_id(name), name.lower()}
    try:
        entries = ctx.admin.entries()
    except (OSError, ValueError, KeyError):  # no catalog, or a broken one: the admin page says so
        entries = []
    for entry in entries:
        if entry.name == name or entry.id == name:
            names |= {entry.id.lower(), entry.name.lower(), model_id(entry.name)}
    return names


def check(asked: str, known: set[str] | frozenset[str], served: str) -> None:
    """404 `model_not_found` naming `model` unless `asked` is one of the `known` names."""
    if asked.lower() not in known:
        raise ApiError(
            f"there is no model {asked!r} here; this appliance serves {served!r} (GET /v1/models lists it)",
            kind="not_found",
            code="model_not_found",
            param="model",
        )
