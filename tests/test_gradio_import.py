"""Gradio imported without its type-stub writer (app/gradio_import.py): the installed Gradio still has the
function the hook replaces, the hook replaces it when it comes first, says when it came too late, and Gradio
builds and serves a page without it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness import ROOT

pytestmark = pytest.mark.slow  # each test imports Gradio in a process of its own (2-4 s)


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_installed_gradio_still_writes_stubs_from_the_function_the_hook_replaces() -> None:
    code = """
import sys, inspect
import gradio.component_meta as meta
source = inspect.getsource(meta.ComponentMeta.__new__)
print(callable(getattr(meta, "create_or_modify_pyi", None)), "create_or_modify_pyi(" in source)
"""
    assert run(code).split() == ["True", "True"], "Gradio no longer calls create_or_modify_pyi: review the hook"


def test_the_hook_first_replaces_the_writer_and_gradio_still_builds_and_serves_a_page() -> None:
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from app.gradio_import import skip_stub_writer
assert skip_stub_writer() is True
calls = []
import gradio.component_meta as meta
print("replaced", meta.create_or_modify_pyi.__module__)
import gradio as gr
from fastapi.testclient import TestClient
import fastapi
with gr.Blocks() as page:
    box = gr.Textbox(label="Name", elem_id="name")
    out = gr.Markdown()
    box.submit(lambda t: "Hello " + t, box, out)
api = gr.mount_gradio_app(fastapi.FastAPI(), page, path="/", ssr_mode=False)
config = TestClient(api).get("/config").json()
print("components", sorted(c["type"] for c in config["components"] if c["type"] in ("textbox", "markdown")))
print("again", skip_stub_writer())
"""
    out = run(code)
    assert "replaced app.gradio_import" in out, out
    assert "components ['markdown', 'textbox']" in out, out
    assert "again True" in out, out


def test_the_hook_says_when_gradio_came_first() -> None:
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import gradio
from app.gradio_import import skip_stub_writer
print(skip_stub_writer())
"""
    assert run(code).split() == ["False"]
