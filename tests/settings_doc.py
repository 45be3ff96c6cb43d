"""docs/settings.md, made from app/settings.py: `python -m tests.settings_doc` writes it again.

tests/test_docs.py checks that the file in the repository is exactly what this makes, so a setting added,
renamed or re-described without running this fails the tests with the command to run.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic.fields import FieldInfo

from app.settings import Settings, env_name, leaves

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_MD = ROOT / "docs" / "settings.md"
HEADER = """# Settings

Every setting has a default. Set it in the TOML file named by `QUARTET_CONFIG`, in its section's table
(`[engine]`, `[web]`, …), or as an environment variable: `QUARTET_<SECTION>__<NAME>` (two underscores
between section and name, such as `QUARTET_ENGINE__PARALLEL=2`), lists and tables as JSON. An environment
variable wins over the file. What the admin page changes (the model, engine settings, cards) is kept in
`data_dir/admin-settings.toml`, below both: the page says where each value comes from. The flat names of
earlier versions (`QUARTET_PARALLEL`, `n_ctx` at the top of the file) are refused with their new name.
See [operations.md](operations.md) for a real appliance's settings; the card agent's own flags are in
`python -m launcher.card_agent --help`.

<!-- Made from app/settings.py by `python -m tests.settings_doc`; tests/test_docs.py checks it. -->
"""
TABLE = "| Setting | Environment variable | Default | What it does |\n|---|---|---|---|\n"


def default(field: FieldInfo) -> object:
    return field.get_default(call_default_factory=True)


def shown(value: object) -> str:
    """A default as the table shows it: paths under the home folder with ~ (in the checkout: relative to
    it), lists and tuples as JSON."""
    if isinstance(value, Path):
        if value.is_relative_to(ROOT):
            return str(value.relative_to(ROOT))
        return str(value).replace(str(Path.home()), "~")
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def row(name: str, field: FieldInfo) -> str:
    description = (field.description or "").replace("|", "\\|")
    return f"| `{name}` | `{env_name(name)}` | `{shown(default(field))}` | {description} |"


def render() -> str:
    parts = [HEADER]
    top = [row(name, field) for name, field in leaves() if "." not in name]
    parts.append("\n## At the top of the file\n\n" + TABLE + "\n".join(top) + "\n")
    for section, field in Settings.model_fields.items():
        rows = [row(name, info) for name, info in leaves() if name.startswith(f"{section}.")]
        if rows:
            parts.append(f"\n## [{section}]\n\n{field.description}\n\n" + TABLE + "\n".join(rows) + "\n")
    return "".join(parts)


if __name__ == "__main__":
    SETTINGS_MD.write_text(render(), encoding="utf-8")
    print(f"wrote {SETTINGS_MD} ({len(list(leaves()))} settings)")
