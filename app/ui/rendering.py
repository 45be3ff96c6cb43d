"""Text from a model, a document or a user, made safe to render as Markdown in the page.

Whatever a model writes (and a document it reads can tell it what to write), the page must not fetch
anything for it: a remote image in Markdown or HTML would send the browser to that address, with
whatever the model put in the URL. So outside code, raw HTML is shown as text, images other than
`data:` ones are shown as their description, and `javascript:`-like links lose their target. Code
spans and fenced blocks are left exactly as written (they render as text anyway). The page's
Content-Security-Policy (`app/server.py`) backs this up."""

from __future__ import annotations

import html
import re

_CODE = re.compile(r"(```.*?(?:```|$)|~~~.*?(?:~~~|$)|`[^`\n]+`)", re.DOTALL)
_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)")
_IMAGE_REF = re.compile(r"!\[")
_UNSAFE_SCHEME = r"(?:javascript|vbscript|data|file):"
_LINK = re.compile(r"\[([^\]\n]*)\]\(\s*<?\s*" + _UNSAFE_SCHEME + r"[^)]*\)", re.IGNORECASE)
_LINK_DEF = re.compile(r"^(\s{0,3})\[([^\]\n]+)\]:\s*<?\s*" + _UNSAFE_SCHEME, re.IGNORECASE | re.MULTILINE)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")

# Inline and display maths as people (and models) write it.
LATEX: list[dict[str, str | bool]] = [
    {"left": "$$", "right": "$$", "display": True},
    {"left": "\\[", "right": "\\]", "display": True},
    {"left": "\\(", "right": "\\)", "display": False},
    {"left": "$", "right": "$", "display": False},
]


def safe_markdown(text: str) -> str:
    """`text` to render as Markdown, with nothing in it that loads or runs."""
    parts = _CODE.split(text)
    return "".join(part if index % 2 else _defuse(part) for index, part in enumerate(parts))


def literal(text: str) -> str:
    """`text` (a file name, say) shown exactly as it is inside Markdown: no markup, no HTML."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def _defuse(text: str) -> str:
    kept: list[str] = []  # inline data: images, set aside while the rest is defused

    def image(match: re.Match[str]) -> str:
        description, url = match.group(1).strip(), match.group(2).lower()
        if url.startswith("data:image/") and not url.startswith("data:image/svg"):
            kept.append(match.group(0))
            return f"\x00{len(kept) - 1}\x00"
        return f"🖼 _{description or 'image'} (not loaded: images from other addresses are not shown)_"

    text = _TAG.sub("&lt;", text.replace("\x00", ""))
    text = _IMAGE.sub(image, text)
    text = _IMAGE_REF.sub(r"!\\[", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _LINK_DEF.sub(lambda m: f"{m.group(1)}\\[{m.group(2)}]: ", text)
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], text)
