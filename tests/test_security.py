"""On the LAN: no file outside the app's folders is served, logins hold, uploads are size-limited."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from app.auth import hash_password, verify_password
from tests.gradio_api import Client
from tests.gradio_queue import call, file_inputs, file_value, page_config
from tests.harness import API_KEY, ROOT, Appliance, api_client, free_port, wait_until

SECRETS = [Path("/etc/passwd"), ROOT / "pyproject.toml", ROOT / "app" / "settings.py"]
PREFIXES = [
    "/gradio_api/file=",
    "/file=",
    "/kiosk/gradio_api/file=",
    "/gradio_api/static/",
    "/static/",
    "/assets/",
    "/kiosk/assets/",
    "/gradio_api/file/",
]


def attempts() -> Iterator[str]:
    for secret in SECRETS:
        relative = os.path.relpath(secret, ROOT)
        for prefix in PREFIXES:
            yield prefix + str(secret)
            yield prefix + str(secret).upper()
            yield prefix + "../../../../../../.." + str(secret)
            yield prefix + "%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e" + str(secret).replace("/", "%2f")
            yield prefix + "..%2f..%2f..%2f..%2f..%2f..%2f.." + str(secret)
            yield prefix + relative
            yield prefix + "..\\..\\..\\..\\..\\.." + str(secret).replace("/", "\\")


def test_no_route_serves_a_file_outside_the_apps_folders(appliance: Appliance) -> None:
    markers = {secret: secret.read_bytes()[:64] for secret in SECRETS}
    with httpx.Client(base_url=appliance.url, timeout=10) as http:
        for path in attempts():
            response = http.get(path)
            assert response.status_code in (400, 403, 404, 405), f"{path} → {response.status_code}"
            for marker in markers.values():
                assert marker not in response.content, f"{path} leaked a file"


@pytest.mark.parametrize("prefix", ["/gradio_api/file=", "/kiosk/gradio_api/file=", "/admin/gradio_api/file="])
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/x.png",
        "HTTPS://127.0.0.1:{port}/x",
        "http%3A//127.0.0.1:{port}/x",
        "//127.0.0.1:{port}/x",
    ],
)
def test_file_refuses_every_url(appliance: Appliance, prefix: str, url: str) -> None:
    """Gradio streams an http(s) URL named in file= (blocking only private addresses): the mount refuses
    any URL before Gradio sees it, so the box fetches nothing for anyone (only loopback is named here)."""
    port = int(appliance.url.rsplit(":", 1)[1])
    response = httpx.get(appliance.url + prefix + url.format(port=port), timeout=10)
    assert response.status_code == 403, (response.status_code, response.text[:200])
    assert "does not fetch addresses" in response.json()["detail"]
    assert response.headers["Content-Security-Policy"]


def test_openapi_needs_a_login_when_people_log_in(guarded: str) -> None:
    for path in ("/openapi.json", "/kiosk/openapi.json", "/admin/openapi.json"):
        assert httpx.get(guarded + path, timeout=10).status_code in (401, 403, 404), path


def test_password_hashes_verify_and_are_salted() -> None:
    stored = hash_password("correct horse", iterations=1000)
    assert stored.startswith("pbkdf2_sha256$1000$") and "correct horse" not in stored
    assert verify_password("correct horse", stored)
    assert not verify_password("wrong", stored)
    assert hash_password("correct horse", iterations=1000) != stored
    assert not verify_password("x", "garbage")


GUARDED_ADMIN = "guarded-admin-pw"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An app with a login and a 1 MiB upload limit (its cards are absent: only the web matters)."""
    port = free_port()
    env = {
        **os.environ,
        "QUARTET_WEB__PORT": str(port),
        "QUARTET_DATA_DIR": str(tmp_path_factory.mktemp("guarded")),
        "QUARTET_ENGINE__CARDS": json.dumps(["127.0.0.1:1"]),
        "QUARTET_WEB__USERS": json.dumps(
            {
                "ada": hash_password("lovelace-1815", iterations=1000),
                "grace": hash_password("cobol-1959"),  # full cost: what an unknown name must match
                "hopper": hash_password("nanosecond", iterations=1000),
                "bob": hash_password("builder-1999", iterations=1000),
            }
        ),
        "QUARTET_KNOWLEDGE__MAX_FILE_MB": "1",
        "QUARTET_WEB__ADMIN_PASSWORD_HASH": hash_password(GUARDED_ADMIN, iterations=1000),
    }
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen([sys.executable, "-m", "app"], env=env, **quiet)  # type: ignore[call-overload]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(url), timeout=120, every=0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_page_and_its_api_need_a_login(guarded: str) -> None:
    assert httpx.get(guarded + "/gradio_api/info", timeout=10).status_code in (401, 403)
    with pytest.raises(Exception, match=r"(?i)login|credentials|401|auth"):
        Client(guarded, auth=("ada", "wrong-password"), verbose=False)
    client = Client(guarded, auth=("ada", "lovelace-1815"), verbose=False)
    status = client.predict(api_name="/status")
    assert status["state"] in ("recovering", "starting", "loading")
    assert status["down_card"] == "127.0.0.1:1"


