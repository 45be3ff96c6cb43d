"""A scanned PDF through the running appliance: uploaded with gradio_client `/ingest`, read by OCR, and a
question about it answered from the right page, whose source says it was read by OCR."""

from __future__ import annotations

from pathlib import Path

from gradio_client import Client, handle_file

from tests.harness import Appliance
from tests.scans import ENGLISH, GERMAN, image_pdf, scan
from tests.test_documents import indexed

SCAN = "delivery-scan.pdf"  # page 1: German, page 2: English (the fan)


def test_a_question_about_a_scanned_pdf_cites_its_page_read_by_ocr(appliance: Appliance, tmp_path: Path) -> None:
    path = tmp_path / SCAN
    path.write_bytes(image_pdf([scan(GERMAN), scan(ENGLISH)]))
    c = Client(appliance.url, verbose=False)
    assert c.predict([handle_file(str(path))], api_name="/ingest")[0][0]["status"] == "queued"
    [doc] = indexed(c, SCAN)
    assert (doc["status"], doc["pages"], doc["note"]) == ("ok", 2, None), doc
    job = c.submit("How often must the cooling fan be cleaned?", [doc["id"]], api_name="/ask")
    answer, sources = job.result()
    assert answer.strip() and sources, "no source was offered"
    first = sources[0]
    assert (first["file"], first["page"], first["ocr"]) == (SCAN, 2, True), sources
    assert 0.5 < first["confidence"] <= 1 and "cooling fan" in first["text"]
