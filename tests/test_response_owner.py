"""A stored response is its key's however the key is sent (issue 47, item 12): the owner is derived from the
key as the /v1 gate reads it (`bearer …`, `Bearer  …` with two spaces), never from the header as sent; another
key, or none, finds nothing."""

from __future__ import annotations

import pytest

from app.api.errors import ApiError
from app.api.gate import Keys, bearer_key
from app.api.request_models import ChatMessage
from app.api.response_store import ResponseStore, owner_of

KEY, OTHER = "qk-the-agents-key-0123456789", "qk-someone-elses-key-9876543210"
SPELLINGS = [f"Bearer {KEY}", f"bearer {KEY}", f"BEARER {KEY}", f"Bearer  {KEY}", f"Bearer {KEY}  "]


def test_the_same_key_however_sent_reads_its_own_stored_response() -> None:
    keys = Keys(lambda: [KEY, OTHER])
    store = ResponseStore()
    store.keep(owner_of(SPELLINGS[0]), {"id": "resp_1"}, [ChatMessage(role="user", content="hi")])
    for header in SPELLINGS:
        assert keys.allows(header) and bearer_key(header) == KEY  # the gate lets each in as this key
        assert store.get(owner_of(header), "resp_1").response == {"id": "resp_1"}
    for stranger in (f"Bearer {OTHER}", "", f"Basic {KEY}"):
        with pytest.raises(ApiError, match="there is no response 'resp_1'"):
            store.get(owner_of(stranger), "resp_1")
