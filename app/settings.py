"""Every knob of Quartet, typed, defaulted and described in one place.

Values come from, in order of precedence: keyword arguments, environment variables
(`QUARTET_<NAME>`, lists as JSON), the TOML file named by `QUARTET_CONFIG`, the defaults below.
docs/settings.md is made from this class (python -m tests.settings_doc) and checked by a test.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quartet"
DEMO_MODEL = CACHE_DIR / "models" / "gemma-3-270m-q4_k_m.gguf"
LOCAL_CARDS = [f"127.0.0.1:{port}" for port in range(50052, 50056)]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="QUARTET_", extra="forbid")

    host: str = Field(
        "127.0.0.1",
        description="Address the web app binds; 0.0.0.0 to face the LAN (then `users` and `api_keys` are required).",
    )
    allow_open_lan: bool = Field(
        False, description="Serve a non-loopback address without `users` or `api_keys` (everyone on the LAN gets in)."
    )
    health_public: bool = Field(True, description="/health answers without an API key.")
    metrics_public: bool = Field(False, description="/metrics answers without an API key (when keys are set).")
    port: int = Field(7860, description="Port of the web app (UI and API).")
    users: dict[str, str] = Field(
        default_factory=dict,
        description="Login for the web page: name → password hash (python -m app.auth); empty = no login.",
    )
    max_upload_mb: int = Field(200, ge=1, description="Largest file a browser may upload, in MiB.")
    kb_dir: Path = Field(Path("kb"), description="The watched knowledge-base folder; uploads are saved here.")
    kb_watch: bool = Field(True, description="Watch kb_dir for new, changed and deleted files.")
    doc_timeout_s: float = Field(
        300.0, gt=0, description="A document's reader process (every format) is stopped after this many seconds."
    )
    doc_memory_mb: int = Field(
        1024, ge=128, description="Memory (address space) of a document's reader process, in MiB."
    )
    doc_max_unpacked_mb: float = Field(
        100.0, gt=0, description="A .docx whose text XML unpacks to more than this many MiB is refused (zip bombs)."
    )
    doc_max_pages: int = Field(
        2000,
        ge=1,
        description="Pages read of one document (text: 3,000-character pages); the rest is left out, saying so.",
    )
    doc_max_chunks: int = Field(
        5000, ge=1, description="Passages embedded of one document; the pages after them are left out, saying so."
    )
    large_file_mb: float = Field(
        4.0,
        gt=0,
        description="Files larger than this (MiB) are indexed one at a time in a lane of their own, beside small ones.",
    )
    embed_threads: int = Field(1, ge=1, description="CPU threads of the embedder (the engine needs the rest).")
    embed_max_inputs: int = Field(256, ge=1, description="Most texts one /v1/embeddings request may send.")
    embed_max_chars: int = Field(
        200_000, ge=1, description="Most characters (so at most as many tokens) one /v1/embeddings request may send."
    )
    qa_sources: int = Field(6, ge=1, description="Passages retrieved for a question.")
    data_dir: Path = Field(Path("var"), description="Folder for the SQLite database and logs.")
    cards: list[str] = Field(
        default_factory=lambda: list(LOCAL_CARDS),
        description="RPC endpoints (host:port) of the cards, in pipeline order.",
    )
    card_health_offset: int = Field(
        1000, description="A card's health endpoint listens on its RPC port plus this offset."
    )
    model_path: Path = Field(DEMO_MODEL, description="GGUF file of the model to load at start.")
    models_dir: Path = Field(CACHE_DIR / "models", description="The only folder models may be loaded from.")
    catalog_path: Path = Field(
        Path("assets/models.toml"),
        description="TOML list of the models the admin can switch between (relative: to the app's folder).",
    )
    admin_password_hash: str = Field(
        "", description="Hash of the admin password (python -m app.auth); empty = no admin actions."
    )
    model_name: str = Field("Gemma 3 270M (demo)", description="Display name of the loaded model.")
    n_ctx: int = Field(4096, ge=256, description="Context length in tokens.")
    n_batch: int = Field(512, ge=1, description="Logical batch size for prompt processing.")
    n_ubatch: int = Field(512, ge=1, description="Physical batch size for prompt processing.")
    prompt_chunk: int = Field(128, ge=1, description="Prompt tokens evaluated between two checks for cancellation.")
    n_threads: int = Field(2, ge=1, description="Host CPU threads of the engine.")
    tensor_split: list[float] | None = Field(
        None, description="Share of layers per card; empty for llama's split by free memory."
    )
    split_mode: Literal["layer", "row", "tensor"] = Field(
        "layer", description="How layers are spread across cards; only 'layer' works over RPC."
    )
    engine_isolation: bool = Field(
        True, description="Run llama.cpp in a supervised worker process (a card fault costs one answer)."
    )
    parallel: int = Field(
        4,
        ge=1,
        le=64,
        description="Answers generated at once, batched in one step across the cards; each holds its own "
        "n_ctx of KV cache on the cards. More wait in the queue.",
    )
    kv_cache_mb: int = Field(
        2048,
        ge=0,
        description="Host memory (MiB) for the KV cache of conversations whose slot another prompt took: "
        "saved when the slot is reused, restored when the conversation returns, least recently used out "
        "first; 0 = keep none (a returning conversation's prompt is read again).",
    )
    background_slots: int = Field(
        1,
        ge=1,
        description="Slots that background work (extraction batches, summary parts) may take at once; "
        "people's answers are served first.",
    )
    max_queue: int = Field(32, ge=1, description="Answers that may wait in the queue before new ones are refused.")
    api_keys: list[str] = Field(
        default_factory=list,
        description="Bearer keys for the OpenAI-compatible API under /v1 (and /metrics); empty = open, loopback only.",
    )
    max_tokens: int = Field(512, ge=1, description="Default cap on generated tokens per answer.")
    max_tokens_limit: int = Field(4096, ge=1, description="Hard cap a request may ask for.")
    temperature: float = Field(0.7, ge=0, description="Default sampling temperature.")
    system_prompt: str = Field(
        "You are Quartet, a helpful assistant running on a local appliance.",
        description="Default system prompt of a new chat.",
    )
    card_poll_s: float = Field(1.0, gt=0, description="Seconds between health checks of the cards.")
    card_timeout_s: float = Field(1.0, gt=0, description="Seconds before a card's health check fails.")
    card_step_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds one engine step (a prompt chunk or a token) may take before the card holding it "
        "is declared not responding: the answer fails naming it and the engine restarts when it is back.",
    )
    temp_warning_c: float = Field(85.0, description="Card temperature (°C) at which its panel warns.")
    temp_critical_c: float = Field(
        95.0, description="Card temperature (°C) at which new answers wait until every card cools below the warning."
    )
    card_threads: int = Field(1, ge=1, description="CPU threads of each local card agent.")
    last_card_threads: int = Field(
        2, ge=1, description="CPU threads of the last local card agent, which also computes the output layer."
    )
    card_cache_dir: Path = Field(
        CACHE_DIR / "rpc-cache", description="Tensor cache of local card agents (fast model reloads)."
    )
    sysfs_root: Path = Field(
        Path("/"),
        description="Root under which local card agents read thermal and NPU-load sysfs; {card} = the card's index.",
    )
    extraction_max_tokens: int = Field(
        384, ge=16, description="Hard cap on tokens per extraction answer (constrained JSON can run away)."
    )
    extraction_timeout_s: float = Field(
        120.0, gt=0, description="An extraction answer still running after this many seconds is stopped."
    )
    ui_updates_per_s: float = Field(15.0, gt=0, description="Streaming UI updates per second.")

    @field_validator("cards")
    @classmethod
    def _at_least_one_card(cls, cards: list[str]) -> list[str]:
        if not cards:
            raise ValueError("at least one card endpoint is needed")
        for card in cards:
            host, _, port = card.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"card endpoint {card!r} is not host:port")
        return cards

    @field_validator("api_keys")
    @classmethod
    def _keys_not_blank(cls, keys: list[str]) -> list[str]:
        if any(not key.strip() or key != key.strip() for key in keys):
            raise ValueError("an API key is blank or has spaces around it")
        return keys

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
        config = os.environ.get("QUARTET_CONFIG")
        if config:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config)))
        return tuple(sources)

    def open_lan_problem(self) -> str | None:
        """Why this configuration must not start: it faces the LAN with the pages or /v1 open to all."""
        if self.allow_open_lan or is_loopback(self.host):
            return None
        missing = [name for name, value in (("users", self.users), ("api_keys", self.api_keys)) if not value]
        if not missing:
            return None
        return (
            f"Quartet would listen on {self.host}, reachable from the LAN, without {' and '.join(missing)}: "
            "anyone on the network could use it. Set `users` (python -m app.auth makes a password hash) and "
            "`api_keys` in the settings file (QUARTET_CONFIG) or the environment (QUARTET_USERS, QUARTET_API_KEYS); "
            "or set allow_open_lan = true if an open appliance is what you mean."
        )

    @property
    def db_path(self) -> Path:
        return self.data_dir / "quartet.db"

    def health_url(self, card: str) -> str:
        host, _, port = card.rpartition(":")
        return f"http://{host}:{int(port) + self.card_health_offset}/health"


def is_loopback(host: str) -> bool:
    """True for a loopback address or `localhost`; any other name or address may face the LAN."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
