"""A card that died while writing its tensor cache never loads a truncated tensor afterwards: files changed
as it last stopped are dropped when it starts again (ggml-rpc would read them back unchecked), the rest
stay, and a running card keeps its mark current."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from launcher import tensor_cache
from launcher.cluster import CardProcesses
from tests.harness import PORT_OFFSET, card_settings


def cache_as_left(folder: Path, *, stopped_at: float) -> None:
    """A card's cache as a card that stopped at `stopped_at` left it: a tensor written long before, one
    being written then (its time is its last write's), and the mark of its last second."""
    folder.mkdir(parents=True)
    for name, written in [("00a1b2c3d4e5f607", stopped_at - 3600), ("1122334455667788", stopped_at - 0.5)]:
        (folder / name).write_bytes(b"\x01" * 4096)
        os.utime(folder / name, (written, written))
    (folder / tensor_cache.MARK).touch()
    os.utime(folder / tensor_cache.MARK, (stopped_at, stopped_at))


def test_files_changed_as_the_card_last_stopped_are_dropped_and_older_ones_kept(tmp_path: Path) -> None:
    folder = tmp_path / "card0"
    cache_as_left(folder, stopped_at=time.time() - 7200)
    late = folder / "99aa99aa99aa99aa"  # changed after the mark: mid-write when the card died
    late.write_bytes(b"\x02" * 100)
    os.utime(late, (time.time() - 7199, time.time() - 7199))
    assert tensor_cache.drop_suspects(folder) == ["1122334455667788", "99aa99aa99aa99aa"]
    assert sorted(p.name for p in folder.iterdir()) == [tensor_cache.MARK, "00a1b2c3d4e5f607"]
    assert tensor_cache.drop_suspects(folder) == []  # nothing else is suspect


def test_a_folder_without_a_mark_keeps_every_file(tmp_path: Path) -> None:
    (tmp_path / "00a1b2c3d4e5f607").write_bytes(b"\x01")
    assert tensor_cache.drop_suspects(tmp_path) == []
    assert (tmp_path / "00a1b2c3d4e5f607").exists()


@pytest.mark.slow
def test_a_card_agent_starting_drops_the_partial_tensor_and_keeps_its_mark_current(tmp_path: Path) -> None:
    cards = CardProcesses(card_settings(30286 + PORT_OFFSET, 1, tmp_path / "cache"))
    folder = tmp_path / "cache" / "card0"  # the agent's own folder under the cache
    stopped_at = time.time() - 600
    cache_as_left(folder, stopped_at=stopped_at)
    cards.start_all()
    try:
        assert not (folder / "1122334455667788").exists(), "the tensor being written as the card died stayed"
        assert (folder / "00a1b2c3d4e5f607").exists()
        first = (folder / tensor_cache.MARK).stat().st_mtime
        assert first > stopped_at + 500
        time.sleep(2.5)
        assert (folder / tensor_cache.MARK).stat().st_mtime > first  # a card that dies now leaves a recent mark
    finally:
        cards.stop_all()
