"""The logs the admin page shows: the app's rotating log and each local card agent's, their recent ends."""

from __future__ import annotations

import logging
from pathlib import Path

from app import logs


def test_the_app_log_and_card_logs_are_found_by_name_and_cut_at_a_whole_line(tmp_path: Path) -> None:
    folder = logs.log_dir(tmp_path)
    folder.mkdir()
    for index in (1, 0, 10):
        (folder / f"card{index}.log").write_text(f"card {index} listening\n")
    (folder / "card-old.txt").write_text("not a card log")
    root = logging.getLogger()
    before = list(root.handlers)
    logs.write_app_log(tmp_path)
    try:
        logging.getLogger("quartet.test").warning("first line %s", "x" * 100)
        logging.getLogger("quartet.test").warning("the last line")
    finally:
        for handler in set(root.handlers) - set(before):
            handler.close()
            root.removeHandler(handler)
    found = logs.recent(tmp_path, limit=90)
    assert list(found) == ["app", "card 0", "card 1", "card 10"]
    assert found["card 10"] == "card 10 listening\n"
    assert found["app"].endswith("quartet.test: the last line\n") and "first line" not in found["app"]
    assert "first line" in logs.recent(tmp_path)["app"]
