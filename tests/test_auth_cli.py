"""Issue 22, item 16: `python -m app.auth --help` asked for a password instead of saying what it does, and
without a terminal it ended in an EOFError traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.auth import verify_password

ROOT = Path(__file__).resolve().parent.parent


def auth(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.auth", *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def test_help_says_what_it_does_and_asks_for_nothing() -> None:
    done = auth("--help")
    assert done.returncode == 0 and "usage: python -m app.auth" in done.stdout, done
    assert "hash" in done.stdout and "password:" not in done.stdout + done.stderr


def test_without_a_terminal_it_reads_the_password_from_stdin_or_says_none_was_given() -> None:
    done = auth(stdin="correct horse battery\n")
    assert done.returncode == 0, done.stderr
    assert verify_password("correct horse battery", done.stdout.strip())
    empty = auth()
    assert empty.returncode == 1 and "no password given" in empty.stderr, empty
    assert "Traceback" not in empty.stderr
    short = auth(stdin="short\n")
    assert short.returncode == 1 and "shorter than 8" in short.stderr and "Traceback" not in short.stderr
