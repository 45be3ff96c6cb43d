"""Encrypted PDFs of every kind current tools write (RC4, AES-128, AES-256) get the same flow: the
"password-protected" status, then they open with their password — made here by pypdf, not taken
from a corpus. A PDF with an empty user password (permissions only) opens without asking."""

from __future__ import annotations

from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import pypdf
import pytest
from gradio_client import handle_file

from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.loaders import LoadError, load
from app.knowledge.options import KnowledgeOptions
from app.knowledge.service import KnowledgeService
from tests.harness import Appliance, api_client, wait_until
from tests.test_knowledge_fixtures import text_pdf

MB = 2**20
ALGORITHMS = ["RC4-128", "AES-128", "AES-256"]
SECRET = "Cards cool at forty degrees"


def encrypted_pdf(path: Path, *, algorithm: str, user_password: str, blank_pages: int = 0) -> Path:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(BytesIO(text_pdf(SECRET))))
    for _ in range(blank_pages):
        writer.add_blank_page()
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm=algorithm)
    with path.open("wb") as out:
        writer.write(out)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_locked_pdf_asks_for_its_password_and_opens_with_it(tmp_path: Path, algorithm: str) -> None:
    path = encrypted_pdf(tmp_path / f"{algorithm}.pdf", algorithm=algorithm, user_password="open sesame")
    assert pypdf.PdfReader(path).is_encrypted
    for password, words in ((None, "is password-protected. Give its password"), ("wrong", "password given for")):
        with pytest.raises(LoadError) as caught:
            load(path, max_bytes=MB, password=password)
        assert caught.value.kind == "encrypted" and words in caught.value.message, caught.value.message
        assert "damaged" not in caught.value.message and "cryptography" not in caught.value.message
    assert load(path, max_bytes=MB, password="open sesame").pages[0].text == SECRET


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_pdf_with_an_empty_user_password_opens_without_one(tmp_path: Path, algorithm: str) -> None:
    path = encrypted_pdf(tmp_path / f"{algorithm}-open.pdf", algorithm=algorithm, user_password="")
    assert pypdf.PdfReader(path).is_encrypted
    assert load(path, max_bytes=MB).pages[0].text == SECRET


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.packaged()


@pytest.fixture
def service(tmp_path: Path, embedder: Embedder) -> Iterator[KnowledgeService]:
    options = KnowledgeOptions(watch=False, read_timeout_s=20)
    kb = KnowledgeService(Database(tmp_path / "kb.db"), embedder, kb_dir=None, options=options)
    kb.start()
    yield kb
    kb.stop()


def test_aes_pdfs_get_the_unlock_flow_of_the_documents_tab(service: KnowledgeService, tmp_path: Path) -> None:
    paths = [encrypted_pdf(tmp_path / f"{a}.pdf", algorithm=a, user_password="open sesame") for a in ALGORITHMS[1:]]
    open_one = encrypted_pdf(tmp_path / "aes-open.pdf", algorithm="AES-256", user_password="")
    service.ingest_paths([*paths, open_one])
    assert service.wait_idle(60)
    docs = {d.name: d for d in service.documents()}
    assert docs["aes-open.pdf"].status == "ok"
    for path in paths:
        locked = docs[path.name]
        assert (locked.status, locked.error_kind) == ("error", "encrypted"), locked.error
        assert locked.error and "password-protected" in locked.error
        service.unlock(locked.id, "wrong")
        assert service.wait_idle(60)
        still = service.document(locked.id)
        assert still is not None and still.error == f"The password given for {path.name} is wrong."
        service.unlock(locked.id, "open sesame")
        assert service.wait_idle(60)
        opened = service.document(locked.id)
        assert opened is not None and opened.status == "ok" and opened.chunk_count == 1
    assert {h.name for h in service.search("how cool are the cards", k=5)} >= {p.name for p in paths}


def test_aes_pdfs_open_through_the_running_appliance(appliance: Appliance, tmp_path: Path) -> None:
    """The Documents tab's route: upload, the "password-protected" status, the password, indexed."""
    c = api_client(appliance.url)
    paths = [
        encrypted_pdf(tmp_path / f"tab-{a}.pdf", algorithm=a, user_password="open sesame", blank_pages=n)
        for n, a in enumerate(ALGORITHMS[1:])
    ]
    c.predict([handle_file(str(p)) for p in paths], api_name="/ingest")

    def listed(wanted: str) -> list[dict[str, Any]] | None:
        docs = {d["name"]: d for d in c.predict(api_name="/documents")}
        found = [docs.get(p.name) for p in paths]
        return found if all(d and d["status"] == wanted for d in found) else None  # type: ignore[return-value]

    for locked in wait_until(lambda: listed("error"), timeout=120, every=0.5):
        assert locked["error_kind"] == "encrypted" and "password-protected" in locked["error"], locked
        c.predict(locked["id"], "open sesame", api_name="/unlock")
    aes128, aes256 = wait_until(lambda: listed("ok"), timeout=120, every=0.5)
    assert (aes128["pages"], aes128["chunks"], aes128["note"]) == (1, 1, None)
    assert (aes256["pages"], aes256["chunks"]) == (2, 1)
    assert aes256["note"] == "1 of 2 pages has no text (page 2), not even read by OCR: they are not searchable."
