"""Gradio imported without its type-stub writer.

Every `import gradio` defines its ~40 components, and for each one Gradio's `ComponentMeta` calls
`create_or_modify_pyi`: it reads the component's source file and its `.pyi` beside it in site-packages, parses
both with `ast`, and rewrites the stub if they differ. Those stubs are for Gradio's own developers' editors;
nothing in a running app reads them, and they cost ~2.3 s of CPU at every start of the app (a py-spy profile of
the app's start: 227 of 1,053 samples) and of every process that imports Gradio (bench/gradio_import.py).

`skip_stub_writer()` adds an import hook that, once `gradio.component_meta` is loaded, replaces that one
function with one that does nothing. It must run before the first `import gradio` of the process (it says
whether it came in time); `app/__main__.py` calls it first thing, as does the suite's conftest.
`tests/test_gradio_import.py` holds that the installed Gradio still has the function and still works without it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

TARGET = "gradio.component_meta"
STUB_WRITER = "create_or_modify_pyi"


def _no_stubs(*_args: Any, **_kwargs: Any) -> None:
    return None


class _SkipStubWriter(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            if hasattr(module, STUB_WRITER):
                setattr(module, STUB_WRITER, _no_stubs)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def skip_stub_writer() -> bool:
    """Installs the hook; False if Gradio was already imported in this process (too late to spare the work)."""
    if TARGET in sys.modules:
        return getattr(sys.modules[TARGET], STUB_WRITER, None) is _no_stubs
    if not any(isinstance(finder, _SkipStubWriter) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SkipStubWriter())
    return True
