"""Text from a model, a document or a user, made safe to show in the page.

Whatever a model writes (and a document it reads can tell it what to write), the page must not fetch
or run anything for it: a remote image would send the browser to that address, with whatever the model
put in the URL; raw HTML could add elements, styles and links. So the text is parsed as Markdown by a
real CommonMark parser (markdown-it-py) with raw HTML off — HTML in the text is shown as text, wherever
it stands, whatever code fences or backticks surround it — images other than inline `data:` pictures
are shown as their description, and links to `javascript:`-like targets stay text. The HTML that comes
out is then cleaned by an allow-list sanitiser (nh3): only the tags and attributes that Markdown makes
can remain. The page's Content-Security-Policy (`app/server.py`) backs this up.

The result is HTML on one line inside one `<div>`: the page's own Markdown renderer takes one line that
starts with a block tag as a single HTML block and leaves it as it is (a blank line, one inside a code
block say, would end the block and hand the rest back to it as Markdown)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token

_SAFE_IMAGE = re.compile(r"^data:image/(?:png|jpeg|gif|webp);", re.IGNORECASE)
_SAFE_LINK = re.compile(r"^(?:https?:|mailto:|#|/(?!/))", re.IGNORECASE)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")
_TAGS = {
    *("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code", "em", "strong"),
    *("s", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a", "img"),
}
_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "code": {"class"}, "ol": {"start"}}


def _image(_renderer: Any, tokens: Sequence[Token], idx: int, _options: Any, _env: Any) -> str:
    token = tokens[idx]
    description = "".join(child.content for child in token.children or [])
    if _SAFE_IMAGE.match(str(token.attrGet("src") or "")):
        return f'<img src="{html.escape(str(token.attrGet("src")))}" alt="{html.escape(description)}">'
    shown = html.escape(description or "image")
    return f"🖼 <em>{shown} (not loaded: images from other addresses are not shown)</em>"


_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["table", "strikethrough"])
_MARKDOWN.add_render_rule("image", _image)


def _attribute(tag: str, name: str, value: str) -> str | None:
    if tag == "img" and name == "src":
        return value if _SAFE_IMAGE.match(value) else None
    if tag == "a" and name == "href":
        return value if _SAFE_LINK.match(value) else None
    if tag == "code" and name == "class":
        return value if re.fullmatch(r"language-[\w+-]{1,40}", value) else None
    return value


# Inline and display maths as people (and models) write it.
LATEX: list[dict[str, str | bool]] = [
    {"left": "$$", "right": "$$", "display": True},
    {"left": "\\[", "right": "\\]", "display": True},
    {"left": "\\(", "right": "\\)", "display": False},
    {"left": "$", "right": "$", "display": False},
]


def safe_markdown(text: str) -> str:
    """`text` (Markdown) rendered as HTML with nothing in it that loads or runs; "" for blank text."""
    if not text.strip():
        return ""
    rendered = _MARKDOWN.render(text.replace("\x00", ""))
    clean = nh3.clean(
        rendered,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto", "data"},
        attribute_filter=_attribute,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return '<div class="q-md">' + clean.strip().replace("\r", "").replace("\n", "&#10;") + "</div>"


def answer_markdown(text: str) -> str:
    """An answer as `safe_markdown` renders it, carrying its Markdown source in the div's `data` attribute
    (data-* ones are dropped by Gradio's own sanitiser; this one is kept and means nothing on a div): the
    page's Copy gives that text, not the HTML (assets/quartet.js). Escaped, on the same one line."""
    shown = safe_markdown(text)
    if not shown:
        return ""
    source = html.escape(text.replace("\x00", ""), quote=True).replace("\r", "").replace("\n", "&#10;")
    return f'<div class="q-md" data="{source}">' + shown.removeprefix('<div class="q-md">')


_INFO = re.compile(r"[\w+#.-]*")
# What `_plain` writes for < > & [ : . — one pass over these gives the typed text back (the page's Copy does the
# same in assets/quartet.js); a fence holding one of them is escaped whole, so the pass cannot misread it.
_ENTITY = re.compile(r"&(lt|gt|amp|#91|#58|#46);")
_CHARS = {"lt": "<", "gt": ">", "amp": "&", "#91": "[", "#58": ":", "#46": "."}


def typed_text(text: str) -> str:
    """A person's own message as the page's Markdown renderer gets it (the bubble, and the edit box, hold it):
    their words, with HTML, link and image brackets and addresses made plain (`&lt;`, `&#91;`, `&#58;//`) so no
    element, image or link can form — except inside a code fence, which the renderer shows as text itself:
    there the lines stay as typed (escaped there too, `</code></pre>` in a ```html block showed as
    `&lt;/code&gt;&lt;/pre&gt;`). Only a closed fence at the top level with its fences in the first column
    counts (`_fences`), only if the text as shown has exactly those fences, and only if it holds none of the
    entities `_plain` writes."""
    lines = text.split("\n")
    kept: frozenset[int] = frozenset()
    for _ in range(4):  # escaping outside the fences can change what is a fence (a `>` quote is no more)
        shown = "\n".join(line if n in kept else _plain(line) for n, line in enumerate(lines))
        found = frozenset(
            n for fence in _fences(shown) if not any(_ENTITY.search(lines[n]) for n in fence) for n in fence
        )
        if found == kept:
            return shown
        kept = found
    return _plain(text)


def typed_back(shown: str) -> str:
    """What a person meant by the text of their bubble's edit box (`typed_text` read back)."""
    return _ENTITY.sub(lambda found: _CHARS[found.group(1)], shown)


def _plain(text: str) -> str:
    plain = html.escape(text, quote=False).replace("[", "&#91;")
    return plain.replace("://", "&#58;//").replace("www.", "www&#46;")  # no address becomes a link either


def _fences(text: str) -> list[range]:
    """The lines (fences included) of each closed code fence at the top level whose opening and closing fences
    start in the first column and whose info string is a plain word (`html`, `c++`)."""
    lines = text.split("\n")
    kept: list[range] = []
    for token in _MARKDOWN.parse(text):
        if token.type != "fence" or token.level != 0 or token.map is None or not _INFO.fullmatch(token.info):
            continue
        first, end = token.map
        closing = re.compile(re.escape(token.markup[0]) + f"{{{len(token.markup)},}}[ \t\r]*")
        if end - first >= 2 and lines[first].startswith(token.markup) and closing.fullmatch(lines[end - 1]):
            kept.append(range(first, end))
    return kept


def literal(text: str) -> str:
    """`text` (a file name, say) shown exactly as it is inside Markdown: no markup, no HTML."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
