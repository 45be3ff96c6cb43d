"""Settings made on the admin page last: kept in data_dir/admin-settings.toml, below the environment and
QUARTET_CONFIG, and the page says where each value comes from."""

from __future__ import annotations

from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

from app import page_settings
from app.engine.engine_config import N_CTX
from app.settings import Settings
from tests.gradio_api import Client
from tests.harness import Appliance
from tests.test_admin import login


def test_precedence_is_environment_then_settings_file_then_page_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "var"
    for name in ("QUARTET_ENGINE__N_BATCH", "QUARTET_ENGINE__N_THREADS", "QUARTET_ENGINE__N_UBATCH", "QUARTET_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QUARTET_DATA_DIR", str(data))
    page_settings.save_engine(page_settings.path(data), {"n_batch": 256, "n_threads": 3, "n_ubatch": 128})
    config = tmp_path / "quartet.toml"
    config.write_text("[engine]\nn_threads = 4\n")
    monkeypatch.setenv("QUARTET_CONFIG", str(config))
    monkeypatch.setenv("QUARTET_ENGINE__N_UBATCH", "64")
    engine = Settings().engine
    assert (engine.n_batch, engine.n_threads, engine.n_ubatch, engine.n_ctx) == (256, 4, 64, N_CTX)
    said = page_settings.origins(data, ["n_batch", "n_threads", "n_ubatch", "n_ctx"])
    assert said["n_batch"] == f"this page ({data / 'admin-settings.toml'})"
    assert said["n_threads"] == f"the settings file {config}, which overrides the value set on this page"
    assert said["n_ubatch"] == "the environment (QUARTET_ENGINE__N_UBATCH), which overrides the value set on this page"
    assert said["n_ctx"] == "the default"


def settings_now(c: Client, token: str) -> dict[str, object]:
    found: dict[str, object] = c.predict(token, api_name="/engine_settings_now")
    return found


def test_an_engine_setting_changed_on_the_page_is_in_force_after_a_restart(appliance: Appliance) -> None:
    c = Client(appliance.url, verbose=False)
    token = login(c)
    with pytest.raises(AppError, match="admin session"):
        c.predict("forged", api_name="/engine_settings_now")
    original = settings_now(c, token)["n_batch"]
    changed = 256 if original != 256 else 384
    try:
        c.predict({"n_batch": changed}, token, api_name="/engine_settings")
        now = settings_now(c, token)
        assert now["n_batch"] == changed
        assert str(now["sources"]["n_batch"]).startswith("this page")  # type: ignore[index]
        # the environment names the cards (an earlier test's card change may be on this page too, overridden)
        assert str(now["sources"]["cards"]).startswith("the environment (QUARTET_ENGINE__CARDS)")  # type: ignore[index]
        appliance.restart()
        c = Client(appliance.url, verbose=False)
        token = login(c)
        after = settings_now(c, token)
        assert after["n_batch"] == changed, after
        assert str(after["sources"]["n_batch"]).startswith("this page")  # type: ignore[index]
    finally:  # the appliance is shared: its original setting back
        c = Client(appliance.url, verbose=False)
        c.predict({"n_batch": original}, login(c), api_name="/engine_settings")
