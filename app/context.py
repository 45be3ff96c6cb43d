"""The services the UI and API see, built once by the composition root."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

from app.admin import AdminService
from app.api.gate import Keys
from app.backup import Schedule
from app.chat.service import ChatService
from app.database import Database
from app.downloads import Downloads
from app.engine.service import EngineService
from app.extraction.service import ExtractionService
from app.knowledge.answer import Answerer
from app.knowledge.service import KnowledgeService
from app.knowledge.summary import Summariser
from app.lifecycle import Background, start_all
from app.people_admin import PeopleAdmin
from app.settings import Settings
from app.telemetry.monitor import CardMonitor
from app.telemetry.service import Telemetry
from app.telemetry.views import ApplianceStatus


@dataclass
class AppContext:
    settings: Settings
    database: Database
    engine: EngineService
    chat: ChatService
    cards: CardMonitor
    telemetry: Telemetry
    admin: AdminService
    people: PeopleAdmin  # the people and API keys made on the admin page
    api_keys: Keys  # what /v1 (and /metrics, /health when not public) take
    knowledge: KnowledgeService
    answerer: Answerer
    summariser: Summariser
    extraction: ExtractionService
    browser_secret: str  # seals each browser's stored id, the same across restarts (app/browser_secret.py)
    downloads: Downloads  # files handed out once: backups to their admin session, chat exports (app/downloads.py)
    # texts → (vectors, tokens counted); the knowledge base's embedder once it is configured
    embed: Callable[[list[str]], tuple[list[list[float]], int]] | None = None
    backups: Schedule | None = None  # scheduled backups, when `[backup] dir` is set

    def background(self) -> list[Background]:
        """What runs in the background, in start order (the composition root stops them in reverse)."""
        scheduled: list[Background] = [self.backups] if self.backups else []
        return [self.cards, self.engine, self.knowledge, self.extraction, *scheduled]

    def start(self, stack: ExitStack) -> None:
        """Start the background services in order; leaving `stack` stops them last first and then closes
        the database (every reader and the writer, so SQLite checkpoints its WAL into the file)."""
        stack.callback(self.database.close)  # registered first, so it runs after every service has stopped
        stack.callback(self.downloads.close)  # what nobody fetched is removed with the app
        start_all(stack, self.background())
        # Leaving, first of all: the extraction run at hand hears that the app is closing, then the engine
        # stops, so a run that waits for the engine (a count, its place in line) ends at once instead of
        # holding the stop for its whole timeout and then writing into a closed database.
        stack.callback(self.engine.stop)
        stack.callback(self.extraction.closing)

    def status(self) -> ApplianceStatus:
        return self.telemetry.status()
