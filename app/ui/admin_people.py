"""The admin page's people and API keys: add a person (name, password, role), reset a password, change a
role, remove someone; create a key (its secret shown once, here only), list and revoke keys. Every
handler goes through the people service, which checks the admin session on the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.people import ROLES, ApiKey
from app.people_admin import PeopleAdmin
from app.ui.callers import acted_from
from app.ui.errors import explained
from app.ui.key_widgets import shown_once_and_revoke

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
_PEOPLE = ["name", "role", "from", "changed"]
_KEYS = {
    "id": "Id",
    "name": "Name",
    "owner": "Owner",
    "shown": "Key",
    "created_at": "Created",
    "created_by": "By",
    "last_used_at": "Last used",
    "revoked_at": "Revoked",
}


def add(people: PeopleAdmin, token: gr.State) -> tuple[list[Any], list[Any]]:
    """The accordion, inside the admin page's Blocks: the components the login fills (with `filled`), and
    the actions' events (the page refreshes its admin log after each)."""
    quiet: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    with gr.Accordion("People and API keys", open=False):
        gr.Markdown(
            "People log in to the pages with their name and password; an admin also opens this page with "
            "them. A person removed, disabled, made a user or given a new password is logged out at once; "
            "a reset password is used once, to set a new one (at /password), and revokes every API key of "
            "theirs (a reset usually follows a compromise: they make new ones). A person removed has their API "
            "keys revoked, and their conversations and extraction runs become no one's: kept, seen by no one "
            "(the admin neither), not by a new person given the same name; the documents they uploaded stay, "
            "for an admin alone to delete. The people of the settings "
            "file are listed and changed there. Page logins start when the app starts with at least one "
            "person: the first person added to a box started without any logs in after a restart."
        )
        listed = gr.Dataframe(headers=_PEOPLE, interactive=False, label="People", elem_id="people")
        with gr.Row():
            name = gr.Textbox(label="Name", elem_id="person-name")
            password = gr.Textbox(label="Password (at least 8 characters)", type="password", elem_id="person-password")
            role = gr.Dropdown(list(ROLES), value="user", label="Role", elem_id="person-role")
        with gr.Row():
            add_button = gr.Button("Add person", elem_id="add-person")
            reset = gr.Button("Reset password", elem_id="reset-password")
            set_role = gr.Button("Set role", elem_id="set-role")
            sure = gr.Checkbox(label="Yes, remove this person", elem_id="remove-sure")
            remove = gr.Button("Remove person", variant="stop", elem_id="remove-person")
        with gr.Row():
            new_name = gr.Textbox(label="New name (to rename)", elem_id="person-new-name")
            rename = gr.Button("Rename", elem_id="rename-person")
            disable = gr.Button("Disable", elem_id="disable-person")
            enable = gr.Button("Enable", elem_id="enable-person")
            end = gr.Button("End sessions", elem_id="end-sessions")
        said = gr.Markdown(elem_id="people-result")
        keys = gr.Dataframe(headers=list(_KEYS.values()), interactive=False, label="API keys", elem_id="api-keys")
        with gr.Row():
            key_name = gr.Textbox(label="Key name (what uses it)", elem_id="key-name")
            owner = gr.Dropdown(choices=[], label="Owner (empty: you)", allow_custom_value=False, elem_id="key-owner")
            create = gr.Button("Create key", elem_id="create-key")
        secret, which, revoke = shown_once_and_revoke("new-key", "revoke-choice", "revoke-key")

    def where(request: gr.Request) -> str:
        return acted_from(request)

    def tables(key: str | None) -> tuple[Any, ...]:
        return filled(people, key)

    @explained
    def on_add(key: str | None, who: str, secret_text: str, chosen: str, request: gr.Request) -> tuple[Any, ...]:
        return people.add_person(key, who, secret_text, chosen, where=where(request)), "", *tables(key)

    @explained
    def on_reset(key: str | None, who: str, secret_text: str, request: gr.Request) -> tuple[Any, ...]:
        return people.reset_password(key, who, secret_text, where=where(request)), "", *tables(key)

    @explained
    def on_role(key: str | None, who: str, chosen: str, request: gr.Request) -> tuple[Any, ...]:
        return people.set_role(key, who, chosen, where=where(request)), gr.skip(), *tables(key)

    @explained
    def on_remove(key: str | None, who: str, confirmed: bool, request: gr.Request) -> tuple[Any, ...]:
        if not confirmed:
            return "Tick “Yes, remove this person” first.", gr.skip(), *tables(key)
        return people.remove_person(key, who, where=where(request)), gr.skip(), *tables(key)

    @explained
    def on_rename(key: str | None, who: str, new: str, request: gr.Request) -> tuple[Any, ...]:
        return people.rename(key, who, new, where=where(request)), gr.skip(), *tables(key)

    def switch(disabled: bool) -> Any:
        @explained
        def on_switch(key: str | None, who: str, request: gr.Request) -> tuple[Any, ...]:
            return people.set_disabled(key, who, disabled, where=where(request)), gr.skip(), *tables(key)

        return on_switch

    @explained
    def on_end(key: str | None, who: str, request: gr.Request) -> tuple[Any, ...]:
        return people.end_sessions(key, who, where=where(request)), gr.skip(), *tables(key)

    @explained
    def on_create(key: str | None, label: str, whose: str | None, request: gr.Request) -> tuple[Any, ...]:
        made = people.create_key(key, label, whose or "", where=where(request))
        return made.secret, f"✅ Key {made.key.name} made: copy it now.", *tables(key)

    @explained
    def on_revoke(key: str | None, key_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        return "", people.revoke_key(key, key_id or "", where=where(request)), *tables(key)

    shown = [listed, keys, owner, which]
    events = [
        add_button.click(on_add, [token, name, password, role], [said, password, *shown], **quiet),
        reset.click(on_reset, [token, name, password], [said, password, *shown], **quiet),
        set_role.click(on_role, [token, name, role], [said, password, *shown], **quiet),
        remove.click(on_remove, [token, name, sure], [said, password, *shown], **quiet),
        rename.click(on_rename, [token, name, new_name], [said, password, *shown], **quiet),
        disable.click(switch(True), [token, name], [said, password, *shown], **quiet),
        enable.click(switch(False), [token, name], [said, password, *shown], **quiet),
        end.click(on_end, [token, name], [said, password, *shown], **quiet),
        create.click(on_create, [token, key_name, owner], [secret, said, *shown], **quiet),
        revoke.click(on_revoke, [token, which], [secret, said, *shown], **quiet),
    ]
    return shown, events


def filled(people: PeopleAdmin, key: str | None) -> tuple[Any, ...]:
    """The people and keys tables and the two choices, for the admin of session `key`."""
    rows, made = people.people(key), people.keys(key)
    names = [r["name"] for r in rows if r["from"] == "this page"]
    live = [(f"{k.name} ({k.shown})", k.id) for k in made if not k.revoked_at]
    return (
        pd.DataFrame(rows, columns=_PEOPLE),
        _key_table(made),
        gr.update(choices=[("", ""), *((n, n) for n in names)], value=""),
        gr.update(choices=live, value=None),
    )


def ticket_script() -> str:
    """The page script that keeps the session's upload ticket as a cookie (assets/admin_ticket.js)."""
    return (ASSETS / "admin_ticket.js").read_text(encoding="utf-8")


def _key_table(keys: list[ApiKey]) -> pd.DataFrame:
    rows = [{label: getattr(k, field) or "" for field, label in _KEYS.items()} for k in keys]
    return pd.DataFrame(rows, columns=list(_KEYS.values()))
