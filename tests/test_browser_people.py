"""The admin page in Chromium: add a person, make them an API key (shown once), see it work on /v1, revoke
it (refused at once), remove the person — no shell involved."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx

from tests.browser_helpers import admin_login
from tests.harness import Appliance, wait_until


def upload_ticket(page: Any) -> dict[str, Any] | None:
    return next((c for c in page.context.cookies() if c["name"] == "quartet-admin-upload"), None)


def v1_status(url: str, key: str) -> int:
    return httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=10).status_code


def test_the_admin_adds_a_person_makes_a_key_once_and_revokes_it(
    browser: Any, appliance: Appliance, artifacts: Path
) -> None:
    name = f"bea-{secrets.token_hex(3)}"
    page = browser.new_page(viewport={"width": 1280, "height": 1600})
    admin_login(page, appliance.url)
    # the restore's ticket: set by a page script that runs after the login has opened the page
    ticket = wait_until(lambda: upload_ticket(page), timeout=15, what="the admin upload ticket cookie")
    assert ticket["path"] == "/admin", ticket
    page.get_by_text("People and API keys").first.click()
    page.locator("#person-name textarea").fill(name)
    page.locator("#person-password input").fill("bea-password-1")
    page.locator("#add-person").click()
    page.locator("#people-result").get_by_text(f"{name} is added, as a user").wait_for(timeout=15_000)
    # this box started without people: the page says when they log in
    assert "after a restart" in page.locator("#people-result").inner_text()
    page.locator("#people").get_by_text(name).first.wait_for(timeout=10_000)
    assert page.locator("#person-password input").input_value() == ""  # the password does not linger

    page.locator("#key-name textarea").fill("browser agent")
    page.locator("#key-owner input").click()
    page.get_by_role("option", name=name, exact=True).click()
    page.locator("#create-key").click()
    shown = page.locator("#new-key textarea")
    page.wait_for_function("el => el.value.startsWith('qk-')", arg=shown.element_handle(), timeout=15_000)
    secret = shown.input_value()
    table = page.locator("#api-keys")
    page.wait_for_function("el => el.innerText.includes('browser agent')", arg=table.element_handle(), timeout=10_000)
    assert secret not in table.inner_text() and secret[:8] in table.inner_text()  # the list shows only its start
    assert v1_status(appliance.url, secret) == 200
    page.screenshot(path=str(artifacts / "admin-people.png"), full_page=True)

    page.locator("#revoke-choice input").click()
    page.get_by_role("option", name="browser agent (").first.click()
    page.locator("#revoke-key").click()
    page.locator("#people-result").get_by_text("is revoked").wait_for(timeout=15_000)
    assert shown.input_value() == ""  # shown once: gone after the next action
    assert v1_status(appliance.url, secret) == 401

    page.locator("#person-name textarea").fill(name)
    page.locator("#remove-person").click()
    page.locator("#people-result").get_by_text("Tick").wait_for(timeout=10_000)
    page.locator("#remove-sure input").check()
    page.locator("#remove-person").click()
    page.locator("#people-result").get_by_text(f"{name} is removed").wait_for(timeout=15_000)
    log = page.locator("#admin-log")  # every one of these is in the admin log, shown at once
    page.wait_for_function(
        "el => ['add person', 'create API key', 'revoke API key', 'remove person']"
        ".every((action) => el.innerText.includes(action))",
        arg=log.element_handle(),
        timeout=15_000,
    )
    page.close()
