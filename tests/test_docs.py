"""Every setting is documented in the README's table, with its variable, default and description."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.settings import Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in README.splitlines():
        match = re.match(r"\| `([a-z_]+)` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split(" | ")]
    return rows


def _shown(value: object) -> str:
    if isinstance(value, Path):
        return str(value).replace(str(Path.home()), "~")
    if isinstance(value, list):
        return json.dumps(value)
    return str(value)


def test_every_setting_is_in_the_readme_table() -> None:
    rows = _rows()
    fields = Settings.model_fields
    assert set(rows) == set(fields), f"undocumented: {set(fields) - set(rows)}; stale: {set(rows) - set(fields)}"
    for name, field in fields.items():
        env, default, description = rows[name]
        assert env == f"`QUARTET_{name.upper()}`"
        value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
        assert default == f"`{_shown(value)}`", f"{name}: README says {default}"
        assert description == field.description


def test_settings_come_from_environment_and_toml(tmp_path: Path, monkeypatch: object) -> None:
    config = tmp_path / "quartet.toml"
    config.write_text('n_ctx = 8192\ncards = ["10.0.0.2:50052"]\n')
    monkeypatch.setenv("QUARTET_CONFIG", str(config))  # type: ignore[attr-defined]
    monkeypatch.setenv("QUARTET_PORT", "9999")  # type: ignore[attr-defined]
    settings = Settings()
    assert (settings.n_ctx, settings.cards, settings.port) == (8192, ["10.0.0.2:50052"], 9999)
    assert settings.health_url("10.0.0.2:50052") == "http://10.0.0.2:51052/health"
