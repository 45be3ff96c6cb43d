"""Which conversation a page shows while answers stream: an answer draws only where its conversation is
still shown, a message sent as another chat was picked draws nothing, and a switch answers only after the
old answer's frame on its way (else that frame lands after the switch and the old chat is back on screen)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from app.ui.screens import Screens


def counting(closed: list[bool]) -> Iterator[int]:
    try:
        yield from range(100)
    finally:
        closed.append(True)


@pytest.mark.slow
def test_an_answer_draws_while_its_chat_is_shown_and_ends_closing_its_source_once_another_is() -> None:
    screens, closed = Screens(), list[bool]()
    screens.show("page", "a")
    frames = screens.frames("page", "a", counting(closed))
    assert [next(frames), next(frames)] == [0, 1]
    screens.show("page", "b")  # returns at once: the frame given out was resumed above
    assert list(frames) == []  # frame 2 is not drawn on chat b
    assert closed == [True]  # the answer is told to stop (it is kept, as stopped)
    other = screens.frames("another page", "a", counting([]))
    assert next(other) == 0  # pages are apart


def test_a_message_sent_as_another_chat_was_picked_claims_nothing() -> None:
    screens = Screens()
    screens.show("page", None)  # a new chat
    assert screens.claim("page", None, "new")  # the message's conversation is now shown
    assert screens.shows("page") == "new"
    screens.show("page", "old one")  # picked while the message was on its way
    assert not screens.claim("page", "new", "newer")
    assert screens.shows("page") == "old one"
    assert screens.claim("unseen page", None, "x")  # a page not seen before shows what it sends


def test_a_switch_answers_only_once_the_old_answers_frame_is_on_its_way() -> None:
    screens = Screens(wait_s=10)
    screens.show("page", "a")
    frames = screens.frames("page", "a", counting([]))
    assert next(frames) == 0  # handed to Gradio: not yet queued for the page
    switched = threading.Event()

    def switch() -> None:
        screens.show("page", "b")
        switched.set()

    switcher = threading.Thread(target=switch)
    switcher.start()
    assert not switched.wait(0.5)  # the switch's frame would overtake the old answer's
    assert list(frames) == []  # Gradio resumes the step once its frame is queued: it ends there
    assert switched.wait(2)
    switcher.join()


def test_a_frame_never_resumed_holds_a_switch_up_only_for_a_moment() -> None:
    screens = Screens(wait_s=0.3)
    screens.show("page", "a")
    frames = screens.frames("page", "a", counting([]))
    next(frames)  # its step was cancelled: nobody resumes it
    began = time.monotonic()
    screens.show("page", "b")
    assert 0.25 <= time.monotonic() - began < 3
    assert screens.shows("page") == "b"


@pytest.mark.slow
def test_an_answer_left_for_another_chat_ends_with_a_frame_that_draws_nothing() -> None:
    """Gradio applies a step's last frame once more as the step ends: had that been the old answer's, the
    chat left (its transcript, "generating…") came back over the one picked (issue 22, item 3)."""
    screens = Screens()
    screens.show("page", "a")
    frames = screens.frames("page", "a", counting([]), gone=-1)
    assert next(frames) == 0
    screens.show("page", "b")
    assert list(frames) == [-1]
