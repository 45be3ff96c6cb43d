"""docs/settings.md, made from app/settings.py: `python -m tests.settings_doc` writes it again.

tests/test_docs.py checks that the file in the repository is exactly what this makes, so a setting added,
renamed or re-described without running this fails the tests with the command to run.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.settings import Settings

SETTINGS_MD = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
HEADER = """# Settings

Every setting has a default. Set it as an environment variable (`QUARTET_<NAME>`, lists and tables as
JSON) or in the TOML file named by `QUARTET_CONFIG`; an environment variable wins over the file. See
[operations.md](operations.md) for a real appliance's settings.

<!-- Made from app/settings.py by `python -m tests.settings_doc`; tests/test_docs.py checks it. -->

| Setting | Environment variable | Default | What it does |
|---|---|---|---|
"""


def shown(value: object) -> str:
    """A default as the table shows it: paths under the home folder with ~, lists as JSON."""
    if isinstance(value, Path):
        return str(value).replace(str(Path.home()), "~")
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render() -> str:
    rows = []
    for name, field in Settings.model_fields.items():
        value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | `QUARTET_{name.upper()}` | `{shown(value)}` | {description} |")
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    SETTINGS_MD.write_text(render(), encoding="utf-8")
    print(f"wrote {SETTINGS_MD} ({len(Settings.model_fields)} settings)")
