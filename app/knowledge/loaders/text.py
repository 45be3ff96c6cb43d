"""Plain text, Markdown and CSV: decoded carefully, cut into pseudo-pages.

Decoding tries UTF-8 (with or without BOM), UTF-16 with a BOM, then GB18030 (a superset of GBK,
for Chinese files saved by older Windows tools) when the result really looks like Chinese, then
Windows-1252. A binary file named `.txt` (NUL bytes, or bytes no encoding explains) is refused.

A pseudo-page is about one printed page: at most `page_chars` characters, cut at a form feed, a
blank line, a line end, a sentence end (also Chinese 。！？；) or a space, in that order of preference.
"""

from __future__ import annotations

import codecs
import csv
import io
import re

from app.knowledge.loaders.types import LoadError, Page

_SENTENCE_END = re.compile(r"[.!?;。！？；…](?:[\"'”’」』）)]*)(?=\s|[^\x00-\x7f]|$)")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_MIN_CHINESE_SHARE = 0.5  # share of decoded CJK characters that must be common (GB2312 level 1)
_MAX_CONTROL_SHARE = 0.02
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode_text(data: bytes, *, name: str) -> str:
    """The text of `data`, or a LoadError that tells the user what the file really is."""
    if not data.strip():
        raise LoadError("empty", f"{name} is empty: there is no text to index.")
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return _clean(data.decode(encoding), name=name)
            except UnicodeDecodeError as err:
                message = f"{name} starts like {encoding} text but is damaged ({err.reason})."
                raise LoadError("corrupt", message) from err
    if b"\x00" in data[:65536]:
        raise LoadError(
            "unsupported",
            f"{name} is a binary file, not text (it contains NUL bytes). "
            "Check its real type, or export it as .txt, .md, .pdf or .docx.",
        )
    for decode in (_utf8, _gb18030, _cp1252):
        text = decode(data)
        if text is not None:
            return _clean(text, name=name)
    raise LoadError(
        "corrupt",
        f"{name} is not readable text: it is neither UTF-8, GB18030/GBK nor Windows-1252. "
        "Save it as UTF-8 and add it again.",
    )


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _gb18030(data: bytes) -> str | None:
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return None
    cjk = [ch for ch in text if "\u4e00" <= ch <= "\u9fff"]
    if not cjk:
        return None
    common = sum(1 for ch in cjk if _gb2312_level1(ch))
    return text if common / len(cjk) >= _MIN_CHINESE_SHARE and _plausible(text) else None


def _gb2312_level1(ch: str) -> bool:
    try:
        lead = ch.encode("gb2312")[0]
    except UnicodeEncodeError:
        return False
    return 0xB0 <= lead <= 0xD7


def _cp1252(data: bytes) -> str | None:
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        return None
    return text if _plausible(text) else None


def _plausible(text: str) -> bool:
    return len(_CONTROL.findall(text)) <= _MAX_CONTROL_SHARE * max(len(text), 1)


def _clean(text: str, *, name: str) -> str:
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    if not text.strip():
        raise LoadError("empty", f"{name} is empty: there is no text to index.")
    return text


def paginate(text: str, *, page_chars: int) -> list[Page]:
    """Cut `text` into pseudo-pages of at most `page_chars` characters (see the module doc)."""
    pieces: list[str] = []
    for part in text.split("\f"):
        while len(part) > page_chars:
            cut = _cut_point(part, page_chars)
            pieces.append(part[:cut])
            part = part[cut:]
        pieces.append(part)
    texts = [p.strip("\n") for p in pieces if p.strip()]
    return [Page(number, body) for number, body in enumerate(texts, start=1)]


def _cut_point(text: str, limit: int) -> int:
    floor = limit // 2
    window = text[:limit]
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator, floor)
        if at >= 0:
            return at + len(separator)
    ends = [m.end() for m in _SENTENCE_END.finditer(window, floor)]
    if ends:
        return ends[-1]
    at = window.rfind(" ", floor)
    return at + 1 if at >= 0 else limit


def load_text(data: bytes, *, name: str, page_chars: int) -> list[Page]:
    return paginate(decode_text(data, name=name), page_chars=page_chars)


def load_csv(data: bytes, *, name: str, page_chars: int) -> list[Page]:
    """Each row becomes a line `header: value; header: value` so a row reads on its own."""
    text = decode_text(data, name=name)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = [row for row in csv.reader(io.StringIO(text), dialect) if any(cell.strip() for cell in row)]
    except csv.Error as err:
        raise LoadError("corrupt", f"{name} is not a readable CSV file ({err}).") from err
    if not rows:
        raise LoadError("empty", f"{name} has no rows.")
    header, body = rows[0], rows[1:]
    lines = [" | ".join(header)] + [_row_line(header, row) for row in body]
    return paginate("\n".join(lines), page_chars=page_chars)


def _row_line(header: list[str], row: list[str]) -> str:
    cells = []
    for i, value in enumerate(row):
        label = header[i].strip() if i < len(header) else ""
        cells.append(f"{label}: {value.strip()}" if label else value.strip())
    return "; ".join(cells)
