"""The people's tables, as a `sqlite_utils.Migrations` set (app/database.py): appended to, never edited.

people     one row per person made on the admin page: name, password hash, role, when made and changed,
           disabled, a reset password to change, made of the settings' admin password; a stable `id` (003)
           that owns their rows as `person:<id>` (app/people.py `owner_of`)
api_keys   one row per API key made there: only its SHA-256 kept, its name, owner, use and revocation
"""

from __future__ import annotations

import secrets

import sqlite_utils

MIGRATIONS = sqlite_utils.Migrations("people")


@MIGRATIONS(name="001_people_and_keys")
def _m001(db: sqlite_utils.Database) -> None:
    db.table("people").create(
        {"name": str, "password_hash": str, "role": str, "created_at": str, "changed_at": str}, pk="name"
    )
    db.table("api_keys").create(
        {
            "id": str,
            "name": str,
            "owner": str,
            "digest": str,
            "shown": str,
            "created_at": str,
            "created_by": str,
            "last_used_at": str,
            "revoked_at": str,
        },
        pk="id",
        not_null={"digest"},
    )
    db.table("api_keys").create_index(["digest"], unique=True)


@MIGRATIONS(name="002_disabled_must_change_upgraded")
def _m002(db: sqlite_utils.Database) -> None:
    db.table("people").add_column("disabled_at", str)  # set: refused everywhere, nothing of theirs deleted
    db.table("people").add_column("must_change", int, not_null_default=0)  # a reset password: set a new one
    db.table("people").add_column("upgraded", int, not_null_default=0)  # `admin`, made of web.admin_password_hash


@MIGRATIONS(name="003_stable_ids")
def _m003(db: sqlite_utils.Database) -> None:
    """Each person gets an id; the rows they owned as `user:<name>` become `person:<id>`'s. (The tables as
    they were at this step: a released migration never follows later code.)"""
    db.table("people").add_column("id", str)
    owned = [
        (table, "owner")
        for table in ("conversations", "extraction_runs", "uploaders")
        if db.table(table).exists() and "owner" in db.table(table).columns_dict
    ]
    for (name,) in db.execute("SELECT name FROM people").fetchall():
        made = secrets.token_hex(8)
        db.execute("UPDATE people SET id = ? WHERE name = ?", [made, name])
        for table, column in owned:
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", [f"person:{made}", f"user:{name}"])
    db.table("people").create_index(["id"], unique=True)
