"""What the Documents tab shows, and its Stop marks, without a browser: a file's indexing named phase by
phase, its page count kept while it is embedded, and a Stop pressed before the answer started still counts; and
an answer's stats line."""

from __future__ import annotations

from app.knowledge.ingest import FileProgress, IngestProgress
from app.knowledge.store import DocumentInfo
from app.ui.display import stats_line
from app.ui.documents_view import progress_line, table
from app.ui.stops import Stops


def doc(name: str, status: str, done: int, total: int) -> DocumentInfo:
    return DocumentInfo(
        1, f"/kb/{name}", name, "", status, None, None, None, done, total, 0, None, None, None, None, None, None, None
    )


def test_a_file_being_embedded_keeps_its_page_count_and_names_its_phase() -> None:
    embedding = FileProgress("/kb/a.pdf", "a.pdf", "embedding", 58, 117)
    now = IngestProgress([embedding], [], 0, [])
    shown = table([doc("a.pdf", "indexing", 58, 117)], now)  # the store holds the embedded share, in pages
    assert shown["data"][0][1] == "⏳ embedding 58/117"
    assert shown["data"][0][3] == "117"  # not "58/117" after "117/117": the count never goes back
    assert "var(--q-tone-busy)" in shown["metadata"]["styling"][0][1]
    assert progress_line(now) == "step 2 of 3, embedding **a.pdf**: 58 of 117 pages"
    reading = IngestProgress([FileProgress("/kb/a.pdf", "a.pdf", "reading", 40, 117)], [], 2, [])
    assert progress_line(reading) == "step 1 of 3, reading **a.pdf**: page 40 of 117 · 2 waiting"


def test_a_page_being_read_by_ocr_says_so_in_the_library() -> None:
    ocr = IngestProgress([FileProgress("/kb/scan.pdf", "scan.pdf", "ocr", 3, 12)], [], 0, [])
    assert table([doc("scan.pdf", "indexing", 3, 12)], ocr)["data"][0][1] == "⏳ reading page 3 of 12 by OCR"
    assert progress_line(ocr) == "step 1 of 3, reading **scan.pdf**: page 3 of 12 by OCR"


def test_a_stop_counts_for_the_answer_its_button_started_and_only_for_it() -> None:
    stops = Stops()
    asked = stops.stopped("page-1", "ask")
    stops.stop("page-1", "ask")  # before any Ask: nothing to stop
    stops.clear("page-1", "ask")  # Ask pressed
    assert not asked()
    stops.stop("page-1", "ask")  # Stop pressed, whether or not the answer has started yet
    assert asked() and not stops.stopped("page-1", "read")() and not stops.stopped("page-2", "ask")()
    stops.clear("page-1", "ask")  # the next Ask starts unstopped
    assert not asked()


def test_a_persons_message_is_shown_as_their_text_and_an_edit_reads_back_as_written() -> None:
    """Their bubble (and so the edit box) holds their words, not rendered HTML; nothing in it can become an
    element, an image or a link; what comes back from the edit box is what they meant."""
    from app.chat.store import StoredMessage
    from app.ui import display

    typed = 'See ![x](http://127.0.0.1:9/x.png) <img src="y"> [a](javascript:alert(1)) & **bold**'
    message = StoredMessage(id=1, role="user", content=typed, status="done", stats=None)
    shown = display.shown_text(message)
    assert "<" not in shown and "[" not in shown and "://" not in shown and "**bold**" in shown
    assert display.edited_text(shown) == typed


def test_a_stopped_answer_says_so_on_a_plain_line_outside_its_text() -> None:
    """Issue 22, item 7: "stopped" was a second message with a title (a collapsible box with a chevron) in
    the answer's bubble, copied with it; it is a line inside the answer's bubble, after the part Copy takes."""
    from app.chat.store import StoredMessage
    from app.ui import display

    history = [
        StoredMessage(id=1, role="user", content="Tell a story", status="ok", stats=None),
        StoredMessage(id=2, role="assistant", content="Once upon", status="stopped", stats=None),
        StoredMessage(id=3, role="user", content="Again", status="ok", stats=None),
        StoredMessage(id=4, role="assistant", content="", status="stopped", stats=None),
    ]
    shown = display.bubbles(history)
    assert [b["role"] for b in shown] == ["user", "assistant", "user", "assistant"]
    assert not any("metadata" in b for b in shown)
    answer = shown[1]["content"]
    assert answer.startswith('<div class="q-md" data="Once upon">') and "stopped" not in answer.split("</div>")[0]
    assert answer.endswith('<div class="q-answer-note">stopped</div>')
    assert shown[3]["content"] == '<div class="q-answer-note">stopped</div>'  # stopped before a word
    found = [display.message_at(history, i) for i in range(4)]
    assert [m.id if m else None for m in found] == [1, 2, 3, 4]  # an edit finds its message


def test_an_answer_lost_with_a_card_is_said_in_the_status_line_only_until_the_engine_is_back() -> None:
    """Issue 22, item 10: "card 2 stopped answering" stayed in the status line once the engine was ready."""
    from app.chat.store import StoredMessage
    from app.ui import display

    lost = {"error": "card 2 (127.0.0.1:1) stopped answering during an answer", "kind": "card"}
    history = [
        StoredMessage(id=1, role="user", content="Tell a story", status="ok", stats=None),
        StoredMessage(id=2, role="assistant", content="Once", status="error", stats=lost),
    ]
    assert display.last_stats(history, engine_ready=False) == f"⚠ {lost['error']}"
    assert display.last_stats(history, engine_ready=True) == display.RECOVERED
    too_long = [history[0], StoredMessage(2, "assistant", "", "error", {"error": "too long", "kind": "context"})]
    assert display.last_stats(too_long, engine_ready=True) == "⚠ too long"  # not the engine's: it stays
    assert not display.lost_engine(too_long) and display.lost_engine(history)


def test_an_earlier_regenerated_answer_says_its_version_in_its_bubble() -> None:
    from app.chat.store import StoredMessage
    from app.ui import display

    history = [
        StoredMessage(id=1, role="user", content="colour?", status="ok", stats=None),
        StoredMessage(id=3, role="assistant", content="blue", status="ok", stats=None),
        StoredMessage(id=4, role="user", content="fruit?", status="ok", stats=None),
        StoredMessage(id=6, role="assistant", content="pear", status="ok", stats=None),
    ]
    shown = display.bubbles(history, versions={3: (2, 2), 6: (2, 3)})
    assert shown[1]["content"].endswith('<div class="q-answer-note">answer 2 of 2</div>')
    assert "answer 2 of 3" not in shown[3]["content"]  # the last answer has ‹ › under the chat instead


def test_an_answer_that_took_several_tokens_a_step_says_how_many() -> None:
    plain = {"generated_tokens": 30, "ttft_s": 0.3, "decode_tps": 12.0, "finish_reason": "stop", "steps": 30}
    assert stats_line(plain) == "30 tokens · first token 0.30 s · 12.0 tok/s"
    quoted = {**plain, "drafted_tokens": 24, "accepted_tokens": 18, "steps": 12}
    assert stats_line(quoted) == "30 tokens · first token 0.30 s · 12.0 tok/s · 2.5 tokens a step"
