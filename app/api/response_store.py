"""The Responses API's memory: each finished response, and the conversation it ends, kept per owner (the
API key that asked, as the gate reads it, hashed: `bearer …` or two spaces are the same key) so that
`previous_response_id` continues it and `GET /v1/responses/{id}` shows it. In memory, the newest `limit`
kept: a restart forgets them, as `store` is best effort here."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from app.api.errors import ApiError
from app.api.gate import bearer_key
from app.api.request_models import ChatMessage


@dataclass(frozen=True)
class Kept:
    owner: str
    response: dict[str, Any]
    conversation: tuple[ChatMessage, ...]  # every turn up to and including this response's output


def owner_of(authorization: str) -> str:
    """Whose responses a request's are: the SHA-256 of the key its Authorization header carries (the same key
    however the header spells "Bearer" or spaces it; no key: the open API's one owner)."""
    return hashlib.sha256(bearer_key(authorization).encode()).hexdigest()


class ResponseStore:
    def __init__(self, *, limit: int = 1000) -> None:
        self.limit = limit
        self._kept: OrderedDict[str, Kept] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, owner: str, response: dict[str, Any], conversation: list[ChatMessage]) -> None:
        with self._lock:
            self._kept[response["id"]] = Kept(owner, response, tuple(m.model_copy(deep=True) for m in conversation))
            while len(self._kept) > self.limit:
                self._kept.popitem(last=False)

    def get(self, owner: str, response_id: str, *, param: str = "previous_response_id") -> Kept:
        """The response kept under `response_id` for `owner`; 404 naming `param` when there is none."""
        with self._lock:
            kept = self._kept.get(response_id)
        if kept is None or kept.owner != owner:
            raise ApiError(
                f"there is no response {response_id!r} here (responses are kept in memory, the newest "
                f"{self.limit}, until the appliance restarts): send the whole conversation as input instead",
                kind="not_found",
                code="previous_response_not_found" if param == "previous_response_id" else "response_not_found",
                param=param,
            )
        return kept
