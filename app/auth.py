"""Passwords for the optional login: stored as PBKDF2-SHA256 hashes, never in clear text.

python -m app.auth            # asks for a password (twice), prints the hash to put in the settings
echo "$PW" | python -m app.auth  # without a terminal: the password is the first line of stdin
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import math
import secrets
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

_ITERATIONS = 240_000


def hash_password(password: str, *, iterations: int = _ITERATIONS) -> str:
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), iterations).hex()
    return f"pbkdf2_sha256${iterations}${salt}${digest}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, iterations, salt, digest = stored.split("$")
        if scheme != "pbkdf2_sha256":
            return False
        again = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), int(iterations)).hex()
    except ValueError:
        return False
    return hmac.compare_digest(again, digest)


class LoginThrottle:
    """A growing delay per client after wrong passwords: after the n-th wrong one in a row (beyond the
    first `free` ones, a typo's allowance), that client's next try is not even checked for 2^(n-1)
    seconds (at most `longest_s`). A right password clears it. It remembers at most `clients` clients,
    forgetting the least recent."""

    def __init__(
        self,
        *,
        longest_s: float = 300.0,
        clients: int = 10_000,
        free: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.longest_s, self.clients, self.free, self._clock = longest_s, clients, free, clock
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()  # who → (wrong in a row, not before)
        self._lock = threading.Lock()

    def wait_s(self, who: str) -> int:
        """The whole seconds this client still waits, rounded up (0: it may try now): a refusal never says
        "try again in 0 s" while it still refuses."""
        with self._lock:
            _, not_before = self._failures.get(who, (0, 0.0))
        return max(0, math.ceil(not_before - self._clock()))

    def failed(self, who: str) -> float:
        """Note a wrong password; the seconds this client now waits."""
        with self._lock:
            count = self._failures.pop(who, (0, 0.0))[0] + 1
            delay = 0.0 if count <= self.free else min(self.longest_s, 2.0 ** (count - 1 - self.free))
            self._failures[who] = (count, self._clock() + delay)
            while len(self._failures) > self.clients:
                self._failures.popitem(last=False)
        return delay

    def succeeded(self, who: str) -> None:
        with self._lock:
            self._failures.pop(who, None)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m app.auth",
        description="Print the hash of a password, for web.users or web.admin_password_hash in the settings. "
        "In a terminal it asks for the password twice; otherwise the password is the first line of stdin.",
    )
    parser.parse_args(argv)
    try:
        if sys.stdin.isatty():
            first, again = getpass.getpass("password: "), getpass.getpass("again: ")
        else:
            first = again = sys.stdin.readline().rstrip("\r\n")
    except (EOFError, KeyboardInterrupt):
        first = again = ""
    if not first:
        print("no password given: run this in a terminal, or give the password on stdin", file=sys.stderr)
        return 1
    if len(first) < 8 or first != again:
        print("passwords differ or are shorter than 8 characters", file=sys.stderr)
        return 1
    print(hash_password(first))
    return 0


if __name__ == "__main__":
    sys.exit(main())
