"""Issue 22, item 12: a search with no match showed an empty list; titles kept Markdown leftovers ("Here
is bold , inline code ,"); the export file was named by its date, not by the chat's title."""

from __future__ import annotations

from app.chat.store import Conversation, _title
from app.ui import display


def test_a_search_that_finds_nothing_says_so() -> None:
    assert display.list_label("harbour", 0) == "No chat matches “harbour”"
    assert display.list_label("harbour", 2) == "Conversations"
    assert display.list_label("  ", 0) == "Conversations"  # no search: an empty list is just empty


def test_a_title_made_from_markdown_reads_as_a_sentence() -> None:
    assert _title("Here is **bold**, `inline code`, and _this_.") == "Here is bold, inline code, and this."


def test_an_export_is_named_by_the_chats_title_and_day() -> None:
    chat = Conversation("c1", "Budget 2027: the harbour/plan?", "", "2026-12-02T10:00:00", "browser:a")
    assert display.export_name(chat, ".json") == "Budget-2027-the-harbourplan-2026-12-02.json"
    untitled = Conversation("c2", "?!", "", "2026-12-02T10:00:00", "browser:a")
    assert display.export_name(untitled, ".md") == "chat-2026-12-02.md"