def test_a_person_made_on_the_admin_page_logs_in_at_once_and_is_logged_out_when_removed(guarded: str) -> None:
    """On a box with page logins: a person added on the admin page logs in to the pages without a restart;
    removed, their open session is refused at its next request and they cannot log in again."""
    ada = Client(guarded, auth=("ada", "lovelace-1815"), verbose=False)
    token = ada.predict(GUARDED_ADMIN, api_name="/admin_login")
    ada.predict("zoe", "zoe-password-1", "user", token, api_name="/add_person")
    zoe = Client(guarded, auth=("zoe", "zoe-password-1"), verbose=False)
    assert zoe.predict(api_name="/conversations") == []
    with pytest.raises(AppError, match="may not use the admin page"):
        zoe.predict("zoe-password-1", "zoe", api_name="/admin_login")
    ada.predict("zoe", token, api_name="/remove_person")
    with pytest.raises(Exception):  # noqa: B017 (gradio_client words a 401 in several ways)
        zoe.predict(api_name="/conversations")
    with pytest.raises(Exception, match=r"(?i)login|credentials|401|auth"):
        Client(guarded, auth=("zoe", "zoe-password-1"), verbose=False)
    assert ada.predict(api_name="/conversations") == []  # the others are still logged in


def test_a_disabled_person_is_refused_at_once_and_a_reset_password_leads_to_setting_a_new_one(guarded: str) -> None:
    """On the running app: disabled, an open page session is refused at its next request and the login too;
    enabled, it works again. A reset password logs in to nothing: the login says to go to /password, where
    the person sets their own, which then logs in."""
    ada = Client(guarded, auth=("ada", "lovelace-1815"), verbose=False)
    token = ada.predict(GUARDED_ADMIN, api_name="/admin_login")
    assert ada.predict(GUARDED_ADMIN, "admin", api_name="/admin_login")  # the admin password is the person admin's
    as_admin = Client(guarded, auth=("admin", GUARDED_ADMIN), verbose=False)  # who logs in to the pages too
    assert as_admin.predict(api_name="/conversations") == []
    ada.predict("yan", "yan-password-1", "user", token, api_name="/add_person")
    yan = Client(guarded, auth=("yan", "yan-password-1"), verbose=False)
    assert yan.predict(api_name="/conversations") == []
    ada.predict("yan", True, token, api_name="/disable_person")
    with pytest.raises(Exception):  # noqa: B017 (gradio_client words a 401 in several ways)
        yan.predict(api_name="/conversations")
    with pytest.raises(Exception, match=r"(?i)login|credentials|401|auth"):
        Client(guarded, auth=("yan", "yan-password-1"), verbose=False)
    ada.predict("yan", False, token, api_name="/disable_person")
    assert Client(guarded, auth=("yan", "yan-password-1"), verbose=False).predict(api_name="/conversations") == []

    ada.predict("yan", "temporary-pw-1", token, api_name="/reset_password")
    refused = httpx.post(f"{guarded}/login", data={"username": "yan", "password": "temporary-pw-1"}, timeout=10)
    assert refused.status_code == 403 and "/password" in refused.text, refused.text
    assert "Set a new password" in httpx.get(f"{guarded}/password", timeout=10).text
    form = {"name": "yan", "password": "temporary-pw-1", "new_password": "yan-own-password"}
    changed = httpx.post(f"{guarded}/password", data=form, timeout=10)
    assert changed.status_code == 200 and changed.json()["ok"], changed.text
    again = httpx.post(f"{guarded}/password", data=form, timeout=10)  # the temporary one is spent
    assert again.status_code == 403 and not again.json()["ok"], again.text
    assert Client(guarded, auth=("yan", "yan-own-password"), verbose=False).predict(api_name="/conversations") == []
    ada.predict("yan", token, api_name="/remove_person")


