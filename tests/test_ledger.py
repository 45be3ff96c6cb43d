"""The suite's token ledger (tests/ledger.py): what it counts, and what it leaves out."""

from __future__ import annotations

from tests.ledger import Ledger


def test_a_test_is_charged_what_the_counters_grew_while_it_ran() -> None:
    ledger = Ledger()
    zero = {"tokens": 0, "prompt": 0, "cached": 0, "answers": 0}
    ledger.note("a", zero, {"tokens": 64, "prompt": 900, "cached": 100, "answers": 1})
    ledger.note("b", {"tokens": 64, "prompt": 900, "cached": 100, "answers": 1},
                {"tokens": 80, "prompt": 1000, "cached": 190, "answers": 3})  # fmt: skip
    report = ledger.report()
    assert report[0] == "the shared appliance: 3 answers by 2 tests, 80 tokens generated, 810 prompt tokens computed"
    assert report[1].split() == ["64", "generated", "800", "computed", "1", "answers", "a"]  # the most tokens first
    assert report[2].split() == ["16", "generated", "10", "computed", "2", "answers", "b"]


def test_a_restart_nothing_asked_or_an_unreachable_app_is_not_charged() -> None:
    ledger = Ledger()
    ledger.note("restarted", {"tokens": 500, "answers": 9}, {"tokens": 20, "answers": 1})  # counters start again
    ledger.note("idle", {"tokens": 20, "answers": 1}, {"tokens": 20, "answers": 1})
    ledger.note("unreachable", {}, {"tokens": 30, "answers": 2})
    assert ledger.report() == []
