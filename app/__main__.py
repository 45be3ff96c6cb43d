"""Composition root: settings → services → UI → serve.   python -m app

Nothing in Quartet does work at import; everything is built here, in this order.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from app import backup, logs
from app.admin import AdminService
from app.api.gate import Keys
from app.browser_secret import browser_secret
from app.chat.service import ChatService
from app.chat.store import ChatStore
from app.context import AppContext
from app.database import Database
from app.downloads import Downloads
from app.engine.kinds import backend_kind
from app.engine.service import EngineService
from app.extraction.extractor import Extractor
from app.extraction.service import ExtractionService
from app.extraction.store import ExtractionStore
from app.gradio_import import skip_stub_writer
from app.knowledge.answer import Answerer
from app.knowledge.embedder import Embedder
from app.knowledge.long_texts import api_embed
from app.knowledge.service import KnowledgeService
from app.knowledge.summary import Summariser
from app.people import PeopleStore, made_here
from app.people_admin import PeopleAdmin
from app.settings import Settings, SettingsInvalid, load
from app.telemetry.monitor import CardMonitor
from app.telemetry.service import Telemetry

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("quartet")
PROMPTS = Path(__file__).resolve().parent.parent / "assets" / "prompts"
TEMPLATES = PROMPTS.parent / "schemas"
_LOAD_WAIT_S = 600.0


def build_context(settings: Settings, *, restored: str | None = None) -> AppContext:
    """`restored`: what the restore put in place at this start, for the admin log."""
    database = Database(settings.db_path)  # every store's: a reader per thread, one writer
    config = settings.engine
    engine = EngineService(config, kinds=backend_kind)
    conversations = ChatStore(database)
    downloads = Downloads(settings.data_dir / "downloads")  # private: a backup's or an export's file, fetched once
    conversations.mark_interrupted()  # answers cut by the last stop keep their text, marked as such
    chat = ChatService(
        conversations,
        engine,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        system_prompt=settings.web.system_prompt,
        downloads=downloads,
    )
    watch = settings.telemetry
    cards = CardMonitor(
        lambda: engine.config.cards,
        settings.health_url,
        every_s=watch.poll_s,
        timeout_s=watch.timeout_s,
        on_down=engine.note_card_down,
    )
    telemetry = Telemetry(
        engine=engine, monitor=cards, warning_c=watch.warning_c, critical_c=watch.critical_c, every_s=watch.poll_s
    )
    cards.listeners.append(telemetry.record)
    engine.hold_when(telemetry.thermal_hold)
    made = PeopleStore(database)  # the people and API keys made on the admin page
    admin = AdminService(
        database=database, engine=engine, telemetry=telemetry, settings=settings, people=made, downloads=downloads
    )
    people = PeopleAdmin(people=made, sessions=admin.sessions, settings=settings, record=admin.record)
    if restored:  # the restored admin log says so (its own record of the restore was made after the backup)
        admin.record("app start", "restore", restored)
    kb = settings.knowledge
    embedder = Embedder.packaged(threads=kb.embed_threads)
    knowledge = KnowledgeService(database, embedder, kb_dir=kb.dir, options=kb)
    limits = settings.extraction
    extractor = Extractor(knowledge, engine, PROMPTS, max_tokens=limits.max_tokens, timeout_s=limits.timeout_s)
    extraction = ExtractionService(ExtractionStore(database), extractor, knowledge, TEMPLATES)
    return AppContext(
        settings=settings,
        database=database,
        engine=engine,
        chat=chat,
        cards=cards,
        telemetry=telemetry,
        admin=admin,
        people=people,
        api_keys=Keys(lambda: settings.web.api_keys, made=made.key_owner, any_made=made.any_keys),
        knowledge=knowledge,
        extraction=extraction,
        answerer=Answerer(
            knowledge, engine, PROMPTS, k=kb.sources, max_tokens=config.max_tokens, temperature=kb.temperature
        ),
        summariser=Summariser(
            knowledge,
            engine,
            PROMPTS,
            notes_tokens=kb.summary_notes_tokens,
            answer_tokens=kb.summary_answer_tokens,
            temperature=kb.temperature,
        ),
        browser_secret=browser_secret(settings.data_dir),
        downloads=downloads,
        embed=api_embed(embedder),
        backups=_schedule(settings),
    )


def _schedule(settings: Settings) -> backup.Schedule | None:
    plan = settings.backup
    if plan.dir is None:
        return None
    return backup.Schedule(settings.places, plan.dir, every_h=plan.every_h, keep=plan.keep)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    skip_stub_writer()  # before Gradio's first import: ~2.3 s of CPU at every start (app/gradio_import.py)
    from app.server import make_server

    if "--die-with-parent" in sys.argv[1:]:
        from app.engine.lifecycle import die_with_parent

        die_with_parent(signal.SIGTERM)
    try:
        settings = load()
    except SettingsInvalid as err:
        print(f"Quartet cannot start: {err}", file=sys.stderr, flush=True)
        return 2
    logs.write_app_log(settings.data_dir)
    restored = backup.apply_pending(settings.places)  # a restore staged on the admin page, before anything opens
    if restored:
        log.warning(restored)
        try:
            settings = load()  # the restored page settings count from this start
        except SettingsInvalid as err:
            print(f"Quartet cannot start with the restored settings: {err}", file=sys.stderr, flush=True)
            return 2
    people, keys = made_here(settings.db_path)  # the admin page's people and keys count as the settings' do
    refusal = settings.open_lan_problem(people=people, keys=keys)
    if refusal:
        print(refusal, file=sys.stderr, flush=True)
        return 2
    ctx = build_context(settings, restored=restored)
    with ExitStack() as running:
        ctx.start(running)  # stopped in reverse order, the database closed last, however serve() ends
        return serve(ctx, make_server(ctx), settings)


def serve(ctx: AppContext, server: uvicorn.Server, settings: Settings) -> int:
    """The web app until a signal or its end; the engine's readiness is printed once known."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.run, name="web", daemon=True)
    thread.start()  # the page is up at once: while cards or the model are not, it says so
    while not server.started and thread.is_alive():
        time.sleep(0.05)
    if not server.started:
        log.error("the web app could not listen on %s:%s", settings.web.host, settings.web.port)
        return 1
    url = f"http://{settings.web.host}:{settings.web.port}"
    if _engine_ready(ctx, stop):
        print(f"Quartet ready at {url}", flush=True)
    elif not stop.is_set():
        print(f"Quartet web app at {url}; the engine is not ready: {ctx.engine.status().message}", flush=True)
    while not stop.wait(0.5) and thread.is_alive():
        pass
    from app.server import end_page_streams

    end_page_streams(server)  # else an open page's stream holds the stop for the whole grace
    server.should_exit = True
    thread.join(timeout=5)
    return 0


def _engine_ready(ctx: AppContext, stop: threading.Event) -> bool:
    deadline = time.monotonic() + _LOAD_WAIT_S
    while not stop.is_set() and time.monotonic() < deadline:
        if ctx.engine.wait_ready(0.5):
            return True
        if ctx.engine.status().state == "failed":
            return False
    return False


if __name__ == "__main__":
    sys.exit(main())
