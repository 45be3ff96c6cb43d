"""Texts longer than the embedder reads (MiniLM: 254 word pieces), embedded whole: in windows, pooled.

What `/v1/embeddings` does with a text (app/api/openai_routes.py). A text within one window is embedded as
text, as it always was, so its vector is unchanged. A longer one is cut into windows of its own word pieces
(the embedder's tokenizer's ids): as few windows as hold it, each at most the model's limit and all as near
one size as can be (no stub of a last window with a full share of the mean), cut between two pieces (a
word may so straddle two windows), with no overlap, so each piece is read once. Each window is embedded as
the model embeds any text, and the text's vector is the mean of its window vectors, L2-normalised.

Bounds, so that one request cannot hold the box: `MAX_INPUT_PIECES` per text and `MAX_REQUEST_PIECES` in
all; above either the request is refused, before any work (`TooLong`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

from app.knowledge.embedder import Embedder

# Per text: as OpenAI's embedding models, which read at most 8,191 tokens an input (33 MiniLM windows).
MAX_INPUT_PIECES = 8192
# Per request, all texts together: what the largest request could already make the embedder read before texts
# were windowed (web.embed_max_inputs = 256 texts of a full window, [CLS] and [SEP] included: 256 x 256), so the
# longest a request keeps the embedder busy does not grow: ~260 windows, about 23 s of one core here (one window
# of 254 pieces is ~87 ms of CPU on this box). Windows go to the model in turns (`Embedder.embed_pieces`), so a
# search's question waits one turn, not the whole request.
MAX_REQUEST_PIECES = 65_536


class TooLong(ValueError):
    """A request with a text above `MAX_INPUT_PIECES` (`index` is its place in the input), or above
    `MAX_REQUEST_PIECES` in all (`index` is None)."""

    def __init__(self, index: int | None, pieces: int, limit: int) -> None:
        if index is None:
            message = (
                f"input has {pieces} word pieces in all; at most {limit} are embedded per request: "
                "send the texts in smaller batches"
            )
        else:
            message = (
                f"input[{index}] is {pieces} word pieces long; at most {limit} are embedded per input "
                "(OpenAI's models read 8191 tokens): split it into parts and embed each"
            )
        super().__init__(message)
        self.index, self.pieces, self.limit = index, pieces, limit


def embed_whole(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    max_input: int = MAX_INPUT_PIECES,
    max_request: int = MAX_REQUEST_PIECES,
) -> tuple[np.ndarray, list[int]]:
    """Unit-length vectors of `texts`, one row each, long ones pooled from their windows; and the word pieces
    of each text the model read (every window's: without overlap, the text's own count)."""
    ids = embedder.token_ids(texts)
    counts = [len(pieces) for pieces in ids]
    check_bounds(counts, max_input=max_input, max_request=max_request)
    limit = embedder.max_tokens
    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    short = [i for i, count in enumerate(counts) if count <= limit]
    if short:
        vectors[short] = embedder.embed([texts[i] for i in short])
    long = [i for i, count in enumerate(counts) if count > limit]
    cut = [windows(ids[i], limit) for i in long]
    read = embedder.embed_pieces([window for parts in cut for window in parts])
    at = 0
    for i, parts in zip(long, cut, strict=True):
        vectors[i] = pooled(read[at : at + len(parts)])
        at += len(parts)
    return vectors, counts


def check_bounds(counts: Sequence[int], *, max_input: int, max_request: int) -> None:
    """`TooLong` for the first text above `max_input` word pieces, else for a request above `max_request`."""
    for index, count in enumerate(counts):
        if count > max_input:
            raise TooLong(index, count, max_input)
    if sum(counts) > max_request:
        raise TooLong(None, sum(counts), max_request)


def windows(pieces: Sequence[int], limit: int) -> list[list[int]]:
    """`pieces` in order, cut into as few windows of at most `limit` as hold them, all of near one size."""
    n = len(pieces)
    count = max(1, -(-n // limit))
    bounds = [k * n // count for k in range(count + 1)]
    return [list(pieces[start:end]) for start, end in pairwise(bounds)]


def pooled(vectors: np.ndarray) -> np.ndarray:
    """The mean of window vectors, L2-normalised (MiniLM's vectors are unit length, so is the pool)."""
    mean = vectors.mean(axis=0)
    return np.asarray(mean / max(float(np.linalg.norm(mean)), 1e-12), dtype=np.float32)


def api_embed(embedder: Embedder) -> Callable[[list[str]], tuple[list[list[float]], int]]:
    """What `/v1/embeddings` calls (`AppContext.embed`): texts to their vectors and the word pieces read."""

    def embed(texts: list[str]) -> tuple[list[list[float]], int]:
        vectors, counts = embed_whole(embedder, texts)
        return vectors.tolist(), sum(counts)

    return embed
