"""How many chunks hold each trigram, remembered between searches (FTS5 reads whole posting lists to
count). The knowledge store forgets it after every commit that changes chunks."""

from __future__ import annotations

import threading
from collections.abc import Sequence


class TrigramCounts:
    """Counts read from a snapshot older than the last `forget` are returned but not kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._generation = 0

    def lookup(self, grams: Sequence[str]) -> tuple[dict[str, int], list[str], int]:
        with self._lock:
            known = {g: self._counts[g] for g in grams if g in self._counts}
            return known, [g for g in grams if g not in known], self._generation

    def keep(self, found: dict[str, int], generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._counts.update(found)

    def forget(self) -> None:
        with self._lock:
            self._counts.clear()
            self._generation += 1
