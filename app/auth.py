"""Passwords for the optional login: stored as PBKDF2-SHA256 hashes, never in clear text.

    python -m app.auth            # asks for a password, prints the hash to put in the settings
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import secrets
import sys
from collections.abc import Callable, Mapping

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


def login_check(users: Mapping[str, str]) -> Callable[[str, str], bool] | None:
    """Gradio's auth callable for `users` (name → hash), or None when no login is configured."""
    if not users:
        return None
    return lambda name, password: name in users and verify_password(password, users[name])


def main() -> int:
    first = getpass.getpass("password: ")
    if len(first) < 8 or first != getpass.getpass("again: "):
        print("passwords differ or are shorter than 8 characters", file=sys.stderr)
        return 1
    print(hash_password(first))
    return 0


if __name__ == "__main__":
    sys.exit(main())
