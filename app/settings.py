"""Every knob of Quartet, typed, defaulted and described in one place, in sections by area.

Values come from, in order of precedence: keyword arguments, environment variables (`QUARTET_DATA_DIR`,
`QUARTET_<SECTION>__<NAME>` such as `QUARTET_ENGINE__PARALLEL`; lists and tables as JSON), the TOML file
named by `QUARTET_CONFIG` (`[engine]`, `[web]`, … tables), what the admin page changed
(`data_dir/admin-settings.toml`, app/page_settings.py), the defaults below. A section's type is the
type its feature is built from: `engine` is the engine's own `EngineConfig`, `knowledge` extends the
knowledge base's `KnowledgeOptions`. docs/settings.md is made from this (python -m tests.settings_doc)
and checked by a test.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from app import page_settings
from app.backup import Places
from app.endpoint import Endpoint
from app.engine.engine_config import CACHE_DIR, DEMO_MODEL, EngineConfig
from app.knowledge.options import KnowledgeOptions
from app.settings_renamed import moved_keys, renamed_variables

__all__ = ["CACHE_DIR", "DEMO_MODEL", "Settings", "SettingsInvalid", "env_name", "is_loopback", "leaves", "load"]
PREFIX = "QUARTET_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WebSettings(_Section):
    host: str = Field(
        "127.0.0.1",
        description="Address the web app binds; 0.0.0.0 to face the LAN (then `users` and `api_keys` are required).",
    )
    port: int = Field(7860, ge=1, le=65535, description="Port of the web app (UI and API).")
    allow_open_lan: bool = Field(
        False, description="Serve a non-loopback address without `users` or `api_keys` (everyone on the LAN gets in)."
    )
    users: dict[str, str] = Field(
        default_factory=dict,
        description="Login for the web page: name → password hash (python -m app.auth); empty = no login.",
    )
    api_keys: list[str] = Field(
        default_factory=list,
        description="Bearer keys for the OpenAI-compatible API under /v1 (and /metrics); empty = open, loopback only.",
    )
    admin_password_hash: str = Field(
        "", description="Hash of the admin password (python -m app.auth); empty = no admin actions."
    )
    health_public: bool = Field(True, description="/health answers without an API key.")
    metrics_public: bool = Field(False, description="/metrics answers without an API key (when keys are set).")
    max_body_mb: int = Field(
        16, ge=1, description="Largest /v1 request body in MiB; a larger one gets a 413 before it is read."
    )
    embed_max_inputs: int = Field(256, ge=1, description="Most texts one /v1/embeddings request may send.")
    embed_max_chars: int = Field(
        200_000, ge=1, description="Most characters (so at most as many tokens) one /v1/embeddings request may send."
    )
    api_default_max_tokens: int = Field(
        0,
        ge=0,
        description="Tokens a /v1 answer may run to when its request sends no max_tokens (OpenAI's default: what "
        "the context leaves). 0 = the context left after the prompt, up to engine.max_tokens_limit; set a number "
        "to bound such answers lower. The page's own chat keeps engine.max_tokens.",
    )
    system_prompt: str = Field(
        "You are Quartet, a helpful assistant running on a local appliance.",
        description="Default system prompt of a new chat.",
    )
    ui_updates_per_s: float = Field(15.0, gt=0, description="Streaming UI updates per second.")

    @field_validator("api_keys")
    @classmethod
    def _keys_not_blank(cls, keys: list[str]) -> list[str]:
        if any(not key.strip() or key != key.strip() for key in keys):
            raise ValueError("an API key is blank or has spaces around it")
        return keys


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class KnowledgeSettings(KnowledgeOptions):
    dir: Path = Field(default=Path("kb"), description="The watched knowledge-base folder; uploads are saved here.")
    embed_threads: int = Field(default=1, ge=1, description="CPU threads of the embedder (the engine needs the rest).")
    sources: int = Field(default=6, ge=1, description="Passages retrieved for a question.")
    summary_notes_tokens: int = Field(default=160, ge=16, description="Read it all: tokens of each part's notes.")
    summary_answer_tokens: int = Field(default=400, ge=16, description="Read it all: tokens of the answer.")
    temperature: float = Field(
        default=0.2, ge=0, le=2, description="Document answers and read it all: sampling temperature (0: greedy)."
    )


class ExtractionSettings(_Section):
    max_tokens: int = Field(
        384, ge=16, description="Hard cap on tokens per extraction answer (constrained JSON can run away)."
    )
    timeout_s: float = Field(
        120.0, gt=0, description="An extraction answer still running after this many seconds is stopped."
    )


class TelemetrySettings(_Section):
    poll_s: float = Field(1.0, gt=0, description="Seconds between health checks of the cards.")
    timeout_s: float = Field(1.0, gt=0, description="Seconds before a card's health check fails.")
    warning_c: float = Field(85.0, description="Card temperature (°C) at which its panel warns.")
    critical_c: float = Field(
        95.0, description="Card temperature (°C) at which new answers wait until every card cools below the warning."
    )


class LocalCardsSettings(_Section):
    threads: int = Field(1, ge=1, description="CPU threads of each local card agent.")
    last_threads: int = Field(
        2, ge=1, description="CPU threads of the last local card agent, which also computes the output layer."
    )
    cache_dir: Path = Field(
        CACHE_DIR / "rpc-cache", description="Tensor cache of local card agents (fast model reloads)."
    )
    sysfs_root: Path = Field(
        Path("/"),
        description="Root under which local card agents read thermal and NPU-load sysfs; {card} = the card's index.",
    )


class BackupSettings(_Section):
    dir: Path | None = Field(
        None, description="Folder for scheduled backups (a USB disk mounted on the box); unset = none scheduled."
    )
    every_h: float = Field(24.0, gt=0, description="Hours between scheduled backups (the first one after that long).")
    keep: int = Field(7, ge=1, description="Scheduled backups kept in `dir`; older ones are deleted.")
    max_upload_mb: int = Field(
        8192,
        ge=1,
        description="Largest backup the admin page takes for a restore (MiB); documents' own limit is lower.",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, env_nested_delimiter="__", extra="forbid")

    data_dir: Path = Field(
        Path("var"), description="Folder for the SQLite database, logs and `browser-secret` (back them up together)."
    )
    web: WebSettings = Field(default_factory=WebSettings, description="The web app: address, logins, keys, pages.")
    engine: EngineConfig = Field(
        default_factory=EngineConfig, description="The model, the cards and llama.cpp's knobs; the answer queue."
    )
    knowledge: KnowledgeSettings = Field(
        default_factory=KnowledgeSettings, description="The knowledge base: its folder, readers, passages, search."
    )
    extraction: ExtractionSettings = Field(
        default_factory=ExtractionSettings, description="Structured extraction's limits per answer."
    )
    telemetry: TelemetrySettings = Field(
        default_factory=TelemetrySettings, description="Card health checks and temperatures."
    )
    backup: BackupSettings = Field(
        default_factory=BackupSettings, description="Scheduled backups (the admin page downloads and restores them)."
    )
    local_cards: LocalCardsSettings = Field(
        default_factory=LocalCardsSettings, description="The card agents `python -m launcher` starts on this machine."
    )

    @model_validator(mode="before")
    @classmethod
    def _no_flat_names(cls, data: Any) -> Any:
        moved = moved_keys(data) if isinstance(data, dict) else []
        if moved:
            raise ValueError("; ".join(moved))
        return data

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config = os.environ.get(f"{PREFIX}CONFIG")
        if config:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config)))
        data_dir = _data_dir(getattr(init_settings, "init_kwargs", {}), Path(config) if config else None)
        page = page_settings.path(data_dir)
        if page.is_file():  # what the admin page changed: below everything the installer set
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=page))
        return tuple(sources)

    def open_lan_problem(self, *, people: bool = False, keys: bool = False) -> str | None:
        """Why this configuration must not start: it faces the LAN with the pages or /v1 open to all.
        `people`, `keys`: whether the admin page has made some (they count as `users`, `api_keys`)."""
        web = self.web
        if web.allow_open_lan or is_loopback(web.host):
            return None
        given = (("users", web.users or people), ("api_keys", web.api_keys or keys))
        missing = [name for name, value in given if not value]
        if not missing:
            return None
        return (
            f"Quartet would listen on {web.host}, reachable from the LAN, without {' and '.join(missing)}: "
            "anyone on the network could use it. Set `users` (python -m app.auth makes a password hash) and "
            "`api_keys` in the [web] section of the settings file (QUARTET_CONFIG) or the environment "
            "(QUARTET_WEB__USERS, QUARTET_WEB__API_KEYS), or add people and API keys on the admin page while "
            "it listens on loopback; or set allow_open_lan = true under [web] if an open "
            "appliance is what you mean."
        )

    @property
    def db_path(self) -> Path:
        return self.data_dir / "quartet.db"

    @property
    def places(self) -> Places:
        """Where the state a backup holds lives."""
        return Places(self.data_dir, self.db_path, self.knowledge.dir, page_settings.path(self.data_dir))

    def api_max_tokens(self) -> int:
        """The budget of a /v1 answer whose request names none: the engine ends it sooner where the context
        left after its prompt is smaller (app/engine/llama/batcher.py; an upstream ends it at its context)."""
        limit = self.engine.max_tokens_limit
        return min(self.web.api_default_max_tokens or limit, limit)

    def health_url(self, card: str) -> str:
        return Endpoint.parse(card).health_url(self.engine.health_offset)


def _data_dir(init: dict[str, Any], config: Path | None) -> Path:
    """The data folder as the sources above the page's settings file set it (that file lives in it)."""
    if "data_dir" in init:
        return Path(init["data_dir"])
    if f"{PREFIX}DATA_DIR" in os.environ:
        return Path(os.environ[f"{PREFIX}DATA_DIR"])
    if config is not None and config.is_file():
        with config.open("rb") as f:
            found = tomllib.load(f).get("data_dir")
        if found:
            return Path(found)
    return Path(Settings.model_fields["data_dir"].default)


