"""Text decoding, careful and streaming: which encoding a file is in, then its text piece by piece.

The encoding is chosen from the file's first MiB (the whole file when it is smaller): UTF-8 (with or
without BOM), UTF-16 with a BOM — or without one, recognised by its zero bytes all falling on every
other byte and by text that reads as text (not ideographs and Latin letters taking turns) —, then
GB18030 (a superset of GBK, for Chinese files saved by older Windows tools) when the result really
looks like Chinese, then Windows-1252. A binary file named `.txt` (NUL bytes in no
UTF-16 pattern, or bytes no encoding explains) is refused. The rest of a large file is decoded with
that encoding, a block at a time (undecodable bytes beyond the first MiB become U+FFFD).
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from app.knowledge.loaders.types import LoadError
from app.knowledge.script import is_cjk

SNIFF_BYTES = 1 << 20
_BLOCK = 1 << 20
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_MIN_CHINESE_SHARE = 0.5  # share of decoded CJK characters that must be common (GB2312 level 1)
_MAX_CONTROL_SHARE = 0.02
_MAX_SCRIPT_TURNS = 0.3  # of adjacent characters, in text taken for UTF-16 without a BOM
_MIN_UTF16_ZERO_SHARE = 0.1  # of the 16-bit units: ASCII, Latin and most punctuation have a zero byte
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode_text(data: bytes, *, name: str) -> str:
    """The whole text of `data`, or a LoadError that tells the user what the file really is."""
    encoding = sniff(data, complete=True, name=name)
    text = clean(data.decode(encoding, "replace"))
    if not text.strip():
        raise LoadError("empty", f"{name} is empty: there is no text to index.")
    return text


def sniff(sample: bytes, *, complete: bool, name: str) -> str:
    """The encoding of a file that starts with `sample` (`complete`: the sample is the whole file)."""
    if not sample.strip():
        if complete:
            raise LoadError("empty", f"{name} is empty: there is no text to index.")
        return "utf-8"
    for bom, encoding in _BOMS:
        if sample.startswith(bom):
            if _decodes(sample, encoding, complete=complete) is None:
                raise LoadError("corrupt", f"{name} starts like {encoding} text but is damaged.")
            return encoding
    if b"\x00" in sample[:65536]:
        utf16 = _utf16_without_bom(sample, complete=complete)
        if utf16 is None:
            raise LoadError(
                "unsupported",
                f"{name} is a binary file, not text (it contains NUL bytes). "
                "Check its real type, or export it as .txt, .md, .pdf or .docx.",
            )
        return utf16
    for encoding, fits in (("utf-8", _any_text), ("gb18030", _chinese), ("cp1252", _plausible)):
        text = _decodes(sample, encoding, complete=complete)
        if text is not None and fits(text):
            return encoding
    raise LoadError(
        "corrupt",
        f"{name} is not readable text: it is neither UTF-8, UTF-16, GB18030/GBK nor Windows-1252. "
        "Save it as UTF-8 and add it again.",
    )


def read_text(stream: BinaryIO, *, name: str, size: int, declared: str | None = None) -> Iterator[str]:
    """The text of `stream` (a file of `size` bytes) in cleaned pieces of about a MiB each.

    `declared` is an encoding the file names itself (an HTML meta charset): used when the start of
    the file decodes with it."""
    sample = stream.read(SNIFF_BYTES)
    complete = len(sample) >= size
    encoding = declared if declared and _decodes(sample, declared, complete=complete) is not None else None
    encoding = encoding or sniff(sample, complete=complete, name=name)
    decoder = codecs.getincrementaldecoder(encoding)("replace")
    newlines = _Newlines()
    block = sample
    while block:
        yield newlines.clean(decoder.decode(block))
        block = stream.read(_BLOCK)
    yield newlines.clean(decoder.decode(b"", final=True), final=True)


def open_text(path: Path, *, name: str) -> Iterator[str]:
    with path.open("rb") as stream:
        yield from read_text(stream, name=name, size=path.stat().st_size)


def clean(text: str) -> str:
    """Line ends as \\n, no control characters but tab, newline and form feed."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


class _Newlines:
    """`clean` over a stream of pieces: a \\r at the end of one piece may pair with a \\n in the next."""

    def __init__(self) -> None:
        self.held = ""

    def clean(self, piece: str, *, final: bool = False) -> str:
        piece = self.held + piece
        self.held = ""
        if piece.endswith("\r") and not final:
            piece, self.held = piece[:-1], "\r"
        return clean(piece)


def _decodes(data: bytes, encoding: str, *, complete: bool) -> str | None:
    try:
        return codecs.getincrementaldecoder(encoding)("strict").decode(data, final=complete)
    except (UnicodeDecodeError, LookupError):
        return None


def _utf16_without_bom(sample: bytes, *, complete: bool) -> str | None:
    """utf-16-le/-be when the zero bytes fall (almost) only on even or only on odd offsets."""
    sample = sample[: len(sample) // 2 * 2] if not complete else sample
    units = max(len(sample) // 2, 1)
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    for zeros, stray, encoding in ((odd, even, "utf-16-le"), (even, odd, "utf-16-be")):
        if zeros >= _MIN_UTF16_ZERO_SHARE * units and stray <= min(0.05 * units, zeros / 4):
            text = _decodes(sample, encoding, complete=complete)
            if text is not None and _plausible(text) and "\x00" not in text and not _interleaved(text):
                return encoding
    return None


def _interleaved(text: str) -> bool:
    """Ideographs and ASCII letters taking turns character by character ("扡c扡c…"): what `abc\\0`
    repeated reads as when taken for UTF-16, never real text, where each script comes in runs."""
    pairs = max(len(text) - 1, 1)
    turns = sum(is_cjk(a) != is_cjk(b) and (a.isascii() or b.isascii()) for a, b in itertools.pairwise(text))
    return turns > _MAX_SCRIPT_TURNS * pairs


def _any_text(text: str) -> bool:
    return True


def _chinese(text: str) -> bool:
    cjk = [ch for ch in text if is_cjk(ch)]
    if not cjk:
        return False
    common = sum(1 for ch in cjk if _gb2312_level1(ch))
    return common / len(cjk) >= _MIN_CHINESE_SHARE and _plausible(text)


def _gb2312_level1(ch: str) -> bool:
    try:
        lead = ch.encode("gb2312")[0]
    except UnicodeEncodeError:
        return False
    return 0xB0 <= lead <= 0xD7


def _plausible(text: str) -> bool:
    return len(_CONTROL.findall(text)) <= _MAX_CONTROL_SHARE * max(len(text), 1)
