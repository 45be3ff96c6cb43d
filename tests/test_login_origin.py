"""Login CSRF (issue 47, item 14): a page's login and `/password`, posted from another site, are refused; from
the appliance's own page, or by a client that names no site (curl), they work. In process: the real
`SameOrigin` layer in front of a real Gradio page with the real page logins, and the real `/password` route
over the people service on a SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fastapi
import gradio as gr
import pytest
from fastapi.testclient import TestClient

from app.api import password_routes
from app.auth import hash_password
from app.page_logins import PageLogins, SameOrigin
from tests.test_people import ADMIN_PW, Box

HOST = "quartet.local:7860"
SAME = {"Origin": f"http://{HOST}"}
CROSS: list[dict[str, str]] = [
    {"Origin": "https://evil.example"},
    {"Origin": "null"},  # a sandboxed frame or a file: page
    {"Origin": f"http://{HOST}.evil.example"},
    {"Referer": "https://evil.example/login-csrf.html"},  # a browser that sends no Origin
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Box]]:
    box = Box(tmp_path / "q.db")
    api = fastapi.FastAPI()
    api.add_middleware(SameOrigin)
    password_routes.add(api, box.people)
    logins = PageLogins({"carol": hash_password("carol-pw-123", iterations=1000)})
    with gr.Blocks() as blocks:
        gr.Markdown("a page")
    for path in ("/admin", ""):
        api = gr.mount_gradio_app(api, blocks, path=path, auth=logins.check)
    with TestClient(api, base_url=f"http://{HOST}") as client:
        yield client, box
    box.database.close()


def login(client: TestClient, path: str, headers: dict[str, str]) -> int:
    form = {"username": "carol", "password": "carol-pw-123"}
    return client.post(path, data=form, headers=headers, follow_redirects=False).status_code


@pytest.mark.parametrize("path", ["/login", "/login/", "/admin/login"])
def test_a_page_login_from_another_site_is_refused(served: tuple[TestClient, Box], path: str) -> None:
    client, _box = served
    for headers in CROSS:
        refused = client.post(path, data={"username": "carol", "password": "carol-pw-123"}, headers=headers)
        assert refused.status_code == 403, (headers, refused.text)
        assert "sent from another site" in refused.json()["detail"]
        assert not [c for c in refused.cookies if c.startswith("access-token")]
    assert login(client, path, SAME) == 200  # from the appliance's own page
    assert login(client, path, {}) == 200  # a client that names no site
    assert login(client, path, {"Origin": "https://quartet.example", "X-Forwarded-Host": "quartet.example"}) == 200


def test_setting_a_password_from_another_site_is_refused(served: tuple[TestClient, Box]) -> None:
    client, box = served
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "alice", "alice-pw-123", "user", where="test")
    form = {"name": "alice", "password": "alice-pw-123", "new_password": "alice-new-pw-1"}
    before = box.store.password_hash("alice")
    for headers in CROSS:
        refused = client.post("/password", data=form, headers=headers)
        assert refused.status_code == 403 and "sent from another site" in refused.json()["detail"], refused.text
    assert box.store.password_hash("alice") == before  # unchanged
    changed = client.post("/password", data=form, headers=SAME)
    assert changed.status_code == 200 and changed.json()["ok"], changed.text
    assert box.store.password_hash("alice") != before
