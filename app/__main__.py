"""Composition root: settings → services → UI → serve.   python -m app

Nothing in Quartet does work at import; everything is built here, in this order.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from app.admin import AdminService
from app.chat.service import ChatService
from app.chat.store import ChatStore
from app.context import AppContext
from app.database import Database
from app.engine.engine_config import EngineConfig
from app.engine.service import EngineService
from app.extraction.extractor import Extractor
from app.extraction.service import ExtractionService
from app.extraction.store import ExtractionStore
from app.knowledge.answer import Answerer
from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService
from app.knowledge.summary import Summariser
from app.settings import Settings
from app.telemetry.monitor import CardMonitor
from app.telemetry.service import Telemetry

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("quartet")
PROMPTS = Path(__file__).resolve().parent.parent / "assets" / "prompts"
TEMPLATES = PROMPTS.parent / "schemas"
_LOAD_WAIT_S = 600.0


def engine_config(settings: Settings) -> EngineConfig:
    return EngineConfig(
        model_path=settings.model_path,
        model_name=settings.model_name,
        cards=tuple(settings.cards),
        n_ctx=settings.n_ctx,
        n_batch=settings.n_batch,
        n_ubatch=settings.n_ubatch,
        n_threads=settings.n_threads,
        prompt_chunk=settings.prompt_chunk,
        parallel=settings.parallel,
        kv_cache_mb=settings.kv_cache_mb,
        tensor_split=tuple(settings.tensor_split) if settings.tensor_split else None,
        split_mode=settings.split_mode,
        max_tokens_limit=settings.max_tokens_limit,
        health_offset=settings.card_health_offset,
        step_timeout_s=settings.card_step_timeout_s,
    )


def build_context(settings: Settings) -> AppContext:
    database = Database(settings.db_path)  # every store's: a reader per thread, one writer
    engine = EngineService(
        engine_config(settings),
        isolated=settings.engine_isolation,
        max_queue=settings.max_queue,
        background_slots=settings.background_slots,
    )
    conversations = ChatStore(database)
    conversations.mark_interrupted()  # answers cut by the last stop keep their text, marked as such
    chat = ChatService(
        conversations,
        engine,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        system_prompt=settings.system_prompt,
    )
    cards = CardMonitor(
        settings.cards,
        settings.health_url,
        every_s=settings.card_poll_s,
        timeout_s=settings.card_timeout_s,
        on_down=engine.note_card_down,
    )
    telemetry = Telemetry(
        engine=engine,
        monitor=cards,
        warning_c=settings.temp_warning_c,
        critical_c=settings.temp_critical_c,
        every_s=settings.card_poll_s,
    )
    cards.listeners.append(telemetry.record)
    engine.hold_when(telemetry.thermal_hold)
    admin = AdminService(database=database, engine=engine, telemetry=telemetry, settings=settings)
    embedder = Embedder.packaged(threads=settings.embed_threads)
    options = KnowledgeOptions(
        max_file_mb=settings.max_upload_mb, watch=settings.kb_watch, read_timeout_s=settings.doc_timeout_s,
        read_memory_mb=settings.doc_memory_mb, max_unpacked_mb=settings.doc_max_unpacked_mb,
        max_pages=settings.doc_max_pages, max_chunks=settings.doc_max_chunks, large_file_mb=settings.large_file_mb,
    )  # fmt: skip
    knowledge = KnowledgeService(database, embedder, kb_dir=settings.kb_dir, options=options)
    extractor = Extractor(
        knowledge, engine, PROMPTS, max_tokens=settings.extraction_max_tokens, timeout_s=settings.extraction_timeout_s
    )
    extraction = ExtractionService(ExtractionStore(database), extractor, knowledge, TEMPLATES)
    return AppContext(
        settings=settings,
        database=database,
        engine=engine,
        chat=chat,
        cards=cards,
        telemetry=telemetry,
        admin=admin,
        knowledge=knowledge,
        extraction=extraction,
        answerer=Answerer(knowledge, engine, PROMPTS, k=settings.qa_sources, max_tokens=settings.max_tokens),
        summariser=Summariser(knowledge, engine, PROMPTS),
        embed=_embed_with(embedder),
    )


def _embed_with(embedder: Embedder) -> Callable[[list[str]], tuple[list[list[float]], int]]:
    def embed(texts: list[str]) -> tuple[list[list[float]], int]:
        return embedder.embed(texts).tolist(), sum(embedder.count_tokens(texts))

    return embed


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from app.server import make_server

    if "--die-with-parent" in sys.argv[1:]:
        from app.engine.lifecycle import die_with_parent

        die_with_parent(signal.SIGTERM)
    settings = Settings()
    refusal = settings.open_lan_problem()
    if refusal:
        print(refusal, file=sys.stderr, flush=True)
        return 2
    ctx = build_context(settings)
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
        log.error("the web app could not listen on %s:%s", settings.host, settings.port)
        return 1
    url = f"http://{settings.host}:{settings.port}"
    if _engine_ready(ctx, stop):
        print(f"Quartet ready at {url}", flush=True)
    elif not stop.is_set():
        print(f"Quartet web app at {url}; the engine is not ready: {ctx.engine.status().message}", flush=True)
    while not stop.wait(0.5) and thread.is_alive():
        pass
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
