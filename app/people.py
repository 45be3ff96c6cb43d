"""People (page logins with a role) and API keys made on the admin page, in the app's SQLite file.

Each person has a stable id, made when they are added and never reused: what is theirs (conversations,
extraction runs, uploads) is owned by `person:<id>` (`owner_of`), so a rename keeps it theirs and a new
person given a removed person's name starts with nothing. A person's password is stored as
`app.auth.hash_password` makes it (PBKDF2-SHA256), as `web.users` holds them. An API key is 32 random
bytes shown once when it is made; only its SHA-256 is kept (a key is not a password a person chose: a
slow hash adds nothing to 256 random bits), with its name, owner, creation and last use. The live keys
are held in memory as well (refreshed after every commit that changes them), so the /v1 gate checks a
key without a query and a revoked key is refused by the next request. The tables: app/people_migrations.py.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.database import Database, now
from app.people_migrations import MIGRATIONS

__all__ = ["MIGRATIONS", "ROLES", "ApiKey", "PeopleStore", "Person", "Role", "digest_of", "made_here", "owner_of"]

Role = Literal["admin", "user"]
ROLES: tuple[Role, ...] = ("admin", "user")
KEY_PREFIX = "qk-"
REMOVED = "(removed) "  # what a removed person's keys are owned by, before their name
_USE_EVERY_S = 30.0  # a key's last use is written at most this often (the gate must not write per request)


def new_id() -> str:
    return secrets.token_hex(8)


def owner_of(person_id: str) -> str:
    """What a person's rows are owned by: their id, never their name (a name can change or be reused)."""
    return f"person:{person_id}"


@dataclass(frozen=True)
class Person:
    name: str
    role: Role
    created_at: str
    changed_at: str
    disabled: bool = False
    must_change: bool = False
    upgraded: bool = False  # made at a start from the settings' admin password (not a page login of its own)
    id: str = ""  # stable: what owns their rows (`owner_of`)


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    owner: str  # the person whose key it is ("" for the configured admin)
    shown: str  # the key's first characters, to tell keys apart (never enough to use)
    created_at: str
    created_by: str
    last_used_at: str | None
    revoked_at: str | None