def test_a_person_makes_a_key_of_their_own_that_works_on_v1_until_they_revoke_it(guarded: str) -> None:
    ada = Client(guarded, auth=("ada", "lovelace-1815"), verbose=False)
    made = ada.predict("ada's agent", api_name="/create_my_api_key")
    assert made["owner"] == "ada" and made["key"].startswith("qk-")
    assert [k["id"] for k in ada.predict(api_name="/my_api_keys")] == [made["id"]]
    bob = Client(guarded, auth=("bob", "builder-1999"), verbose=False)
    assert bob.predict(api_name="/my_api_keys") == []  # not bob's to see
    with pytest.raises(AppError, match="no live API key"):
        bob.predict(made["id"], api_name="/revoke_my_api_key")
    models = f"{guarded}/v1/models"
    assert httpx.get(models, headers={"Authorization": f"Bearer {made['key']}"}, timeout=10).status_code == 200
    ada.predict(made["id"], api_name="/revoke_my_api_key")
    assert httpx.get(models, headers={"Authorization": f"Bearer {made['key']}"}, timeout=10).status_code == 401


def test_wrong_page_logins_are_throttled_per_name(guarded: str) -> None:
    """20 wrong passwords for one name in a row: after the few a typo allows, the tries are not even
    checked (429, saying how long to wait) — the right password included; another name from the same
    address still logs in."""
    with httpx.Client(base_url=guarded, timeout=30) as http:
        answers = [http.post("/login", data={"username": "hopper", "password": f"guess-{n}"}) for n in range(20)]
        throttled = [a for a in answers if a.status_code == 429]
        assert len(throttled) >= 15, [a.status_code for a in answers]
        assert "try again in" in throttled[-1].json()["detail"]
        assert http.post("/login", data={"username": "hopper", "password": "nanosecond"}).status_code == 429
        assert http.post("/login", data={"username": "ada", "password": "lovelace-1815"}).status_code == 200


def test_an_unknown_name_takes_as_long_as_a_known_one(guarded: str) -> None:
    """An unknown name is checked against a hash of the same cost, so timing does not tell names apart
    (before: 28 ms for an unknown name, 170 ms for a known one)."""

    def took(name: str) -> float:
        start = time.perf_counter()
        answer = http.post("/login", data={"username": name, "password": "wrong"})
        assert answer.status_code == 400, answer.text
        return time.perf_counter() - start

    with httpx.Client(base_url=guarded, timeout=30) as http:
        # interleaved, each side's fastest: a burst of load on a busy box hits both alike (a fresh clone's run
        # beside `make run` once read 78 ms against 160 when the three of each came one side after the other)
        pairs = [(took("grace"), took(f"nobody-{n}")) for n in range(3)]  # three: within the typo allowance
        known, unknown = min(k for k, _ in pairs), min(u for _, u in pairs)
    assert known > 0.02, f"the known name's check took {known * 1000:.0f} ms: the hash is not at full cost"
    assert unknown > 0.5 * known, f"unknown name {unknown * 1000:.0f} ms, known {known * 1000:.0f} ms"


def test_admin_tries_are_counted_per_login_and_address_not_per_session() -> None:
    """The kiosk's user (or anyone behind the same proxy) cannot lock the admin out, and a client cannot
    escape the throttle by opening a new session."""
    from app.ui.callers import throttle_key

    def request(username: str | None, session: str) -> Any:
        return SimpleNamespace(username=username, session_hash=session, client=SimpleNamespace(host="10.0.0.9"))

    assert throttle_key(request("kiosk", "s1")) != throttle_key(request("admin", "s1"))
    assert throttle_key(request("kiosk", "s1")) == throttle_key(request("kiosk", "s2"))
    assert throttle_key(request(None, "s1")) == throttle_key(request(None, "s2"))


