"""Admin actions: a password-gated session, the model catalog with its fit check, model switching and
engine settings — every action checked here on the server and written to the admin log in SQLite."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import sqlite_utils

from app.auth import LoginThrottle, verify_password
from app.database import Database, now
from app.engine import catalog
from app.engine.cards import probe_card
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError, ModelInfo
from app.engine.service import EngineService
from app.jobs import Job, JobBusy, Jobs
from app.settings import Settings
from app.telemetry.load_progress import LoadProgress
from app.telemetry.monitor import read_health
from app.telemetry.service import Telemetry

APP_ROOT = Path(__file__).resolve().parent.parent
_SESSION_S = 8 * 3600


class AdminDenied(PermissionError):
    pass


MIGRATIONS = sqlite_utils.Migrations("admin")


@MIGRATIONS(name="001_admin_log")
def _m001_admin_log(db: sqlite_utils.Database) -> None:
    db.table("admin_log").create({"id": int, "at": str, "who": str, "action": str, "detail": str, "ok": int}, pk="id")



class AdminService:
    def __init__(self, *, database: Database, engine: EngineService, telemetry: Telemetry, settings: Settings) -> None:
        self._database = database
        self.engine, self.telemetry, self.settings = engine, telemetry, settings
        self._sessions: dict[str, float] = {}
        self._sessions_lock = threading.Lock()
        self._throttle = LoginThrottle()
        self._jobs = Jobs()
        self._progress = LoadProgress(engine, health_url=settings.health_url, layer_bytes=lambda: {
            card["endpoint"]: card["layer_bytes"] for card in telemetry.status()["cards"]})
        database.migrate(MIGRATIONS)

    # -- sessions ---------------------------------------------------------------------------

    def login(self, password: str, *, who: str, client: str) -> str:
        """An admin session token for the right password. `client` is the caller's address: after wrong
        passwords it waits longer and longer before its next try is even checked; `who` goes to the log."""
        stored = self.settings.admin_password_hash
        if not stored:
            self.record(who, "login", "refused: no admin password is configured", ok=False)
            raise AdminDenied("no admin password is configured (set admin_password_hash; python -m app.auth)")
        wait_s = self._throttle.wait_s(client)
        if wait_s > 0:
            self.record(who, "login", f"refused: throttled for {wait_s:.0f} s after wrong passwords", ok=False)
            raise AdminDenied(f"too many wrong passwords from here: try again in {wait_s:.0f} s")
        if not verify_password(password, stored):
            delay = self._throttle.failed(client)
            self.record(who, "login", f"refused: wrong password (next try in {delay:.0f} s)", ok=False)
            raise AdminDenied("wrong admin password" + (f"; try again in {delay:.0f} s" if delay >= 1 else ""))
        self._throttle.succeeded(client)
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

    # -- long actions as jobs ------------------------------------------------------------------

    def start(self, token: str | None, name: str, action: Callable[[], ModelInfo]) -> Job:
        """Admin only: run a switch, reload or card change in the background; read it with `job`."""
        self.check(token)

        def work() -> str:
            info = action()
            return f"✅ {info.name} loaded in {info.load_s:.1f} s"

        def failed(err: Exception) -> str:
            return f"⚠ {err}" if isinstance(err, EngineError | AdminDenied) else f"⚠ {name} failed unexpectedly: {err}"

        try:
            return self._jobs.start(name, work, failed=failed)
        except JobBusy as err:
            raise AdminDenied(str(err)) from err

    def engine_settings(self, token: str | None) -> dict[str, Any]:
        """Admin only: the engine settings the page lets the admin change, as they are now."""
        self.check(token)
        config = self.engine.config
        return {"n_ctx": config.n_ctx, "n_threads": config.n_threads, "n_batch": config.n_batch,
                "n_ubatch": config.n_ubatch, "kv_type": config.kv_type,
                "tensor_split": ", ".join(f"{v:g}" for v in config.tensor_split or ()),
                "cards": "\n".join(config.cards)}

    def job(self, token: str | None, job_id: str | None) -> Job | None:
        self.check(token)
        return self._jobs.get(job_id)

    # -- the catalog ------------------------------------------------------------------------

    def entries(self) -> list[catalog.CatalogEntry]:
        path = self.settings.catalog_path
        return catalog.load_catalog(path if path.is_absolute() else APP_ROOT / path, self.settings.models_dir)

    def catalog_view(self, token: str | None) -> list[dict[str, Any]]:
        """Admin only: each entry with what its GGUF header says and whether it fits the cards now."""
        self.check(token)
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
            info, n_ctx=entry.n_ctx * cfg.parallel, kv_type=entry.kv_type, n_cards=len(cfg.cards),
            n_ubatch=cfg.n_ubatch,  # every slot holds its own context's KV cache
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
        if "tensor_split" in changes:
            changes["tensor_split"] = _split(changes["tensor_split"], len(self.engine.config.cards))
        config = replace(self.engine.config, **changes)
        return self._apply(config, who=who, action=f"engine settings {changes}", entry=None)

    def ping(self, token: str | None, endpoints: list[str]) -> list[dict[str, Any]]:
        """Each endpoint's RPC port (connect time) and health endpoint, without changing anything."""
        self.check(token)
        rows = []
        in_use = self._cards_in_use()
        for index, endpoint in enumerate(_valid_endpoints(endpoints)):
            started = time.monotonic()
            # a card's RPC server serves one client: while the engine holds it, a probe would only
            # wait in its accept queue, so a card in use is reported as such
            rpc = "in use by the engine" if endpoint in in_use else probe_card(endpoint, timeout=1.0) or "ok"
            row: dict[str, Any] = {"card": index, "endpoint": endpoint, "rpc": rpc,
                                   "rpc_ms": round(1000 * (time.monotonic() - started), 1) if rpc == "ok" else None}
            try:
                health = read_health(self.settings.health_url(endpoint), 1.0)
                row |= {"health": "ok", "temperature_c": health.get("temperature_c"),
                        "mem_used_gib": round(health.get("mem_used_bytes", 0) / 2**30, 2),
                        "mem_total_gib": round(health.get("mem_total_bytes", 0) / 2**30, 2)}
            except Exception as err:  # the card agent's health port is down or not a card agent
                row |= {"health": f"no answer: {getattr(err, 'reason', err)}"}
            rows.append(row)
        return rows

    def set_cards(self, token: str | None, endpoints: list[str], *, who: str) -> ModelInfo:
        """Run the model on these cards (any number ≥ 1); every one must answer first. On failure the
        previous cards are used again."""
        self.check(token)
        cards = _valid_endpoints(endpoints)
        action = f"cards {', '.join(cards)}"
        try:
            if not self.settings.engine_isolation:
                raise EngineError("changing cards needs the engine worker process (engine_isolation = true): "
                                  "ggml cannot unregister a card inside one process", kind="request")
            in_use = self._cards_in_use()
            for index, card in enumerate(cards):
                reason = None if card in in_use else probe_card(card)
                if reason:
                    raise EngineError(f"card {index} ({card}) does not answer: {reason}", card=card, kind="request")
        except EngineError as err:
            self.record(who, action, f"refused: {err}", ok=False)
            raise
        monitor, before = self.telemetry.monitor, self.telemetry.monitor.cards
        monitor.set_cards(cards)
        try:
            return self._apply(replace(self.engine.config, cards=tuple(cards), tensor_split=None), who=who,
                               action=action, entry=None)
        except EngineError:
            monitor.set_cards(before)  # the supervisor loaded the previous configuration again
            raise

    def _cards_in_use(self) -> set[str]:
        status = self.engine.status()
        return set(self.engine.config.cards) if status["state"] == "ready" else set()

    def restart_engine(self, token: str | None, *, who: str) -> ModelInfo:
        """Unload and load the current model again on the current cards (a fresh engine process)."""
        self.check(token)
        return self._apply(self.engine.config, who=who, action="restart engine", entry=None)

    def load_progress(self) -> list[dict[str, Any]]:
        """While a model loads: per card, how much of its share of the weights has arrived (else [])."""
        return self._progress.rows()

    def _apply(self, config: EngineConfig, *, who: str, action: str, entry: catalog.CatalogEntry | None) -> ModelInfo:
        try:
            if entry is not None:
                self._fit(self._plan(entry)[1])
            self._progress.note_baseline()
            info = self.engine.switch(config)
        except EngineError as err:
            self.record(who, action, f"refused: {err}", ok=False)
            raise
        self.record(who, action, f"{info.name} loaded in {info.load_s:.1f} s")
        return info

    # -- the log ----------------------------------------------------------------------------

    def record(self, who: str, action: str, detail: str, *, ok: bool = True) -> None:
        with self._database.atomic() as db:
            db.table("admin_log").insert({"at": now(), "who": who, "action": action, "detail": detail, "ok": int(ok)})

    def log(self, token: str | None, limit: int = 50) -> list[dict[str, Any]]:
        """Admin only: the latest entries of the admin log, newest first."""
        self.check(token)
        with self._database.read() as db:
            return list(db.table("admin_log").rows_where(order_by="id desc", limit=limit))


def _valid_endpoints(endpoints: list[str]) -> list[str]:
    cards = [e.strip() for e in endpoints if e.strip()]
    if not cards:
        raise EngineError("at least one card endpoint is needed", kind="request")
    for card in cards:
        host, _, port = card.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise EngineError(f"card endpoint {card!r} is not host:port", kind="request")
    duplicates = sorted({c for c in cards if cards.count(c) > 1})
    if duplicates:
        raise EngineError(f"card endpoint {duplicates[0]} is listed twice", kind="request")
    return cards


def _split(shares: Any, n_cards: int) -> tuple[float, ...] | None:
    """A tensor split from the admin ("1, 1, 1, 2" or a list): one share ≥ 0 per card; empty = llama's."""
    if shares is None or (isinstance(shares, str) and not shares.strip()):
        return None
    parts = shares.replace(",", " ").split() if isinstance(shares, str) else list(shares)
    try:
        values = tuple(float(part) for part in parts)
    except (TypeError, ValueError) as err:
        raise EngineError(f"tensor split {shares!r} is not a list of numbers", kind="request") from err
    if len(values) != n_cards:
        raise EngineError(f"tensor split needs one share per card ({n_cards}), not {len(values)}", kind="request")
    if any(v < 0 for v in values) or sum(values) <= 0:
        raise EngineError("tensor split shares must be ≥ 0 and not all 0", kind="request")
    return values
