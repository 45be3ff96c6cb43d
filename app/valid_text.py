"""Text made valid Unicode where it enters the app: a lone UTF-16 surrogate (`"\\udc80"`, which JSON's
`\\u` escapes and Gradio's payloads can carry) becomes U+FFFD, the replacement character.

Python's `str` holds such a code point, but it has no UTF-8 form: the tokenizer, the embedder, SQLite
and every JSON response would fail on it (`UnicodeEncodeError`). The /v1 request models
(app/api/request_models.py) and the Gradio handlers (app/ui/errors.py `explained`) pass what they are
given through `valid_values` once; the engine's tokenising and the chat store keep a last guard.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

Value = TypeVar("Value")
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a pair written as two code points is joined)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def valid_values(value: Value) -> Value:
    """`value` with `valid_text` applied to every string in it, through lists, tuples and dicts (keys
    too). Anything else, and any container that needed no change, is returned as it is (the same object)."""
    return _valid(value)  # type: ignore[no-any-return]


def _valid(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if type(value) in (list, tuple):
        items = [_valid(item) for item in value]
        unchanged = all(new is old for new, old in zip(items, value, strict=True))
        return value if unchanged else type(value)(items)
    if type(value) is dict:
        pairs = [(_valid(key), _valid(item)) for key, item in value.items()]
        unchanged = all(k is key and v is item for (k, v), (key, item) in zip(pairs, value.items(), strict=True))
        return value if unchanged else dict(pairs)
    return value
