"""The logs an admin reads on the page: the app's own (`data_dir/logs/app.log`, rotated) and each local
card agent's (`data_dir/logs/card<N>.log`, written by `python -m launcher`), their recent ends."""

from __future__ import annotations

import logging
import logging.handlers
import re
from pathlib import Path

APP_LOG = "app.log"
TAIL_BYTES = 64 * 1024
_CARD = re.compile(r"card(\d+)\.log")


def log_dir(data_dir: Path) -> Path:
    return data_dir / "logs"


def write_app_log(data_dir: Path) -> None:
    """Send the app's log records to `logs/app.log` as well, 5 files of 5 MiB at most."""
    folder = log_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(folder / APP_LOG, maxBytes=5 << 20, backupCount=4, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)


def files(data_dir: Path) -> dict[str, Path]:
    """Each log by the name the page gives it: `app`, then `card 0`, `card 1`, … (those that exist)."""
    folder = log_dir(data_dir)
    found = {"app": folder / APP_LOG} if (folder / APP_LOG).is_file() else {}
    cards = sorted((int(m.group(1)), p) for p in folder.glob("card*.log") if (m := _CARD.fullmatch(p.name)))
    return found | {f"card {index}": path for index, path in cards}


def tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of a log, from the first whole line."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - limit - 1))  # one byte before: a window that starts a line keeps it
        data = f.read()
    if size > limit:
        data = data.split(b"\n", 1)[-1]
    return data.decode("utf-8", errors="replace")


def recent(data_dir: Path, limit: int = TAIL_BYTES) -> dict[str, str]:
    return {name: tail(path, limit) for name, path in files(data_dir).items()}
