"""Speculative decoding's model-free part (app/engine/llama/drafts.py): where drafts come from, how long
they are, and how a verified draft is walked. Plain token lists; the engine's side is test_speculation.py."""

from __future__ import annotations

from app.engine.llama.drafts import DraftConfig, Ngrams, Pace, accepted


def test_a_draft_copies_what_followed_the_last_tokens_before() -> None:
    context = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3]
    assert Ngrams(context, n=3).draft(4) == [4, 5, 6, 7]


def test_the_latest_earlier_occurrence_is_the_one_copied() -> None:
    context = [1, 2, 3, 10, 11, 1, 2, 3, 20, 21, 1, 2, 3]
    assert Ngrams(context, n=3).draft(2) == [20, 21]


def test_no_draft_without_an_earlier_match_of_the_whole_ngram() -> None:
    assert Ngrams([1, 2, 3, 4, 5, 9, 2, 3], n=3).draft(4) == []  # only "2 3" matched, not "9 2 3"
    assert Ngrams([1, 2], n=3).draft(4) == []
    assert Ngrams([1, 2, 3, 4, 1, 2, 3], n=3).draft(0) == []


def test_a_draft_stops_at_the_end_of_the_context() -> None:
    assert Ngrams([5, 6, 7, 8, 5, 6, 7], n=3).draft(10) == [8, 5, 6, 7]


def test_tokens_taken_later_extend_the_index() -> None:
    ngrams = Ngrams([1, 2, 3, 4], n=2)
    assert ngrams.draft(3) == []
    ngrams.extend([9, 1, 2])
    assert ngrams.draft(3) == [3, 4, 9]
    ngrams.extend([7])
    assert ngrams.draft(3) == []  # "2 7" never stood before


def test_the_pace_grows_after_whole_drafts_and_shrinks_after_rejections() -> None:
    pace = Pace(DraftConfig(ngram=3, max_tokens=16, min_tokens=2))
    assert pace.next() == 16
    pace.after(16, 3)
    assert pace.next() == 4  # what was kept, and one more
    pace.after(4, 4)
    assert pace.next() == 8
    pace.after(8, 0)
    assert pace.next() == 2  # never under the minimum
    pace.after(0, 0)  # no draft: nothing learned
    assert pace.next() == 2
    for _ in range(5):
        pace.after(pace.next(), pace.next())
    assert pace.next() == 16  # never over the maximum


def test_speculation_off_drafts_nothing() -> None:
    assert not DraftConfig(max_tokens=0).on
    assert Pace(DraftConfig(max_tokens=0)).next() == 0


def walk(draft: list[int], picks: list[int | None]) -> tuple[list[int], int, list[int]]:
    """`accepted` over a scripted sampler: the tokens taken, drafted tokens kept, and the positions sampled."""
    asked: list[int] = []

    def sample(i: int) -> int | None:
        asked.append(i)
        return picks[i]

    taken, kept = accepted(draft, sample)
    return taken, kept, asked


def test_a_whole_draft_is_kept_with_the_token_after_it() -> None:
    assert walk([5, 6, 7], [5, 6, 7, 8]) == ([5, 6, 7, 8], 3, [0, 1, 2, 3])


def test_the_first_token_the_sampler_does_not_pick_ends_the_walk() -> None:
    assert walk([5, 6, 7], [5, 9, 7, 8]) == ([5, 9], 1, [0, 1])
    assert walk([5, 6, 7], [4, 6, 7, 8]) == ([4], 0, [0])


def test_no_draft_samples_once() -> None:
    assert walk([], [3]) == ([3], 0, [0])


def test_an_answer_that_ends_mid_draft_keeps_only_what_it_took_before() -> None:
    assert walk([5, 6, 7], [5, None, 7, 8]) == ([5], 1, [0, 1])
    assert walk([5, 6, 7], [None, 6, 7, 8]) == ([], 0, [0])
