"""A person's own API keys, on the chat page ("My API keys") and as named endpoints: made, listed and
revoked by the logged-in person (a page login, no admin session); what a program does with one is theirs."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import gradio as gr
import pandas as pd

from app.people_admin import PeopleAdmin
from app.ui.callers import acted_from
from app.ui.errors import explained
from app.ui.key_widgets import shown_once_and_revoke

_COLUMNS = {"id": "Id", "name": "Name", "shown": "Key", "created_at": "Created", "last_used_at": "Last used"}


def _login(request: gr.Request | None) -> str | None:
    return getattr(request, "username", None) if request is not None else None


def _where(request: gr.Request | None) -> str:
    return acted_from(request)


def _api_where(request: gr.Request | None) -> str:
    return f"api:{request.session_hash if request else 'anon'}"


def build(people: PeopleAdmin, tab: gr.Tab) -> None:
    """The tab's content (a tab of its own, only where people log in: under the chat it made the page
    taller than its window); listed each time the tab is shown."""
    quiet: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    with gr.Column(elem_id="my-keys"):
        gr.Markdown(
            "A key of your own for a program (a coding agent, a script): what it does through the API is "
            "yours, and its chats are listed here with yours. It is shown once; revoke it when it is done."
        )
        listed = gr.Dataframe(headers=list(_COLUMNS.values()), interactive=False, elem_id="my-keys-list")
        with gr.Row():
            label = gr.Textbox(label="Key name (what uses it)", elem_id="my-key-name")
            create = gr.Button("Create key", elem_id="my-key-create")
        secret, which, revoke = shown_once_and_revoke("my-key-new", "my-key-choice", "my-key-revoke")
        said = gr.Markdown(elem_id="my-keys-result")

    def shown(login: str | None) -> tuple[Any, Any]:
        keys = people.own_keys(login)
        rows = [{title: getattr(k, field) or "" for field, title in _COLUMNS.items()} for k in keys if not k.revoked_at]
        live = [(f"{k.name} ({k.shown})", k.id) for k in keys if not k.revoked_at]
        return pd.DataFrame(rows, columns=list(_COLUMNS.values())), gr.update(choices=live, value=None)

    @explained
    def on_open(request: gr.Request) -> tuple[Any, ...]:
        if not _login(request):
            return gr.skip(), gr.skip(), "API keys of your own need a page login (this box has none)."
        return *shown(_login(request)), ""

    @explained
    def on_create(name: str, request: gr.Request) -> tuple[Any, ...]:
        made = people.create_own_key(_login(request), name, where=_where(request))
        return *shown(_login(request)), made.secret, f"✅ Key {made.key.name} made: copy it now."

    @explained
    def on_revoke(key_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        done = people.revoke_own_key(_login(request), key_id or "", where=_where(request))
        return *shown(_login(request)), "", done

    outputs = [listed, which, secret, said]
    create.click(on_create, [label], outputs, **quiet)
    revoke.click(on_revoke, [which], outputs, **quiet)
    tab.select(on_open, None, [listed, which, said], **quiet)


def register(people: PeopleAdmin) -> None:
    @explained
    def my_api_keys(request: gr.Request = None) -> list[dict[str, Any]]:  # type: ignore[assignment]
        """The logged-in person's own API keys (never their secrets); needs a page login."""
        return [asdict(k) for k in people.own_keys(_login(request))]

    @explained
    def create_my_api_key(name: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """A new key of the logged-in person's own; its secret is in `key`, this once."""
        made = people.create_own_key(_login(request), name, where=_api_where(request))
        return {"key": made.secret, **asdict(made.key)}

    @explained
    def revoke_my_api_key(key_id: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Revoke one of the logged-in person's own keys; the next request with it gets a 401."""
        return people.revoke_own_key(_login(request), key_id, where=_api_where(request))

    for handler, name in (
        (my_api_keys, "my_api_keys"),
        (create_my_api_key, "create_my_api_key"),
        (revoke_my_api_key, "revoke_my_api_key"),
    ):
        gr.api(handler, api_name=name, queue=False)