def made_here(path: Path) -> tuple[bool, bool]:
    """(any person, any API key) made on the admin page, read from the database file as it is (read-only,
    nothing migrated): what the start's LAN check counts before the app opens the file."""
    if not path.is_file():
        return False, False
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = {row[1] for row in conn.execute("PRAGMA table_info(people)")}
        mine = " WHERE upgraded = 0" if "upgraded" in columns else ""  # not the `admin` of the admin password
        return tuple(  # type: ignore[return-value]
            name in tables and conn.execute(f"SELECT 1 FROM {name}{where} LIMIT 1").fetchone() is not None
            for name, where in (("people", mine), ("api_keys", ""))
        )
    finally:
        conn.close()


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class PeopleStore:
    def __init__(self, database: Database) -> None:
        self._database = database
        database.migrate(MIGRATIONS)
        self._lock = threading.Lock()
        self._live: dict[str, tuple[str, str]] = {}  # digest → (key id, owner), revoked keys left out
        self._ever = False  # whether any key was made here (revoked ones too)
        self._used: dict[str, float] = {}  # key id → when its use was last written (monotonic)
        self._reload_keys()

    # -- people -----------------------------------------------------------------------------

    def people(self) -> list[Person]:
        with self._database.read() as db:
            rows = list(db.table("people").rows_where(order_by="name"))
        return [_person(r) for r in rows]

    def person(self, name: str) -> Person | None:
        with self._database.read() as db:
            rows = list(db.table("people").rows_where("name = ?", [name]))
        return _person(rows[0]) if rows else None

    def active_role(self, name: str) -> Role | None:
        """The role of a person who may act now (None: no such person, or disabled)."""
        found = self.person(name)
        return found.role if found is not None and not found.disabled else None

    def password_hash(self, name: str) -> str | None:
        with self._database.read() as db:
            rows = list(db.table("people").rows_where("name = ?", [name], select="password_hash"))
        return rows[0]["password_hash"] if rows else None

    def role(self, name: str) -> Role | None:
        with self._database.read() as db:
            rows = list(db.table("people").rows_where("name = ?", [name], select="role"))
        return rows[0]["role"] if rows else None

    def add(self, name: str, password_hash: str, role: Role, *, upgraded: bool = False) -> bool:
        """False when the name is taken."""
        at = now()
        row = {"name": name, "password_hash": password_hash, "role": role, "created_at": at, "changed_at": at}
        with self._database.atomic() as db:
            if db.table("people").count_where("name = ?", [name]):
                return False
            row["id"] = new_id()
            db.table("people").insert(row | {"upgraded": int(upgraded)})
        return True

    def change(
        self,
        name: str,
        *,
        password_hash: str | None = None,
        role: Role | None = None,
        disabled: bool | None = None,
        must_change: bool | None = None,
    ) -> bool:
        """False when there is no such person. Disabling takes their keys out of the live ones at the commit."""
        values: dict[str, str | int | None] = {"changed_at": now()}
        if password_hash is not None:
            values["password_hash"] = password_hash
        if role is not None:
            values["role"] = role
        if disabled is not None:
            values["disabled_at"] = now() if disabled else None
        if must_change is not None:
            values["must_change"] = int(must_change)
        with self._database.atomic() as db:
            if not db.table("people").count_where("name = ?", [name]):
                return False
            db.table("people").update(name, values)
            if disabled is not None:
                self._database.after_commit(self._reload_keys)
        return True

    def reset(self, name: str, password_hash: str) -> int | None:
        """A reset password, to be changed at their next login, and every live key of theirs revoked, in one
        transaction (a reset usually follows a compromise): how many keys were revoked; None: no such person."""
        at = now()
        with self._database.atomic() as db:
            if not db.table("people").count_where("name = ?", [name]):
                return None
            db.table("people").update(name, {"password_hash": password_hash, "must_change": 1, "changed_at": at})
            revoked = db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE owner = ? AND revoked_at IS NULL", [at, name]
            ).rowcount
            self._database.after_commit(self._reload_keys)
        return revoked

    def rename(self, old: str, new: str) -> bool:
        """Rename in one transaction, their keys with them (their other rows are owned by their id, which
        stays). False when `old` is not a person or `new` is taken."""
        with self._database.atomic() as db:
            if not db.table("people").count_where("name = ?", [old]) or db.table("people").count_where(
                "name = ?", [new]
            ):
                return False
            db.execute("UPDATE people SET name = ?, changed_at = ? WHERE name = ?", [new, now(), old])
            db.execute("UPDATE api_keys SET owner = ? WHERE owner = ?", [new, old])
            db.execute("UPDATE api_keys SET created_by = ? WHERE created_by = ?", [new, old])
            self._database.after_commit(self._reload_keys)
        return True

    def remove(self, name: str) -> bool:
        """False when there is no such person. Their keys are revoked with them and named `(removed) <name>`
        (a name of no one: a person's name never starts with "("); their other rows stay owned by their id,
        which no one has again: they are no one's."""
        with self._database.atomic() as db:
            if not db.table("people").count_where("name = ?", [name]):
                return False
            db.table("people").delete(name)
            db.execute("UPDATE api_keys SET revoked_at = ? WHERE owner = ? AND revoked_at IS NULL", [now(), name])
            db.execute("UPDATE api_keys SET owner = ? WHERE owner = ?", [f"{REMOVED}{name}", name])
            self._database.after_commit(self._reload_keys)
        return True

    def admins(self) -> int:
        with self._database.read() as db:
            return db.table("people").count_where("role = 'admin' AND disabled_at IS NULL")

    # -- API keys ---------------------------------------------------------------------------

    def create_key(self, name: str, *, owner: str, created_by: str) -> tuple[str, ApiKey]:
        """A new key: its secret (shown once, never stored) and its record."""
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        row = {
            "id": secrets.token_hex(6),
            "name": name,
            "owner": owner,
            "digest": digest_of(secret),
            "shown": secret[:8] + "…",
            "created_at": now(),
            "created_by": created_by,
            "last_used_at": None,
            "revoked_at": None,
        }
        with self._database.atomic() as db:
            db.table("api_keys").insert(row)
            self._database.after_commit(self._reload_keys)
        return secret, _key(row)

    def keys(self) -> list[ApiKey]:
        with self._database.read() as db:
            return [_key(r) for r in db.table("api_keys").rows_where(order_by="created_at desc")]

    def revoke(self, key_id: str) -> ApiKey | None:
        """The key as it was, now revoked (None: no such live key)."""
        with self._database.atomic() as db:
            rows = list(db.table("api_keys").rows_where("id = ? AND revoked_at IS NULL", [key_id]))
            if not rows:
                return None
            db.table("api_keys").update(key_id, {"revoked_at": now()})
            self._database.after_commit(self._reload_keys)
        return _key(rows[0])

    def any_keys(self) -> bool:
        """Whether a key was ever made here, revoked ones included: revoking the last key must not open /v1."""
        with self._lock:
            return self._ever

    def key_owner(self, secret: str) -> tuple[str, str] | None:
        """(key id, owner) of a live key, its use noted; None for anything else. No query unless the key's
        last use is due to be written."""
        digest = digest_of(secret)
        with self._lock:
            found = self._live.get(digest)  # a lookup by SHA-256: its timing tells nothing of any key
            due = found is not None and time.monotonic() - self._used.get(found[0], -_USE_EVERY_S) >= _USE_EVERY_S
            if found is not None and due:
                self._used[found[0]] = time.monotonic()
        if found is not None and due:
            with self._database.atomic() as db:
                db.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", [now(), found[0]])
        return found

    def _reload_keys(self) -> None:
        with self._database.read() as db:
            rows = list(db.execute(_LIVE).fetchall())
            ever = db.table("api_keys").count > 0
        with self._lock:
            self._live = {digest: (key_id, owner) for digest, key_id, owner in rows}
            self._ever = ever


# The live keys: not revoked, and not of a disabled person (a key of the configured admin has no person).
_LIVE = (
    "SELECT k.digest, k.id, k.owner FROM api_keys k LEFT JOIN people p ON p.name = k.owner"
    " WHERE k.revoked_at IS NULL AND p.disabled_at IS NULL"
)


def _person(r: dict[str, object]) -> Person:
    return Person(
        str(r["name"]),
        r["role"],  # type: ignore[arg-type]
        str(r["created_at"]),
        str(r["changed_at"]),
        disabled=bool(r.get("disabled_at")),
        must_change=bool(r.get("must_change")),
        upgraded=bool(r.get("upgraded")),
        id=str(r.get("id") or ""),
    )


def _key(row: dict[str, str | None]) -> ApiKey:
    return ApiKey(
        id=str(row["id"]),
        name=str(row["name"]),
        owner=str(row["owner"] or ""),
        shown=str(row["shown"]),
        created_at=str(row["created_at"]),
        created_by=str(row["created_by"] or ""),
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )
