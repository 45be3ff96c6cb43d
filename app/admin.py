"""Admin actions: a password-gated session, the model catalog with its fit check, model switching and
engine settings — every action checked here on the server and written to the admin log in SQLite."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import sqlite_utils

from app.auth import verify_password
from app.database import Locked, Migration, migrate, now
from app.engine import catalog
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError, ModelInfo
from app.engine.service import EngineService
from app.settings import Settings
from app.telemetry.service import Telemetry

APP_ROOT = Path(__file__).resolve().parent.parent
_SESSION_S = 8 * 3600


class AdminDenied(PermissionError):
    pass


def _m001_admin_log(db: sqlite_utils.Database) -> None:
    db.table("admin_log").create({"id": int, "at": str, "who": str, "action": str, "detail": str, "ok": int}, pk="id")


MIGRATIONS: list[Migration] = [("001_admin_log", _m001_admin_log)]


class AdminService:
    def __init__(self, *, database: Locked, engine: EngineService, telemetry: Telemetry, settings: Settings) -> None:
        self._db, self._lock = database.db, database.lock
        self.engine, self.telemetry, self.settings = engine, telemetry, settings
        self._sessions: dict[str, float] = {}
        self._sessions_lock = threading.Lock()
        with self._lock:
            migrate(self._db, "admin", MIGRATIONS)

    # -- sessions ---------------------------------------------------------------------------

    def login(self, password: str, *, who: str) -> str:
        stored = self.settings.admin_password_hash
        if not stored:
            self.record(who, "login", "refused: no admin password is configured", ok=False)
            raise AdminDenied("no admin password is configured (set admin_password_hash; python -m app.auth)")
        if not verify_password(password, stored):
            self.record(who, "login", "refused: wrong password", ok=False)
            raise AdminDenied("wrong admin password")
        token = secrets.token_urlsafe(24)
        with self._sessions_lock:
            self._sessions[token] = time.monotonic() + _SESSION_S
        self.record(who, "login", "admin session opened")
        return token

    def check(self, token: str | None) -> None:
        with self._sessions_lock:
            expires = self._sessions.get(token or "")
        if expires is None or expires < time.monotonic():
            raise AdminDenied("this needs the admin session: log in on the admin page first")

    # -- the catalog ------------------------------------------------------------------------

    def entries(self) -> list[catalog.CatalogEntry]:
        path = self.settings.catalog_path
        return catalog.load_catalog(path if path.is_absolute() else APP_ROOT / path, self.settings.models_dir)

    def catalog_view(self) -> list[dict[str, Any]]:
        """Each entry with what its GGUF header says and whether it fits the cards now."""
        loaded = (self.engine.status().get("model") or {}).get("gguf_file")
        rows = []
        for entry in self.entries():
            row: dict[str, Any] = {"id": entry.id, "name": entry.name, "file": entry.path.name, "n_ctx": entry.n_ctx,
                                   "kv_type": entry.kv_type, "loaded": str(entry.path) == loaded}
            try:
                info, need = self._plan(entry)
                row |= {"present": True, "size_gib": round(info.size_bytes / 2**30, 2), "arch": info.architecture,
                        "layers": info.n_layers, "quant": info.quantization, "trained_ctx": info.context_length,
                        "need_gib_per_card": [round(n / 2**30, 2) for n in need], "fits": True, "problem": ""}
                self._fit(need)
            except EngineError as err:
                row |= {"present": entry.path.is_file(), "fits": False, "problem": str(err)}
            rows.append(row)
        return rows

    def _plan(self, entry: catalog.CatalogEntry) -> tuple[catalog.GgufInfo, list[int]]:
        catalog.check_location(entry.path, self.settings.models_dir)
        info = catalog.inspect_gguf(entry.path)
        cfg = self.engine.config
        need = catalog.estimate_per_card(
            info, n_ctx=entry.n_ctx, kv_type=entry.kv_type, n_cards=len(cfg.cards), n_ubatch=cfg.n_ubatch
        )
        return info, need

    def _fit(self, need: list[int]) -> None:
        free: list[int | None] = []
        for card in self.telemetry.status()["cards"]:
            total, used = card.get("mem_total_bytes"), card.get("mem_used_bytes")
            free.append(None if total is None or used is None else total - used + card["layer_bytes"])
        catalog.check_fit(need, free, list(self.engine.config.cards))

    # -- actions ----------------------------------------------------------------------------

    def switch_model(self, token: str | None, model_id: str, *, who: str) -> ModelInfo:
        self.check(token)
        entry = next((e for e in self.entries() if e.id == model_id), None)
        if entry is None:
            raise EngineError(f"there is no model {model_id!r} in the catalog", kind="request")
        config = replace(self.engine.config, model_path=entry.path, model_name=entry.name, n_ctx=entry.n_ctx,
                         kv_type=entry.kv_type, chat_template=entry.chat_template)
        return self._apply(config, who=who, action=f"switch to {entry.id}", entry=entry)

    def apply_settings(self, token: str | None, changes: dict[str, Any], *, who: str) -> ModelInfo:
        self.check(token)
        allowed = {"n_ctx", "n_threads", "n_batch", "n_ubatch", "kv_type", "tensor_split"}
        unknown = set(changes) - allowed
        if unknown:
            raise EngineError(f"these engine settings cannot be changed here: {', '.join(sorted(unknown))}")
        config = replace(self.engine.config, **changes)
        return self._apply(config, who=who, action=f"engine settings {changes}", entry=None)

    def _apply(self, config: EngineConfig, *, who: str, action: str, entry: catalog.CatalogEntry | None) -> ModelInfo:
        try:
            if entry is not None:
                self._fit(self._plan(entry)[1])
            info = self.engine.switch(config)
        except EngineError as err:
            self.record(who, action, f"refused: {err}", ok=False)
            raise
        self.record(who, action, f"{info.name} loaded in {info.load_s:.1f} s")
        return info

    # -- the log ----------------------------------------------------------------------------

    def record(self, who: str, action: str, detail: str, *, ok: bool = True) -> None:
        with self._lock, self._db.conn:
            self._db.table("admin_log").insert({"at": now(), "who": who, "action": action, "detail": detail,
                                                "ok": int(ok)})

    def log(self, limit: int = 50) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._db.table("admin_log").rows_where(order_by="id desc", limit=limit))
