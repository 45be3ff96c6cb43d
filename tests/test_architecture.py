"""The house rules that keep the codebase livable, checked on the source itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each heavy dependency enters in one place.
ALLOWED = {
    "llama_cpp": ("app/engine/llama/",),  # the four-card backend alone: the core and the upstream never see it
    "ctypes": ("app/engine/llama/", "app/engine/lifecycle.py", "app/heap.py"),
    "gradio": ("app/ui/", "app/server.py"),
    "sentence_transformers": ("app/knowledge/embedder.py",),
    "pypdf": ("app/knowledge/loaders",),
    "pypdfium2": ("app/knowledge/loaders/scans.py",),
    "pytesseract": ("app/knowledge/loaders/ocr.py",),  # the OCR engine (bench/ocr.py chose it)
    "tiktoken": ("app/api/token_ids.py",),  # cl100k_base ids sent to /v1/embeddings, decoded
}


def python_files() -> list[Path]:
    return sorted(p for top in ("app", "launcher") for p in (ROOT / top).rglob("*.py"))


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.slow
def test_heavy_dependencies_enter_in_one_place() -> None:
    wrong = []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        for name, places in ALLOWED.items():
            if name in imported(path) and not rel.startswith(places):
                wrong.append(f"{rel} imports {name}")
    assert not wrong, wrong


@pytest.mark.slow
def test_importing_any_module_starts_nothing(tmp_path: Path) -> None:
    """In a fresh interpreter, in an empty folder: import everything, then no thread, no file."""
    script = (
        "import importlib, pkgutil, threading, app, launcher\n"
        "for package in (app, launcher):\n"
        "    for m in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        if not m.name.endswith('__main__'):\n"
        "            importlib.import_module(m.name)\n"
        "print(threading.active_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1", "a module started a thread at import"
    assert list(tmp_path.iterdir()) == [], "a module created files at import"


def test_modules_stay_small() -> None:
    big = [f"{p.relative_to(ROOT)}: {n}" for p in python_files() if (n := len(p.read_text().splitlines())) > 320]
    assert not big, big


def test_tabs_do_not_import_each_other() -> None:
    tabs = {p.stem for p in (ROOT / "app/ui").glob("*_tab.py")}
    for path in (ROOT / "app/ui").glob("*_tab.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("app.ui."):
                assert node.module.split(".")[-1] not in tabs, f"{path.name} imports {node.module}"
