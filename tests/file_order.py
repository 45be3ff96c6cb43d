"""The suite's files, longest first (issue 27).

`make test` hands whole files to two pytest-xdist workers (`--dist loadfile`), each file to the first worker
that runs short of work, in the order of the collection. xdist's own default reorders files by how many tests
they hold, most first, which put the files of one or two long tests (an agent's 8,600-token prompt, a restart
after a kill -9, `make run` itself) at the end of the run, where one worker ran them while the other had
nothing left. Handing out the longest files first (`--no-loadscope-reorder` and this order) leaves short ones
for the end, where they even the two workers out.

The seconds come from a whole run's JUnit report (setup, call and teardown of each test, summed per file):
`python -m tests.file_order REPORT.xml` rewrites tests/file_seconds.json. A file not in the table (a new one)
counts as a second a test. Only the order depends on the table; a stale one costs time, never a result.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tests" / "file_seconds.json"
UNKNOWN_PER_TEST_S = 1.0


class Item(Protocol):
    @property
    def nodeid(self) -> str: ...


Collected = TypeVar("Collected", bound=Item)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load_table(path: Path = TABLE) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError):
        return {}


def longest_first(items: Sequence[Collected], seconds: dict[str, float]) -> list[Collected]:
    """`items` with each file's tests together and in their own order, the files longest first; files of equal
    weight keep the order they were collected in."""
    first_seen: dict[str, int] = {}
    counts: dict[str, int] = defaultdict(int)
    for index, item in enumerate(items):
        first_seen.setdefault(file_of(item.nodeid), index)
        counts[file_of(item.nodeid)] += 1

    def weight(name: str) -> float:
        return seconds.get(name, counts[name] * UNKNOWN_PER_TEST_S)

    return sorted(items, key=lambda item: (-weight(file_of(item.nodeid)), first_seen[file_of(item.nodeid)]))


def seconds_by_file(report: Path) -> dict[str, float]:
    """Each file's seconds in a JUnit report (pytest's `--junitxml`: a test's time is setup + call + teardown)."""
    totals: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(report).iter("testcase"):
        parts = case.get("classname", "").split(".")  # tests.test_x, or tests.test_x.TestClass
        files = [f"{'/'.join(parts[:n])}.py" for n in range(len(parts), 1, -1)]
        name = next((f for f in files if (ROOT / f).is_file()), None)
        if name is not None:
            totals[name] += float(case.get("time", 0))
    return {name: round(total, 1) for name, total in sorted(totals.items(), key=lambda kv: -kv[1])}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.file_order REPORT.xml  (rewrites tests/file_seconds.json)")
        return 2
    table = seconds_by_file(Path(argv[0]))
    TABLE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{len(table)} files, {sum(table.values()):.0f} s in all, written to {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
