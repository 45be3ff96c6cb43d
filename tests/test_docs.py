"""The documentation in the repository: docs/settings.md matches the settings, the README links the docs,
and nothing in the product points at a folder outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from app.settings import Settings, env_name, leaves
from tests.settings_doc import SETTINGS_MD, default, render, shown

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
OUTSIDE = re.compile(r"\.\./shared|/work/shared|shared/corpus|DESIGN\.md fact", re.IGNORECASE)


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in SETTINGS_MD.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `([a-z_.]+)` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split(" | ")]
    return rows


def test_docs_settings_is_made_from_the_settings() -> None:
    assert SETTINGS_MD.read_text(encoding="utf-8") == render(), (
        "docs/settings.md is out of date: run `.venv/bin/python -m tests.settings_doc` and commit it"
    )


def test_every_setting_is_in_the_settings_table() -> None:
    rows = _rows()
    fields = dict(leaves())
    assert len(fields) > 60, "the settings' sections were not walked"
    assert set(rows) == set(fields), f"undocumented: {set(fields) - set(rows)}; stale: {set(rows) - set(fields)}"
    for name, field in fields.items():
        env, documented, description = rows[name]
        assert env == f"`{env_name(name)}`"
        assert env == "`QUARTET_" + name.upper().replace(".", "__") + "`"
        assert documented == f"`{shown(default(field))}`", f"{name}: docs/settings.md says {documented}"
        assert description == field.description


def test_the_readme_is_a_short_guide_that_links_the_docs() -> None:
    assert len(README) < 6000, f"the README has {len(README)} characters: details belong in docs/"
    for name in ("using.md", "design.md", "api.md", "operations.md", "settings.md", "benchmarks.md"):
        assert (ROOT / "docs" / name).is_file() and f"docs/{name}" in README, name
    assert "make run" in README and "make test" in README


def test_nothing_outside_the_tests_points_outside_the_repository() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert tracked, "git ls-files listed nothing"
    found = []
    for name in tracked.splitlines():
        path = ROOT / name
        if name.startswith("tests/") or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{name}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not found, "the product points outside the repository:\n" + "\n".join(found)


def test_settings_come_from_environment_and_toml(tmp_path: Path, monkeypatch: object) -> None:
    config = tmp_path / "quartet.toml"
    config.write_text('[engine]\nn_ctx = 8192\ncards = ["10.0.0.2:50052"]\n')
    monkeypatch.setenv("QUARTET_CONFIG", str(config))  # type: ignore[attr-defined]
    monkeypatch.setenv("QUARTET_WEB__PORT", "9999")  # type: ignore[attr-defined]
    settings = Settings()
    assert (settings.engine.n_ctx, settings.engine.cards, settings.web.port) == (8192, ("10.0.0.2:50052",), 9999)
    assert settings.health_url("10.0.0.2:50052") == "http://10.0.0.2:51052/health"
