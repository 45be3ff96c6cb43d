"""The named endpoints of people and API keys (gradio_client). Every one needs the token `admin_login`
returns; the people service checks it and logs each change with who made it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import gradio as gr

from app.people_admin import PeopleAdmin
from app.ui.callers import held
from app.ui.errors import explained


def register(people: PeopleAdmin) -> None:
    @explained
    @held(people.check_holder)
    def list_people(admin_token: str, request: gr.Request = None) -> list[dict[str, Any]]:  # type: ignore[assignment]
        """Admin only: every login (made on the admin page or in the settings file) with its role."""
        return people.people(admin_token)

    @explained
    @held(people.check_holder)
    def add_person(name: str, password: str, role: str, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: a new page login, role `admin` or `user` (the password hashed as `python -m app.auth` does)."""
        return people.add_person(admin_token, name, password, role, where=_where(request))

    @explained
    @held(people.check_holder)
    def reset_password(name: str, password: str, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: a new password for a person made on the admin page; their sessions end."""
        return people.reset_password(admin_token, name, password, where=_where(request))

    @explained
    @held(people.check_holder)
    def set_role(name: str, role: str, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: make a person an admin or a user (the last admin stays one)."""
        return people.set_role(admin_token, name, role, where=_where(request))

    @explained
    @held(people.check_holder)
    def remove_person(name: str, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: remove a person (not the last admin); their sessions end and their keys are revoked."""
        return people.remove_person(admin_token, name, where=_where(request))

    @explained
    @held(people.check_holder)
    def rename_person(name: str, new_name: str, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: rename a person; their conversations, uploads, runs and keys stay theirs."""
        return people.rename(admin_token, name, new_name, where=_where(request))

    @explained
    @held(people.check_holder)
    def disable_person(name: str, disabled: bool, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: disable (True) or enable (False) a person: disabled, their sessions and keys are refused."""
        return people.set_disabled(admin_token, name, bool(disabled), where=_where(request))

    @explained
    @held(people.check_holder)
    def end_sessions(name: str, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: end every page and admin session of a person (they log in again)."""
        return people.end_sessions(admin_token, name, where=_where(request))

    @explained
    @held(people.check_holder)
    def api_keys(admin_token: str, request: gr.Request = None) -> list[dict[str, Any]]:  # type: ignore[assignment]
        """Admin only: the API keys made on the admin page, revoked ones too (never their secrets)."""
        return [asdict(key) for key in people.keys(admin_token)]

    @explained
    @held(people.check_holder)
    def create_api_key(name: str, owner: str, admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: a new /v1 key for `owner` (a person; empty: the admin); its secret is in `key`, once."""
        made = people.create_key(admin_token, name, owner, where=_where(request))
        return {"key": made.secret, **asdict(made.key)}

    @explained
    @held(people.check_holder)
    def revoke_api_key(key_id: str, admin_token: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Admin only: revoke a key by its id; the next request with it gets a 401."""
        return people.revoke_key(admin_token, key_id, where=_where(request))

    for handler, name in (
        (list_people, "people"),
        (add_person, "add_person"),
        (reset_password, "reset_password"),
        (set_role, "set_role"),
        (remove_person, "remove_person"),
        (rename_person, "rename_person"),
        (disable_person, "disable_person"),
        (end_sessions, "end_sessions"),
        (api_keys, "api_keys"),
        (create_api_key, "create_api_key"),
        (revoke_api_key, "revoke_api_key"),
    ):
        gr.api(handler, api_name=name, queue=False)


def _where(request: gr.Request | None) -> str:
    return f"api:{request.session_hash if request else 'anon'}"