def test_another_user_cannot_read_a_run_or_delete_a_document(guarded: str, tmp_path: Path) -> None:
    """With logins, the library is everyone's, a run is its user's and a document may be deleted by the user
    who uploaded it (docs/using.md, "What is shared and what is yours")."""
    ada = Client(guarded, auth=("ada", "lovelace-1815"), verbose=False)
    bob = Client(guarded, auth=("bob", "builder-1999"), verbose=False)
    doc = tmp_path / "ada-invoice-7781.txt"
    doc.write_text("INVOICE\nInvoice number: INV-7781\nTotal: 5.00 EUR\n", encoding="utf-8")
    ada.predict([handle_file(str(doc))], api_name="/ingest")
    indexed = lambda: next(  # noqa: E731
        (d for d in ada.predict(api_name="/documents") if d["name"] == doc.name and d["status"] == "ok"), None
    )
    found = wait_until(indexed, timeout=120, every=0.5)
    assert doc.name in [d["name"] for d in bob.predict(api_name="/documents")]  # the library is shared
    run_id = ada.predict([doc.name], "", "invoice", api_name="/extraction_run")
    assert ada.predict(run_id, api_name="/extraction_results")["documents_total"] == 1
    with pytest.raises(AppError, match=f"there is no extraction run {run_id}"):
        bob.predict(run_id, api_name="/extraction_results")
    with pytest.raises(AppError, match="not uploaded by you"):
        bob.predict(found["id"], api_name="/delete_document")
    assert ada.predict(found["id"], api_name="/delete_document") is True


def test_an_upload_over_the_limit_is_refused(guarded: str) -> None:
    with httpx.Client(base_url=guarded, timeout=30) as http:
        login = http.post("/login", data={"username": "ada", "password": "lovelace-1815"})
        assert login.status_code == 200
        small = http.post("/gradio_api/upload", files={"files": ("ok.txt", b"x" * 1000)})
        assert small.status_code == 200
        big = http.post("/gradio_api/upload", files={"files": ("big.txt", b"x" * (2 * 1024 * 1024))})
        assert big.status_code == 413


def test_a_file_sent_to_extract_over_the_limit_is_refused(guarded: str, tmp_path: Path) -> None:
    """`extract` takes its file as any upload: the same size limit, nothing saved into kb/."""
    big = tmp_path / "too-big-for-extract.txt"
    big.write_bytes(b"x" * (2 * 1024 * 1024))
    client = Client(guarded, auth=("ada", "lovelace-1815"), verbose=False)
    with pytest.raises(Exception, match=r"413|too large|Payload|exceeds"):
        client.predict(file=handle_file(str(big)), template="invoice", api_name="/extract")
    documents = client.predict(api_name="/documents")
    assert not [d for d in documents if d["name"] == big.name]


def test_every_endpoint_that_takes_an_admin_token_refuses_a_forged_one(appliance: Appliance) -> None:
    from gradio_client.exceptions import AppError

    c = api_client(appliance.url)
    api = c.view_api(print_info=False, return_format="dict")
    guarded = {
        name: [p["parameter_name"] for p in info["parameters"]]
        for name, info in api["named_endpoints"].items()
        if any(p["parameter_name"] == "admin_token" for p in info["parameters"])
    }
    assert {"/switch_model", "/set_cards", "/ping_cards", "/engine_settings"} <= set(guarded)
    assert {"/backup", "/restore", "/admin_logs", "/engine_settings_now"} <= set(guarded)
    assert {"/people", "/add_person", "/reset_password", "/set_role", "/remove_person"} <= set(guarded)
    assert {"/api_keys", "/create_api_key", "/revoke_api_key"} <= set(guarded)
    assert {"/rename_person", "/disable_person", "/end_sessions"} <= set(guarded)
    for token in (["a-list"], {"a": 1}, 7):  # before: "TypeError: unhashable type: 'list'"
        with pytest.raises(AppError, match="needs the admin session"):
            c.predict("demo", token, api_name="/switch_model")
    samples = {
        "model_id": "demo",
        "endpoints": ["127.0.0.1:1"],
        "changes": {"n_ctx": 2048},
        "archive": None,
        "admin_token": "forged",
        "document_id": 1,
        "name": "mallory",
        "password": "mallory-password",
        "role": "admin",
        "owner": "",
        "key_id": "x",
        "new_name": "mallory-2",
        "disabled": True,
    }
    for name, params in guarded.items():
        with pytest.raises(AppError, match="admin session"):
            c.predict(*(samples[p] for p in params), api_name=name)


