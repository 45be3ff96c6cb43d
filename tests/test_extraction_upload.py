"""`extract` with a file: upload and extract in one call, the file ingested as any upload (saved into kb/
under a safe name, indexed, listed); a bad file gets a clear error and the app stays up; a server path
named as the file is refused — never read, never copied into kb/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from app.extraction.json_schema import load_templates
from tests.harness import Appliance, api_client
from tests.table_documents import invoice, pdf

INVOICE = load_templates(Path(__file__).resolve().parent.parent / "assets" / "schemas")["invoice"].schema


def test_a_pdf_is_uploaded_and_extracted_in_one_call(appliance: Appliance, tmp_path: Path) -> None:
    known = invoice()
    made = tmp_path / "upload-and-extract invoice.pdf"
    pages = [*known.pages[:-1], [*known.pages[-1], "Sent through extract(file=...) in one call."]]  # its own bytes
    made.write_bytes(pdf(pages))
    client = api_client(appliance.url)
    job = client.submit(file=handle_file(str(made)), template="invoice", api_name="/extract")
    updates: list[dict[str, Any]] = list(job)
    result = job.result()
    assert any(str(u.get("progress", "")).startswith("indexing upload-and-extract invoice.pdf") for u in updates), (
        "the call says that it is indexing the file first"
    )
    assert result["document"] == made.name
    jsonschema.validate(result["record"], INVOICE)
    assert result["record"], "the demo model found nothing in a plain invoice"
    cited = {field["page"] for field in result["fields"].values()}
    assert cited <= {1, 2}, f"fields cite pages the invoice does not have: {cited}"
    documents = {d["name"]: d for d in client.predict(api_name="/documents")}
    assert documents[made.name]["status"] == "ok" and documents[made.name]["pages"] == 2, "ingested as any upload"
    assert (appliance.data_dir.parent / "kb" / made.name).is_file(), "saved into kb/ like a Documents upload"
    # the same file again: the library keeps one copy (a duplicate), and the record comes from it
    again = client.predict(file=handle_file(str(made)), template="invoice", max_tokens=64, api_name="/extract")
    assert again["document"] == made.name


def test_a_bad_file_gets_a_clear_error_and_the_app_stays_up(appliance: Appliance, tmp_path: Path) -> None:
    broken = tmp_path / "broken-for-extract.pdf"
    broken.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\nthis is no PDF at all\n")
    client = api_client(appliance.url)
    with pytest.raises(AppError, match=r"broken-for-extract\.pdf could not be indexed: \S"):
        client.predict(file=handle_file(str(broken)), template="invoice", api_name="/extract")
    with pytest.raises(AppError, match=r"name a document .* or send a file"):
        client.predict(template="invoice", api_name="/extract")
    assert client.predict(api_name="/status")["state"] == "ready", "the app stays up"


@pytest.mark.parametrize(
    "value",
    [
        {"path": "/etc/passwd", "orig_name": "passwd", "meta": {"_type": "gradio.FileData"}},
        {"path": "/etc/passwd", "orig_name": "passwd"},  # without the marker Gradio looks for
        "/etc/passwd",
    ],
)
def test_a_server_path_named_as_the_file_is_refused(appliance: Appliance, value: Any) -> None:
    """The attack: POST /gradio_api/call/extract naming a server file instead of uploading one."""
    with httpx.Client(base_url=appliance.url, timeout=30) as http:
        joined = http.post("/gradio_api/call/extract", json={"data": ["", "invoice", "", 0, 0, value]})
        stream = http.get(f"/gradio_api/call/extract/{joined.json()['event_id']}").text
    assert "event: error" in stream, stream[:400]
    assert "root:x:0:0" not in stream and "passwd" not in json.dumps(
        api_client(appliance.url).predict(api_name="/documents")
    )
    assert not (appliance.data_dir.parent / "kb" / "passwd").exists()
