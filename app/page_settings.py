"""The settings the admin page changes, kept across restarts in `data_dir/admin-settings.toml`, a file
the app owns (an `[engine]` table; written whole and renamed into place, never half-written).

Precedence, highest first: the environment (`QUARTET_ENGINE__…`), the file named by `QUARTET_CONFIG`,
this file, the defaults. So a value the person who installed the box pinned stays pinned; the page says
where each value comes from, and when a value set on the page is overridden by one above it.
No key or password is ever written here (`upstream_key` is left out).
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from app.engine.engine_config import EngineConfig

NAME = "admin-settings.toml"
_NEVER = {"upstream_key"}  # a secret stays where the installer put it


def path(data_dir: Path) -> Path:
    return data_dir / NAME


def read(file: Path) -> dict[str, Any]:
    """The file's tables ({} when there is none yet)."""
    if not file.is_file():
        return {}
    with file.open("rb") as f:
        return tomllib.load(f)


def changed(before: EngineConfig, after: EngineConfig) -> dict[str, Any]:
    """The engine fields `after` changed, as TOML values (None: the field went back to unset)."""
    out: dict[str, Any] = {}
    for field in fields(EngineConfig):
        old, new = getattr(before, field.name), getattr(after, field.name)
        if field.name not in _NEVER and old != new:
            out[field.name] = _plain(new)
    return out


def save_engine(file: Path, changes: dict[str, Any]) -> None:
    """Merge `changes` into the file's `[engine]` table (a None value removes its key)."""
    if not changes:
        return
    tables = read(file)
    engine = tables.setdefault("engine", {})
    for name, value in changes.items():
        if value is None:
            engine.pop(name, None)
        else:
            engine[name] = value
    lines = ["# Written by Quartet's admin page; read after the file in QUARTET_CONFIG and the environment."]
    for table, values in tables.items():
        lines.append(f"\n[{table}]")
        lines += [f"{key} = {_toml(value)}" for key, value in values.items()]
    file.parent.mkdir(parents=True, exist_ok=True)
    partial = file.with_suffix(".partial")
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(partial, file)


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML basic string


def origins(data_dir: Path, names: list[str]) -> dict[str, str]:
    """Where each engine setting's value comes from, for the page."""
    config = os.environ.get("QUARTET_CONFIG")
    installed = read(Path(config)).get("engine", {}) if config and Path(config).is_file() else {}
    page = read(path(data_dir)).get("engine", {})
    out = {}
    for name in names:
        variable = f"QUARTET_ENGINE__{name.upper()}"
        if variable in os.environ:
            where = f"the environment ({variable})"
        elif name in installed:
            where = f"the settings file {config}"
        else:
            where = f"this page ({path(data_dir)})" if name in page else "the default"
        if name in page and not where.startswith("this page"):
            where += ", which overrides the value set on this page"
        out[name] = where
    return out