# -- files: a client can hand an endpoint only what it uploaded ------------------------------------

PAGES = ["", "/kiosk", "/admin"]


def serving(url: str) -> bool:
    return httpx.get(url + "/", timeout=5).status_code == 200


def test_every_step_that_takes_a_file_refuses_a_server_path(appliance: Appliance, tmp_path: Path) -> None:
    """Found from each page's config, not listed by hand: a new file input is checked the day it appears."""
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\nThe launch code is QX-4471.", encoding="utf-8")
    kb = appliance.data_dir.parent / "kb"
    checked = 0
    for prefix in PAGES:
        for fn_index, inputs, files in file_inputs(page_config(appliance.url + prefix)):
            database = str(appliance.data_dir / "quartet.db")
            for secret in ("/etc/passwd", "file:/etc/passwd", str(outside), "/dev/zero", database):
                data = [file_value(secret, files[i]) if i in files else None for i in inputs]
                started = time.monotonic()
                done = call(appliance.url + prefix, fn_index, data)
                assert not done.get("success"), f"{prefix or '/'} step {fn_index} accepted {secret}: {done}"
                said = json.dumps(done.get("output"))
                assert str(ROOT) not in said, f"the refusal of {secret} shows the install folder: {said}"
                assert time.monotonic() - started < 10, f"{secret} held step {fn_index}"
                assert serving(appliance.url)
                checked += 1
    assert checked >= 4, "the Documents tab's drop zone should be among the steps that take a file"
    leaked = [p.name for p in kb.rglob("*") if p.name in ("passwd", "outside.md", "zero", "quartet.db")]
    assert not leaked, f"copied into kb/: {leaked}"


def test_the_named_ingest_endpoint_refuses_a_server_path(appliance: Appliance) -> None:
    """The exact call of the attack report: POST /gradio_api/call/ingest with a path, no upload."""
    value = [{"path": "/etc/passwd", "orig_name": "passwd", "meta": {"_type": "gradio.FileData"}}]
    with httpx.Client(base_url=appliance.url, timeout=30) as http:
        event = http.post("/gradio_api/call/ingest", json={"data": [value]}).json()["event_id"]
        stream = http.get(f"/gradio_api/call/ingest/{event}").text
    assert "event: error" in stream and "root:x:0:0" not in stream
    assert not (appliance.data_dir.parent / "kb" / "passwd").exists()
    documents = api_client(appliance.url).predict(api_name="/documents")
    assert not [d for d in documents if d["name"] == "passwd"]


