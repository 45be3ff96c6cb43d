"""Admin actions: a password-gated session, the model catalog with its fit check, model switching and
engine settings — every action checked here on the server and written to the admin log in SQLite."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import sqlite_utils

from app import backup, logs, page_settings
from app.admin_input import SETTINGS, checked_settings, valid_endpoints
from app.admin_sessions import AdminDenied, AdminSessions
from app.database import Database, DiskFull, now
from app.downloads import Downloads, Offer
from app.engine.cards import probe_card
from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError, ModelInfo
from app.engine.llama import card_fit, catalog
from app.engine.service import EngineService
from app.errors import NotFound, QuartetError
from app.jobs import Job, JobBusy, Jobs
from app.people import PeopleStore
from app.settings import Settings
from app.telemetry.load_progress import LoadProgress
from app.telemetry.ping import ping
from app.telemetry.service import Telemetry
from app.telemetry.views import LoadRow

APP_ROOT = Path(__file__).resolve().parent.parent
__all__ = ["AdminDenied", "AdminService"]
log = logging.getLogger(__name__)


MIGRATIONS = sqlite_utils.Migrations("admin")


@MIGRATIONS(name="001_admin_log")
def _m001_admin_log(db: sqlite_utils.Database) -> None:
    db.table("admin_log").create({"id": int, "at": str, "who": str, "action": str, "detail": str, "ok": int}, pk="id")


class AdminService:
    def __init__(
        self,
        *,
        database: Database,
        engine: EngineService,
        telemetry: Telemetry,
        settings: Settings,
        people: PeopleStore,
        downloads: Downloads,
    ) -> None:
        self._database, self._downloads = database, downloads
        self.engine, self.telemetry, self.settings = engine, telemetry, settings
        self.sessions = AdminSessions(people, lambda: settings.web.admin_password_hash, self.record)
        self._jobs = Jobs()
        self._progress = LoadProgress(
            engine,
            health_url=settings.health_url,
            layer_bytes=lambda: {card.endpoint: card.layer_bytes for card in telemetry.status().cards},
        )
        database.migrate(MIGRATIONS)

    # -- sessions (app/admin_sessions.py) -------------------------------------------------------

    def login(self, password: str, *, who: str, client: str, name: str = "", login: str | None = None) -> str:
        """An admin session token: the configured admin password (no name), or an admin person's own; for
        the page login `login` alone (app/admin_sessions.py)."""
        return self.sessions.login(password, who=who, client=client, name=name, login=login)

    def check(self, token: str | None) -> None:
        self.sessions.check(token)

    def check_holder(self, token: str | None, login: str | None) -> None:
        """AdminDenied unless the page login `login` opened the session of `token`."""
        self.sessions.check_holder(token, login)

    def upload_ticket(self, token: str | None) -> str:
        """Admin only: the session's upload ticket (the page keeps it as a cookie for the restore upload)."""
        return self.sessions.check(token).ticket

    # -- long actions as jobs ------------------------------------------------------------------

    def start(self, token: str | None, name: str, action: Callable[[], ModelInfo], *, who: str = "") -> Job:
        """Admin only: run a switch, reload or card change in the background; read it with `job`. Asked while
        another one runs, it is refused (JobBusy, kind busy) and the refusal is written to the admin log."""
        self.check(token)

        def work() -> str:
            info = action()
            return f"✅ {info.name} loaded in {info.load_s:.1f} s"

        def failed(err: Exception) -> str:
            if isinstance(err, QuartetError):  # written for people already
                return f"⚠ {err.message}"
            return f"⚠ {name} failed unexpectedly ({type(err).__name__}: {err}); the app's log has the details"

        try:
            return self._jobs.start(name, work, failed=failed)
        except JobBusy as err:
            self.record(who, name, f"refused: {err.message}", ok=False)
            raise

    def engine_settings(self, token: str | None) -> dict[str, Any]:
        """Admin only: the engine settings the page lets the admin change, as they are now."""
        self.check(token)
        config = self.engine.config
        return {
            "n_ctx": config.n_ctx,
            "n_threads": config.n_threads,
            "n_batch": config.n_batch,
            "n_ubatch": config.n_ubatch,
            "kv_type": config.kv_type,
            "parallel": config.parallel,
            "background_slots": self.engine.background_slots,
            "tensor_split": ", ".join(f"{v:g}" for v in config.tensor_split or ()),
            "cards": "\n".join(config.cards),
            "sources": page_settings.origins(self.settings.data_dir, [*SETTINGS, "cards", "model_path"]),
        }

    def job(self, token: str | None, job_id: str | None) -> Job | None:
        self.check(token)
        return self._jobs.get(job_id)

    def entries(self) -> list[catalog.CatalogEntry]:
        path = self.settings.engine.catalog_path
        return catalog.load_catalog(path if path.is_absolute() else APP_ROOT / path, self.settings.engine.models_dir)

    def catalog_view(self, token: str | None) -> list[dict[str, Any]]:
        """Admin only: each entry with what its GGUF header says and whether it fits the cards now."""
        self.check(token)
        model = self.engine.status().model
        memory = self._memory()
        rows = []
        for entry in self.entries():
            row: dict[str, Any] = {
                "id": entry.id,
                "name": entry.name,
                "file": entry.path.name,
                "n_ctx": entry.n_ctx,
                "kv_type": entry.kv_type,
                "loaded": model is not None and (entry.upstream_url or str(entry.path)) == model.gguf_file,
            }
            if entry.is_upstream:  # nothing of it lives on the cards: no GGUF to read, nothing to fit
                rows.append(row | {"file": entry.upstream_url, "present": True, "fits": True, "problem": ""})
                continue
            try:
                fit = card_fit.fit(self._entry_config(entry), memory)
                info = fit.info
                row |= {
                    "present": True,
                    "size_gib": round(info.size_bytes / 2**30, 2),
                    "arch": info.architecture,
                    "layers": info.n_layers,
                    "quant": info.quantization,
                    "trained_ctx": info.context_length,
                    "need_gib_per_card": [round(n.total / 2**30, 2) for n in fit.needs],
                    "fits": not fit.short,
                    "problem": fit.problem,
                }
            except EngineError as err:
                row |= {"present": entry.path.is_file(), "fits": False, "problem": str(err)}
            rows.append(row)
        return rows

    def _entry_config(self, entry: catalog.CatalogEntry) -> EngineConfig:
        return catalog.config_for(entry, self.engine.config, models_dir=self.settings.engine.models_dir)

    def _memory(self) -> dict[str, card_fit.CardMemory]:
        """Each card's memory now, with what the loaded model holds there (freed before the next load)."""
        status = self.telemetry.status()
        placed = {card.endpoint: card.layer_bytes for card in status.cards}
        # an upstream holds nothing on cards (none configured: splitting a GGUF over none raised StopIteration)
        held = card_fit.held(self.engine.config, placed) if status.model and self.engine.config.cards else {}
        return {
            card.endpoint: card_fit.CardMemory(card.mem_total_bytes, card.mem_used_bytes, held.get(card.endpoint, 0))
            for card in status.cards
        }

    # -- actions ----------------------------------------------------------------------------

    def switch_model(self, token: str | None, model_id: str, *, who: str) -> ModelInfo:
        who = self.sessions.named(token, who)  # the admin's name, for the log
        entry = next((e for e in self.entries() if e.id == model_id), None)
        if entry is None:
            raise NotFound(f"there is no model {model_id!r} in the catalog")
        action = f"switch to {entry.id}"
        try:
            config = self._entry_config(entry)
        except EngineError as err:
            self.record(who, action, f"refused: {err}", ok=False)
            raise
        return self._apply(config, who=who, action=action)

    def apply_settings(self, token: str | None, changes: dict[str, Any], *, who: str) -> ModelInfo:
        """Reload with these engine settings (each checked, and the whole checked to fit the cards)."""
        who = self.sessions.named(token, who)  # the admin's name, for the log
        action = f"engine settings {changes}"
        try:
            checked = checked_settings(changes, self.engine.config)
        except EngineError as err:
            self.record(who, action, f"refused: {err}", ok=False)
            raise
        return self._apply(replace(self.engine.config, **checked), who=who, action=action)

    def ping(self, token: str | None, endpoints: list[str]) -> list[dict[str, Any]]:
        """Each endpoint's RPC port (connect time) and health endpoint, without changing anything."""
        self.check(token)
        return ping(valid_endpoints(endpoints), in_use=self._cards_in_use(), health_url=self.settings.health_url)

    def set_cards(self, token: str | None, endpoints: list[str], *, who: str) -> ModelInfo:
        """Run the model on these cards (any number ≥ 1); every one must answer first. On failure the
        previous cards are used again."""
        who = self.sessions.named(token, who)  # the admin's name, for the log
        cards = valid_endpoints(endpoints)
        action = f"cards {', '.join(cards)}"
        try:
            if not self.settings.engine.isolation:
                raise EngineError(
                    "changing cards needs the engine worker process (isolation = true under [engine]): "
                    "ggml cannot unregister a card inside one process",
                    kind="request",
                )
            in_use = self._cards_in_use()
            for index, card in enumerate(cards):
                reason = None if card in in_use else probe_card(card)
                if reason:
                    raise EngineError(f"card {index} ({card}) does not answer: {reason}", card=card, kind="request")
        except EngineError as err:
            self.record(who, action, f"refused: {err}", ok=False)
            raise
        # the card monitor follows the engine's card list (and the previous one, if the supervisor goes back)
        return self._apply(replace(self.engine.config, cards=tuple(cards), tensor_split=None), who=who, action=action)

    def _cards_in_use(self) -> set[str]:
        return set(self.engine.config.cards) if self.engine.status().state == "ready" else set()

    def restart_engine(self, token: str | None, *, who: str) -> ModelInfo:
        """Unload and load the current model again on the current cards (a fresh engine process)."""
        who = self.sessions.named(token, who)  # the admin's name, for the log
        return self._apply(self.engine.config, who=who, action="restart engine")

    def load_progress(self) -> list[LoadRow]:
        """While a model loads: per card, how much of its share of the weights has arrived (else [])."""
        return self._progress.rows()

    def _apply(self, config: EngineConfig, *, who: str, action: str) -> ModelInfo:
        """Check that `config` fits the cards, then reload with it; every outcome goes to the admin log,
        an unexpected error's too."""
        try:
            if config.backend == "cards":  # an upstream holds its model itself
                card_fit.fit(config, self._memory()).check()
            self._progress.note_baseline()
            before = self.engine.config
            info = self.engine.switch(config)
            # kept for the next start (app/page_settings.py); the fields the switch changed, not more
            page_settings.save_engine(self.settings.places.settings_path, page_settings.changed(before, config))
        except EngineError as err:
            self.record(who, action, f"refused: {err}", ok=False)
            raise
        except Exception as err:
            self.record(who, action, f"failed unexpectedly: {type(err).__name__}: {err}", ok=False)
            raise
        self.record(who, action, f"{info.name} loaded in {info.load_s:.1f} s")
        return info

    def backup(self, token: str | None, *, who: str) -> Offer:
        """Admin only: a fresh backup archive, offered once to this admin session (app/downloads.py): its
        `/admin/downloads/<key>` fetches it with the session's upload ticket cookie or its token in the
        X-Quartet-Admin header."""
        who = self.sessions.named(token, who)  # the admin's name, for the log (AdminDenied: no session)
        made = backup.take(self.settings.places, self._downloads.folder())
        offer = self._downloads.offer(made, name=made.name, media_type="application/gzip", admin_session=token or "")
        self.record(who, "backup", f"offered {offer.name} ({offer.size} bytes) for download, once")
        return offer

    def restore(self, token: str | None, archive: Path, *, who: str) -> str:
        """Admin only: check an uploaded backup whole and stage it for the next start; nothing changes now."""
        who = self.sessions.named(token, who)  # the admin's name, for the log
        try:
            room = backup.Room(max_document_bytes=self.settings.knowledge.max_file_bytes)
            manifest = backup.stage(archive, self.settings.places, room)
        except backup.BackupRefused as err:
            self.record(who, "restore", f"refused: {err.message}", ok=False)
            raise
        self.record(who, "restore", f"staged the backup of {manifest.created} for the next start")
        return f"✅ The backup of {manifest.created} is checked ({len(manifest.files)} files). " + backup.RESTART

    def logs(self, token: str | None, limit: int = logs.TAIL_BYTES) -> dict[str, str]:
        """Admin only: the last `limit` bytes of the app's log and of each local card agent's."""
        self.check(token)
        return logs.recent(self.settings.data_dir, limit)

    def record(self, who: str, action: str, detail: str, *, ok: bool = True) -> None:
        """A row of the admin log. On a full data disk the row goes to the app's log instead: what it records
        is done (a login, the very one that must be let in to make room), and a row cannot undo it."""
        row = {"at": now(), "who": who, "action": action, "detail": detail, "ok": int(ok)}
        try:
            with self._database.atomic() as db:
                db.table("admin_log").insert(row)
        except DiskFull as err:
            log.error("admin log: this row could not be written (%s): %s", err.message, row)

    def log(self, token: str | None, limit: int = 50) -> list[dict[str, Any]]:
        """Admin only: the latest entries of the admin log, newest first."""
        self.check(token)
        with self._database.read() as db:
            return list(db.table("admin_log").rows_where(order_by="id desc", limit=limit))
