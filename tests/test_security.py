"""On the LAN: no file outside the app's folders is served, logins hold, uploads are size-limited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gradio_client import Client

from app.auth import hash_password, verify_password
from tests.harness import ROOT, Appliance, free_port, wait_until

SECRETS = [Path("/etc/passwd"), ROOT / "pyproject.toml", ROOT / "app" / "settings.py"]
PREFIXES = ["/gradio_api/file=", "/file=", "/kiosk/gradio_api/file=", "/gradio_api/static/", "/static/",
            "/assets/", "/kiosk/assets/", "/gradio_api/file/"]


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


def test_password_hashes_verify_and_are_salted() -> None:
    stored = hash_password("correct horse", iterations=1000)
    assert stored.startswith("pbkdf2_sha256$1000$") and "correct horse" not in stored
    assert verify_password("correct horse", stored)
    assert not verify_password("wrong", stored)
    assert hash_password("correct horse", iterations=1000) != stored
    assert not verify_password("x", "garbage")


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An app with a login and a 1 MiB upload limit (its cards are absent: only the web matters)."""
    port = free_port()
    env = {
        **os.environ,
        "QUARTET_PORT": str(port),
        "QUARTET_DATA_DIR": str(tmp_path_factory.mktemp("guarded")),
        "QUARTET_CARDS": json.dumps(["127.0.0.1:1"]),
        "QUARTET_USERS": json.dumps({"ada": hash_password("lovelace-1815", iterations=1000)}),
        "QUARTET_MAX_UPLOAD_MB": "1",
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


def test_an_upload_over_the_limit_is_refused(guarded: str) -> None:
    with httpx.Client(base_url=guarded, timeout=30) as http:
        login = http.post("/login", data={"username": "ada", "password": "lovelace-1815"})
        assert login.status_code == 200
        small = http.post("/gradio_api/upload", files={"files": ("ok.txt", b"x" * 1000)})
        assert small.status_code == 200
        big = http.post("/gradio_api/upload", files={"files": ("big.txt", b"x" * (2 * 1024 * 1024))})
        assert big.status_code == 413


def test_every_endpoint_that_takes_an_admin_token_refuses_a_forged_one(appliance: Appliance) -> None:
    from gradio_client.exceptions import AppError

    c = Client(appliance.url, verbose=False)
    api = c.view_api(print_info=False, return_format="dict")
    guarded = {
        name: [p["parameter_name"] for p in info["parameters"]]
        for name, info in api["named_endpoints"].items()
        if any(p["parameter_name"] == "admin_token" for p in info["parameters"])
    }
    assert {"/switch_model", "/set_cards", "/ping_cards", "/engine_settings"} <= set(guarded)
    samples = {"model_id": "demo", "endpoints": ["127.0.0.1:1"], "changes": {"n_ctx": 2048}, "admin_token": "forged"}
    for name, params in guarded.items():
        with pytest.raises(AppError, match="admin session"):
            c.predict(*(samples[p] for p in params), api_name=name)
