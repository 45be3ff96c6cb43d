"""A prompt's tokens as llama.cpp reads them, refused at once when it is surely longer than the context.

llama.cpp's tokenizer takes time that grows with the square of the whitespace runs and line breaks in one text
(measured on the demo model's vocabulary: 200 kB of "hi hi hi" lines 3.4 s, 400 kB 13 s, 1 MB 92 s; plain
prose and Chinese stay linear). So a long text is first counted in pieces of a few kilobytes cut at whitespace
(linear: the pieces' counts summed to the whole one's on this repository's docs), and one whose count, less a few
tokens at each cut, is still over the context is refused before it is read whole.
"""

from __future__ import annotations

from typing import Any

from app.engine.counts import overflow
from app.valid_text import valid_text

PIECE_BYTES = 4096
CUT_SLACK = 4  # tokens a cut may change: a token that spans it, split in two


def _pieces(text: bytes, size: int) -> list[bytes]:
    """`text` in pieces of about `size` bytes, each cut before a space or line break where one is near (else at
    a UTF-8 character's start)."""
    pieces, start = [], 0
    while len(text) - start > size:
        end = start + size
        cut = max(text.rfind(b" ", start + size // 2, end), text.rfind(b"\n", start + size // 2, end))
        if cut <= start:
            cut = end
            while cut > start and text[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte: not a character's start
                cut -= 1
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def tokenize(llm: Any, text: bytes, *, add_bos: bool, n_ctx: int) -> list[int]:
    """`text`'s tokens (special tokens parsed, as a chat template writes them), or EngineError (kind `context`)
    when even counted in pieces it is over `n_ctx`."""
    if len(text) > PIECE_BYTES * 4:
        pieces = _pieces(text, PIECE_BYTES)
        counted = sum(len(llm.tokenize(piece, add_bos=False, special=True)) for piece in pieces)
        at_least = counted - CUT_SLACK * len(pieces)
        if at_least > n_ctx:
            raise overflow(at_least, n_ctx, at_least=True)
    return list(llm.tokenize(text, add_bos=add_bos, special=True))


def utf8(text: str) -> bytes:
    """The text to tokenise, as UTF-8: the front doors make text valid (app/valid_text.py); this last
    guard keeps a lone surrogate that got past them from ending the worker (UnicodeEncodeError)."""
    return valid_text(text).encode("utf-8")
