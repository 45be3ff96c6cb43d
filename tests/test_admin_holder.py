"""An admin session is bound to the page login that opened it (issue 47, item 11): its token sent by another
logged-in person is refused, and the session ended; on a box without page logins nothing changes. Through
the real named endpoints (registered on a Blocks, called in process) on a real SQLite file."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from app.ui import people_api
from tests.test_people import ADMIN_PW, Box

ROOT = Path(__file__).resolve().parent.parent


def endpoints(box: Box) -> dict[str, Callable[..., Any]]:
    with gr.Blocks() as blocks:
        people_api.register(box.people)
    return {str(f.api_name): f.fn for f in blocks.fns.values() if f.fn is not None}


def test_a_token_sent_from_another_login_is_refused_and_its_session_ended(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    token = box.login(ADMIN_PW)
    box.people.add_person(token, "dora", "dora-pw-1234", "admin", where="test")
    box.people.add_person(token, "bob", "bob-pw-12345", "user", where="test")
    api = endpoints(box)
    doras = box.sessions.login("dora-pw-1234", who="test", client="dora@127.0.0.1", name="dora", login="dora")
    assert api["people"](doras, request=gr.Request(username="dora"))  # her own login: hers to use
    with pytest.raises(gr.Error, match="opened by another login"):
        api["add_person"]("mallory", "mallory-pw-1", "admin", doras, request=gr.Request(username="bob"))
    assert box.store.person("mallory") is None
    with pytest.raises(gr.Error, match="needs the admin session"):
        api["people"](doras, request=gr.Request(username="dora"))  # it got out: ended, for her too
    refused = [(who, detail) for who, action, detail, ok in box.log if action == "admin session" and not ok]
    assert refused and refused[0][0] == "bob" and "dora's session (opened by dora)" in refused[0][1]


def test_without_page_logins_a_session_is_used_as_before(tmp_path: Path) -> None:
    box = Box(tmp_path / "q.db")
    api = endpoints(box)
    token = box.sessions.login(ADMIN_PW, who="test", client="@127.0.0.1", login=None)
    assert api["people"](token, request=gr.Request())
    with pytest.raises(gr.Error, match="opened by another login"):  # a page login using it is someone else
        api["people"](token, request=gr.Request(username="bob"))


def test_every_named_endpoint_that_takes_an_admin_token_is_held_to_its_login() -> None:
    loose = []
    for path in sorted((ROOT / "app/ui").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and "admin_token" in [a.arg for a in node.args.args]:
                held = any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "held" for d in node.decorator_list)
                if not held:
                    loose.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not loose, loose