def test_a_symlink_in_kb_is_not_followed(appliance: Appliance, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.md"
    secret.write_text("# Elsewhere\nOnly the owner may read this: ZK-9921.", encoding="utf-8")
    kb = appliance.data_dir.parent / "kb"
    link = kb / "linked-secret.md"
    link.symlink_to(secret)
    beside = kb / "plain-note-for-symlink-test.md"
    beside.write_text("# A plain note\nIndexed in the same moment as the link.", encoding="utf-8")
    c = api_client(appliance.url)
    try:
        # the plain file and the link are seen in the same watcher tick: once one is indexed, the other was judged
        wait_until(
            lambda: [d for d in c.predict(api_name="/documents") if d["name"] == beside.name and d["status"] == "ok"],
            timeout=120,
            every=0.5,
        )
        names = [d["name"] for d in c.predict(api_name="/documents")]
        assert link.name not in names
    finally:
        link.unlink()
        beside.unlink()


def test_every_admin_step_checks_the_session(appliance: Appliance) -> None:
    """Each step of the admin page, joined by fn_index without logging in, gives away no catalog or log."""
    url = appliance.url + "/admin"
    config = page_config(url)
    assert "Absent 27B" not in json.dumps(config), "the page itself lists the catalog before a login"
    for dep in config["dependencies"]:
        done = call(url, dep["id"], [None] * len(dep["inputs"]))
        shown = json.dumps(done.get("output", ""))
        assert "Absent 27B" not in shown and "admin session opened" not in shown, f"step {dep['id']}: {shown[:300]}"


# -- safe on the LAN by default ---------------------------------------------------------------------


@pytest.mark.slow
def test_facing_the_lan_without_logins_or_keys_refuses_to_start(tmp_path: Path) -> None:
    env = {**os.environ, "QUARTET_WEB__HOST": "0.0.0.0", "QUARTET_DATA_DIR": str(tmp_path), "QUARTET_WEB__PORT": "1"}
    env.pop("QUARTET_WEB__API_KEYS", None)
    env.pop("QUARTET_WEB__USERS", None)
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "without users and api_keys" in done.stderr and "allow_open_lan" in done.stderr
    assert not (tmp_path / "quartet.db").exists(), "it refused before opening anything"


def test_the_lan_check_and_its_override() -> None:
    from app.settings import Settings

    keys, users = ["sk-a"], {"ada": hash_password("x", iterations=1000)}
    assert Settings(web={"host": "127.0.0.1"}).open_lan_problem() is None
    assert Settings(web={"host": "localhost"}).open_lan_problem() is None
    assert "without users" in (Settings(web={"host": "192.168.1.20", "api_keys": keys}).open_lan_problem() or "")
    assert "without api_keys" in (Settings(web={"host": "0.0.0.0", "users": users}).open_lan_problem() or "")
    assert "without users and api_keys" in (Settings(web={"host": "appliance.local"}).open_lan_problem() or "")
    assert Settings(web={"host": "0.0.0.0", "users": users, "api_keys": keys}).open_lan_problem() is None
    assert Settings(web={"host": "0.0.0.0", "allow_open_lan": True}).open_lan_problem() is None
    with pytest.raises(ValueError, match="blank"):
        Settings(web={"api_keys": [" "]})


@pytest.mark.parametrize(
    "header",
    [
        "Bearer ",
        "Bearer",
        "Bearer  ",
        "Basic c2stcXVhcnRldC10ZXN0",
        "sk-quartet-test",
        "Bearer sk-quartet-tes",
        "Bearer 钥匙",
    ],
)
def test_a_blank_or_malformed_bearer_gets_401_in_openais_shape(appliance: Appliance, header: str) -> None:
    """Sent as raw bytes: client libraries refuse to send a header ending in a space, a server must cope."""
    request = (
        f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {header}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", appliance.port), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split()[1] == b"401", head
    error = json.loads(body)["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"


def test_metrics_need_a_key_and_health_does_not(appliance: Appliance) -> None:
    assert httpx.get(appliance.url + "/metrics", timeout=10).status_code == 401
    keyed = httpx.get(appliance.url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=10)
    assert keyed.status_code == 200 and "quartet_" in keyed.text
    assert httpx.get(appliance.url + "/health", timeout=10).json()["ok"] is True


def test_every_page_carries_the_content_security_policy(appliance: Appliance) -> None:
    for path in ("/", "/kiosk/", "/admin/", "/v1/models", "/health", "/gradio_api/info"):
        policy = httpx.get(appliance.url + path, timeout=10).headers.get("content-security-policy", "")
        assert "img-src 'self' data: blob:" in policy and "default-src 'self'" in policy, f"{path}: {policy!r}"


def test_admin_and_kiosk_answer_without_the_trailing_slash(appliance: Appliance) -> None:
    for path in ("/admin", "/kiosk"):
        response = httpx.get(appliance.url + path, timeout=10, follow_redirects=True)
        assert response.status_code == 200 and str(response.url).endswith(path + "/")