class SettingsInvalid(ValueError):
    """The settings cannot be used; the message names each wrong setting, where it is set, and why."""


def load() -> Settings:
    """The settings from the environment and QUARTET_CONFIG, or SettingsInvalid saying what to fix."""
    problems = renamed_variables(os.environ)
    config = os.environ.get(f"{PREFIX}CONFIG")
    if config and not Path(config).is_file():
        raise SettingsInvalid(f"the settings file {config} (QUARTET_CONFIG) does not exist")
    if problems:
        raise SettingsInvalid("these settings have new names:\n  " + "\n  ".join(problems))
    try:
        return Settings()
    except ValidationError as err:
        lines = [_problem(error) for error in err.errors()]
        raise SettingsInvalid("the settings are not valid:\n  " + "\n  ".join(lines)) from None
    except (OSError, ValueError) as err:  # an unreadable or malformed TOML file
        raise SettingsInvalid(f"the settings file {os.environ.get(f'{PREFIX}CONFIG')} cannot be read: {err}") from None


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"] if not isinstance(part, int))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where} ({env_name(where)}): {message}" if where else message


def env_name(dotted: str) -> str:
    """The environment variable of a setting: `engine.n_ctx` → `QUARTET_ENGINE__N_CTX`."""
    return PREFIX + "__".join(part.upper() for part in dotted.split("."))


def leaves() -> Iterator[tuple[str, FieldInfo]]:
    """Every setting as (`section.name` or `name`, its field), in declaration order."""
    for name, field in Settings.model_fields.items():
        section = _fields(field.annotation)
        if section is None:
            yield name, field
        else:
            yield from ((f"{name}.{inner}", info) for inner, info in section.items())


def _fields(annotation: Any) -> dict[str, FieldInfo] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.model_fields
    fields: dict[str, FieldInfo] | None = getattr(annotation, "__pydantic_fields__", None)
    return fields


def is_loopback(host: str) -> bool:
    """True for a loopback address or `localhost`; any other name or address may face the LAN."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
