"""Which characters are Chinese, and where a sentence ends: the one definition chunking, full-text
search, answering and text loading share.

CJK here is the Han ideographs: Unified (U+4E00–9FFF), Extension A (U+3400–4DBF) and the compatibility
block (U+F900–FAFF). A sentence ends at a run of . ! ? ; … or their full-width forms 。！？；, with any
closing quotes or brackets, before white space, a non-ASCII character (Chinese sets no space after
。) or the end of the text; "3.5" and "e.g.x" do not end one.
"""

from __future__ import annotations

import re

CJK_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # for a regex character class: f"[{CJK_RANGES}]"
_CJK = re.compile(f"[{CJK_RANGES}]")
SENTENCE_END = re.compile(r"[.!?。！？；;…]+[\"'”’」』）)]*(?=\s|[^\x00-\x7f]|$)")


def is_cjk(ch: str) -> bool:
    """Whether the character `ch` is a Han ideograph."""
    return "\u3400" <= ch <= "\u4dbf" or "\u4e00" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def has_cjk(text: str) -> bool:
    """Whether `text` holds any Han ideograph."""
    return _CJK.search(text) is not None
