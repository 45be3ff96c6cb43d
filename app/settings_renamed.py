"""The flat setting names of before the sections, and where each one went.

An old name is not read quietly in its new place, nor ignored: the app refuses to start and says what to
write instead, so that an appliance upgraded with its old quartet.env or TOML file does not run on defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_PREFIX = "QUARTET_"

RENAMED = {
    "host": "web.host",
    "port": "web.port",
    "allow_open_lan": "web.allow_open_lan",
    "health_public": "web.health_public",
    "metrics_public": "web.metrics_public",
    "users": "web.users",
    "api_keys": "web.api_keys",
    "admin_password_hash": "web.admin_password_hash",
    "embed_max_inputs": "web.embed_max_inputs",
    "embed_max_chars": "web.embed_max_chars",
    "system_prompt": "web.system_prompt",
    "ui_updates_per_s": "web.ui_updates_per_s",
    "max_upload_mb": "knowledge.max_file_mb",
    "kb_dir": "knowledge.dir",
    "kb_watch": "knowledge.watch",
    "doc_timeout_s": "knowledge.read_timeout_s",
    "doc_memory_mb": "knowledge.read_memory_mb",
    "doc_max_unpacked_mb": "knowledge.max_unpacked_mb",
    "doc_max_pages": "knowledge.max_pages",
    "doc_max_chunks": "knowledge.max_chunks",
    "large_file_mb": "knowledge.large_file_mb",
    "embed_threads": "knowledge.embed_threads",
    "qa_sources": "knowledge.sources",
    "cards": "engine.cards",
    "card_health_offset": "engine.health_offset",
    "model_path": "engine.model_path",
    "models_dir": "engine.models_dir",
    "catalog_path": "engine.catalog_path",
    "model_name": "engine.model_name",
    "n_ctx": "engine.n_ctx",
    "n_batch": "engine.n_batch",
    "n_ubatch": "engine.n_ubatch",
    "prompt_chunk": "engine.prompt_chunk",
    "n_threads": "engine.n_threads",
    "tensor_split": "engine.tensor_split",
    "split_mode": "engine.split_mode",
    "engine_isolation": "engine.isolation",
    "parallel": "engine.parallel",
    "kv_cache_mb": "engine.kv_cache_mb",
    "background_slots": "engine.background_slots",
    "max_queue": "engine.max_queue",
    "max_tokens": "engine.max_tokens",
    "max_tokens_limit": "engine.max_tokens_limit",
    "temperature": "engine.temperature",
    "card_step_timeout_s": "engine.step_timeout_s",
    "card_poll_s": "telemetry.poll_s",
    "card_timeout_s": "telemetry.timeout_s",
    "temp_warning_c": "telemetry.warning_c",
    "temp_critical_c": "telemetry.critical_c",
    "card_threads": "local_cards.threads",
    "last_card_threads": "local_cards.last_threads",
    "card_cache_dir": "local_cards.cache_dir",
    "sysfs_root": "local_cards.sysfs_root",
    "extraction_max_tokens": "extraction.max_tokens",
    "extraction_timeout_s": "extraction.timeout_s",
}


def _where(dotted: str) -> str:
    section, _, name = dotted.partition(".")
    return f"`{name}` under [{section}]"


def moved_keys(data: Mapping[str, Any]) -> list[str]:
    """For each old flat key in a settings file or the keyword arguments: where it belongs now."""
    return [f"`{key}` is now {_where(RENAMED[key])}" for key in data if key in RENAMED]


def renamed_variables(environ: Mapping[str, str]) -> list[str]:
    """For each old environment variable that is set: its new name."""
    found = []
    for old, new in RENAMED.items():
        if _PREFIX + old.upper() in environ:
            section, _, name = new.partition(".")
            found.append(f"{_PREFIX}{old.upper()} is now {_PREFIX}{section.upper()}__{name.upper()}")
    return found
