"""People and API keys through the named endpoints on the shared appliance: a key made there works on /v1
at once and is refused at once when revoked, a key's chats are its owner's, a user gets no admin session,
and the large restore upload is not taken from anyone without an admin session."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client.exceptions import AppError

from tests.gradio_api import Client
from tests.harness import API_KEY, Appliance, api_client
from tests.test_admin import login


@pytest.fixture(scope="module")
def admin(appliance: Appliance) -> tuple[Client, str]:
    c = api_client(appliance.url)
    return c, login(c)


@pytest.fixture
def person(admin: tuple[Client, str]) -> Iterator[tuple[str, str]]:
    """A person with the user role, removed (their keys revoked) after the test."""
    c, token = admin
    name, password = f"pat-{secrets.token_hex(3)}", secrets.token_urlsafe(12)
    c.predict(name, password, "user", token, api_name="/add_person")
    yield name, password
    c.predict(name, token, api_name="/remove_person")


def v1_models(url: str, key: str) -> int:
    return httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=10).status_code


def test_a_key_made_on_the_admin_page_works_on_v1_and_is_refused_once_revoked(
    appliance: Appliance, admin: tuple[Client, str], person: tuple[str, str]
) -> None:
    c, token = admin
    made: dict[str, Any] = c.predict("test agent", person[0], token, api_name="/create_api_key")
    secret = made["key"]
    try:
        assert v1_models(appliance.url, secret) == 200
        assert v1_models(appliance.url, API_KEY) == 200  # the configured key still works beside it
        listed = {k["id"]: k for k in c.predict(token, api_name="/api_keys")}
        assert listed[made["id"]]["last_used_at"], listed[made["id"]]
        assert listed[made["id"]]["owner"] == person[0]
        assert all(secret not in str(k) for k in listed.values())  # never shown again
    finally:
        c.predict(made["id"], token, api_name="/revoke_api_key")
    response = httpx.get(f"{appliance.url}/v1/models", headers={"Authorization": f"Bearer {secret}"}, timeout=10)
    assert response.status_code == 401, response.text  # the very next request, no restart
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_a_keys_chats_are_its_owners(appliance: Appliance, admin: tuple[Client, str], person: tuple[str, str]) -> None:
    """Two keys of one person: a chat made with the first is listed with the second, not to anyone else."""
    c, token = admin
    first = c.predict("agent one", person[0], token, api_name="/create_api_key")
    second = c.predict("agent two", person[0], token, api_name="/create_api_key")
    one = Client(appliance.url, verbose=False, headers={"Authorization": f"Bearer {first['key']}"})
    two = Client(appliance.url, verbose=False, headers={"Authorization": f"Bearer {second['key']}"})
    *_, (_, cid, _) = one.submit("Say hello.", api_name="/chat")
    assert cid in [row["id"] for row in two.predict(api_name="/conversations")]
    assert cid not in [row["id"] for row in api_client(appliance.url).predict(api_name="/conversations")]
    c.predict(first["id"], token, api_name="/revoke_api_key")
    after = Client(appliance.url, verbose=False, headers={"Authorization": f"Bearer {first['key']}"})
    assert cid not in [row["id"] for row in after.predict(api_name="/conversations")]  # a revoked key is no one's


def test_a_user_gets_no_admin_session_and_no_admin_endpoint_answers_without_one(
    appliance: Appliance, admin: tuple[Client, str], person: tuple[str, str]
) -> None:
    name, password = person
    c = api_client(appliance.url, client_id=secrets.token_hex(16))
    with pytest.raises(AppError, match="may not use the admin page"):
        c.predict(password, name, api_name="/admin_login")
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("/people", ()),
        ("/add_person", ("mallory", "mallory-pw-1", "admin")),
        ("/reset_password", (name, "new-password-1")),
        ("/set_role", (name, "admin")),
        ("/remove_person", (name,)),
        ("/api_keys", ()),
        ("/create_api_key", ("stolen", name)),
        ("/revoke_api_key", ("x",)),
    ]
    for endpoint, args in calls:
        for forged in ("", password, "guess-token"):
            with pytest.raises(AppError, match="admin session"):
                c.predict(*args, forged, api_name=endpoint)
    roles = {row["name"]: row["role"] for row in admin[0].predict(admin[1], api_name="/people")}
    assert roles[name] == "user" and "mallory" not in roles


def multipart(size: int) -> Iterator[bytes]:
    """A well-formed upload form of `size` bytes in all: one file of zeros (what Gradio's upload takes)."""
    head = b'--x\r\nContent-Disposition: form-data; name="files"; filename="big.bin"\r\n\r\n'
    tail = b"\r\n--x--\r\n"
    chunk = b"\0" * 2**20
    yield head
    left = size - len(head) - len(tail)
    while left > 0:
        yield chunk[: min(left, len(chunk))]
        left -= len(chunk)
    yield tail


def test_the_large_restore_upload_needs_an_admin_session(appliance: Appliance, admin: tuple[Client, str]) -> None:
    """Over a document's limit (200 MiB), /admin/ takes a body only from an admin session (the page's ticket
    cookie or the X-Quartet-Admin header): before, anyone could upload up to 8 GiB into Gradio's cache."""
    size = 202 * 2**20
    headers = {"Content-Type": "multipart/form-data; boundary=x", "Content-Length": str(size)}
    url = f"{appliance.url}/admin/gradio_api/upload"
    for extra in ({}, {"X-Quartet-Admin": "guess"}, {"Cookie": "quartet-admin-upload=guess"}):
        try:
            response = httpx.post(url, content=multipart(size), headers=headers | extra, timeout=120)
        except httpx.HTTPError as err:  # the server answered and closed while the body was still going
            pytest.fail(f"the refusal did not reach the client: {err!r}")
        assert response.status_code == 413, (extra, response.status_code, response.text[:200])
        assert "admin session" in response.json()["detail"]
    small = httpx.post(url, files={"files": ("a.txt", b"hello")}, timeout=30)
    assert small.status_code == 200, small.text  # a document-sized upload is as before
    taken = httpx.post(url, content=multipart(size), headers=headers | {"X-Quartet-Admin": admin[1]}, timeout=120)
    assert taken.status_code == 200, taken.text[:300]
    Path(taken.json()[0]).unlink()  # 202 MiB in Gradio's cache: not left on a shared machine
