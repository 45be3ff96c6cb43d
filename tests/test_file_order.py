"""The suite's file order (tests/file_order.py): longest files first, each file's tests together and in order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.file_order import load_table, longest_first, seconds_by_file


@dataclass(frozen=True)
class Node:
    nodeid: str


def ids(items: list[Node]) -> list[str]:
    return [item.nodeid for item in items]


def test_files_go_longest_first_and_keep_their_tests_together_in_order() -> None:
    collected = [
        Node("tests/test_a.py::one"),
        Node("tests/test_a.py::two[x]"),
        Node("tests/test_b.py::only"),
        Node("tests/test_a.py::three"),  # a file's tests stay together even if collected apart
        Node("tests/test_c.py::one"),
        Node("tests/test_c.py::two"),
    ]
    table = {"tests/test_a.py": 3.0, "tests/test_b.py": 40.0, "tests/test_c.py": 12.5}
    assert ids(longest_first(collected, table)) == [
        "tests/test_b.py::only",
        "tests/test_c.py::one",
        "tests/test_c.py::two",
        "tests/test_a.py::one",
        "tests/test_a.py::two[x]",
        "tests/test_a.py::three",
    ]


def test_a_file_the_table_does_not_know_counts_a_second_a_test_and_ties_keep_their_order() -> None:
    collected = [Node("tests/new.py::a"), Node("tests/new.py::b"), Node("tests/old.py::a"), Node("tests/tie.py::a")]
    table = {"tests/old.py": 1.5, "tests/tie.py": 2.0}
    # new.py: two tests, 2.0 s, collected before tie.py (2.0 s): it stays first of the two
    assert ids(longest_first(collected, table)) == [
        "tests/new.py::a",
        "tests/new.py::b",
        "tests/tie.py::a",
        "tests/old.py::a",
    ]


def test_the_table_is_each_files_seconds_from_a_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(
        """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
        <testcase classname="tests.test_ledger" name="test_a" time="1.25"/>
        <testcase classname="tests.test_ledger" name="test_b" time="2.5"/>
        <testcase classname="tests.test_file_order" name="test_c" time="4.0"/>
        <testcase classname="tests.no_such_file" name="test_d" time="9.0"/>
        </testsuite></testsuites>""",
        encoding="utf-8",
    )
    assert seconds_by_file(report) == {"tests/test_file_order.py": 4.0, "tests/test_ledger.py": 3.8}


def test_the_committed_table_names_files_that_exist() -> None:
    table = load_table()
    assert table, "tests/file_seconds.json is missing or empty: python -m tests.file_order REPORT.xml"
    root = Path(__file__).resolve().parent.parent
    gone = [name for name in table if not (root / name).is_file()]
    assert not gone, f"tests/file_seconds.json names files that are gone (regenerate it): {gone}"
