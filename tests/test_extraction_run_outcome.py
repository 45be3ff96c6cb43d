"""Issue 22 item 19: how a batch run ends is what its documents' results say. A run stopped while its
document waited in the engine's line said "1 of 1 documents — stopped" though none was read; a run whose
document timed out was listed "done" while its export said "status": "error". The run's bookkeeping is
driven here by a scripted extraction of one document (the extractor and the engine are tested elsewhere;
the store is a real SQLite file)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from app.database import Database
from app.extraction.extractor import Extraction, ExtractionFailed, Step
from app.extraction.service import ExtractionService, _Job
from app.extraction.store import ExtractionStore
from app.knowledge.store import DocumentInfo
from app.ui.extraction_tab import _progress, _run_choices

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}}
DOC = DocumentInfo(7, "/kb/a.pdf", "a.pdf", "", "ok", None, None, None, 1, 1, 1, *[None] * 7)


class Scripted(ExtractionService):
    """The service with one document's extraction played by `script` (what extract_one would yield)."""

    def __init__(self, store: ExtractionStore, script: Callable[[Callable[[], bool]], Iterator[Any]]) -> None:
        super().__init__(store, None, None, ROOT / "assets/schemas")  # type: ignore[arg-type]
        self.script = script

    def extract_one(self, document_id: int, schema: dict[str, Any], **limits: Any) -> Iterator[Step | Extraction]:
        return self.script(limits["cancelled"])  # type: ignore[no-any-return]


def run(tmp_path: Path, script: Callable[[Callable[[], bool]], Iterator[Any]]) -> Any:
    store = ExtractionStore(Database(tmp_path / "q.db"))
    service = Scripted(store, script)
    run_id = store.create_run(template="t", schema=SCHEMA, title="Invoice", documents_total=1, owner="user:ada")
    service._run(_Job(run_id, (DOC,), SCHEMA))
    return store, store.run(run_id)


def test_a_run_stopped_while_its_document_waited_read_no_document(tmp_path: Path) -> None:
    def waiting_then_stopped(cancelled: Callable[[], bool]) -> Iterator[Any]:
        yield Step("reading part 1 of 1", waiting=2)
        assert cancelled()
        raise ExtractionFailed("stopped before the end", kind="cancelled")

    store = ExtractionStore(Database(tmp_path / "q.db"))
    service = Scripted(store, waiting_then_stopped)
    run_id = store.create_run(template="t", schema=SCHEMA, title="Invoice", documents_total=1, owner="user:ada")
    original = service.script

    def stop_then_run(cancelled: Callable[[], bool]) -> Iterator[Any]:
        service._stopped.add(run_id)  # Stop pressed while the document waits in line
        return original(cancelled)

    service.script = stop_then_run
    service._run(_Job(run_id, (DOC,), SCHEMA))
    finished = store.run(run_id)
    assert finished is not None and (finished.status, finished.documents_done) == ("stopped", 0)
    assert store.results(run_id) == []
    assert _progress(finished, "") == "**Invoice** — stopped by the user before any document"


def test_a_run_whose_document_timed_out_is_listed_as_an_error(tmp_path: Path) -> None:
    def timed_out(cancelled: Callable[[], bool]) -> Iterator[Any]:
        yield Extraction(7, "a.pdf", {}, {}, 1, problems=["part 1: stopped after 300 s without finishing"])

    store, finished = run(tmp_path, timed_out)
    results = store.results(finished.id)
    assert [r.status for r in results] == ["error"]  # what the JSON export says of the document
    assert finished.status == "error", "listed 'done' while its document's result is an error"
    assert "stopped after 300 s without finishing" in finished.error
    assert "— error" in _run_choices([finished])[0][0] and "⚠" in _progress(finished, "")
