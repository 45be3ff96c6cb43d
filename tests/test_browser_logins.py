"""People on a box with page logins, in Chromium (issue 26's browser test): the admin creates a user on the
admin page; that user logs in in another browser context, chats, cannot open the admin page and cannot see
another user's conversations; a key made on the page for them works with the `openai` client and stops
once revoked; the admin disables them and their next request is refused.

The box is an appliance of its own (page logins are decided at its start) in front of the shared
appliance's /v1 as its upstream, so it answers with the demo model without cards of its own."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from app.auth import hash_password
from tests.browser_helpers import CHAT_READY, TOAST, admin_login, answered, browser_context
from tests.gradio_api import Client
from tests.harness import API_KEY, Appliance, models_folder

ADA = ("ada", "ada-password-1")


@pytest.fixture(scope="module")
def box(appliance: Appliance, work_dir: Path) -> Iterator[Appliance]:
    home = work_dir / "logins-box"
    (home / "logs").mkdir(parents=True, exist_ok=True)
    settings = {
        "QUARTET_ENGINE__BACKEND": "upstream",
        "QUARTET_ENGINE__UPSTREAM_URL": appliance.url + "/v1",
        "QUARTET_ENGINE__UPSTREAM_KEY": API_KEY,
        "QUARTET_ENGINE__N_CTX": "2048",
        # one card listed (down): the admin page's catalog view fails on an upstream box with no card at all
        "QUARTET_ENGINE__CARDS": json.dumps(["127.0.0.1:1"]),
        "QUARTET_WEB__USERS": json.dumps({ADA[0]: hash_password(ADA[1], iterations=1000)}),
    }
    app = Appliance(None, home / "var", home / "logs", models_folder(work_dir / "models"), settings=settings)
    app.start()
    yield app
    app.stop()


def page_login(page: Any, url: str, name: str, password: str, ready: str | None = CHAT_READY) -> None:
    """Gradio's login form: name, password, Enter; then `ready` on the page."""
    page.goto(url, wait_until="load")
    page.locator("input[type=password]").wait_for(timeout=15_000)
    page.locator("input:not([type=password])").first.fill(name)
    page.locator("input[type=password]").fill(password)
    page.locator("input[type=password]").press("Enter")
    if ready:
        page.locator(ready).first.wait_for(timeout=30_000)


def v1(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=60)


def test_a_user_made_on_the_admin_page_logs_in_chats_alone_and_is_refused_once_disabled(
    browser: Any, box: Appliance, artifacts: Path
) -> None:
    uma, uma_pw = f"uma-{secrets.token_hex(3)}", "uma-password-1"
    with browser_context(browser, 1280, 1400) as admin_ctx, browser_context(browser, 1280, 1000) as user_ctx:
        ada = admin_ctx.new_page()
        page_login(ada, box.url + "/", *ADA)
        answered(ada, "Ada's private question about tea")
        page_login(ada, box.url + "/admin/", *ADA, ready="#admin-password input")
        admin_login(ada, box.url)
        ada.get_by_text("People and API keys").first.click()
        ada.locator("#person-name textarea").fill(uma)
        ada.locator("#person-password input").fill(uma_pw)
        ada.locator("#add-person").click()
        ada.locator("#people-result").get_by_text(f"{uma} can log in now").wait_for(timeout=15_000)

        user = user_ctx.new_page()
        page_login(user, box.url + "/", uma, uma_pw)
        answered(user, "Uma asks about coffee")
        user.locator("#regenerate").click()  # her answer's versions: the arrows find her chat, not the browser's
        user.locator("#version-label").get_by_text("answer 2 of 2").wait_for(timeout=90_000)
        user.locator("#version-older").click()
        user.locator("#version-label").get_by_text("answer 1 of 2").wait_for(timeout=15_000)
        listed = user.locator("#conversations")
        user.wait_for_function("el => el.innerText.includes('coffee')", arg=listed.element_handle(), timeout=15_000)
        assert "tea" not in listed.inner_text(), listed.inner_text()  # ada's chat is not hers to see
        ada_ids = {c["id"] for c in Client(box.url, auth=ADA, verbose=False).predict(api_name="/conversations")}
        uma_client = Client(box.url, auth=(uma, uma_pw), verbose=False)
        uma_ids = {c["id"] for c in uma_client.predict(api_name="/conversations")}
        assert uma_ids and not uma_ids & ada_ids, (uma_ids, ada_ids)
        user.get_by_role("tab", name="My API keys").click()  # her own keys: a tab where people log in
        user.locator("#my-key-create").wait_for(timeout=15_000)

        admin_page = user_ctx.new_page()  # the admin page: her own password opens no admin session
        page_login(admin_page, box.url + "/admin/", uma, uma_pw, ready="#admin-password input")  # each page's own
        admin_page.locator("#admin-name input, #admin-name textarea").first.fill(uma)
        admin_page.locator("#admin-password input").fill(uma_pw)
        admin_page.locator("#admin-password input").press("Enter")
        admin_page.locator(TOAST).filter(has_text="may not use the admin page").first.wait_for(timeout=15_000)
        assert not admin_page.locator("#catalog").is_visible()
        admin_page.close()

        ada.locator("#key-name textarea").fill("uma's agent")
        ada.locator("#key-owner input").click()
        ada.get_by_role("option", name=uma, exact=True).click()
        ada.locator("#create-key").click()
        shown = ada.locator("#new-key textarea")
        ada.wait_for_function("el => el.value.startsWith('qk-')", arg=shown.element_handle(), timeout=15_000)
        secret = shown.input_value()
        assert [m.id for m in v1(box.url, secret).models.list().data]  # the openai client, with the page's key
        ada.locator("#revoke-choice input").click()
        ada.get_by_role("option", name="uma's agent (").first.click()
        ada.locator("#revoke-key").click()
        ada.locator("#people-result").get_by_text("is revoked").wait_for(timeout=15_000)
        with pytest.raises(openai.AuthenticationError):
            v1(box.url, secret).models.list()

        ada.locator("#person-name textarea").fill(uma)
        ada.locator("#disable-person").click()
        ada.locator("#people-result").get_by_text(f"{uma} is disabled").wait_for(timeout=15_000)
        ada.screenshot(path=str(artifacts / "admin-people-disabled.png"), full_page=True)
        user.reload(wait_until="load")  # her next request: the login form, not her chats
        user.locator("input[type=password]").wait_for(timeout=15_000)
        assert not user.locator(CHAT_READY).count()
        page_login(user, box.url + "/", uma, uma_pw, ready=None)  # and her password is refused
        user.locator("text=/Incorrect|credentials/i").first.wait_for(timeout=15_000)
