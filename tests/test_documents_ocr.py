"""Scanned PDFs through the running appliance: uploaded with gradio_client `/ingest`, read by OCR, and a
question about them (in English, and in Chinese about a Chinese page) answered from the right page, whose
source says it was read by OCR. The tiny demo model's words are not checked: what it was given is."""

from __future__ import annotations

from pathlib import Path

from gradio_client import handle_file

from tests.gradio_api import Client
from tests.harness import Appliance
from tests.scans import CHINESE, ENGLISH, GERMAN, image_pdf, scan
from tests.test_documents import indexed

SCAN = "delivery-scan.pdf"  # page 1: German, page 2: English (the fan)
CHINESE_SCAN = "送货单-扫描.pdf"  # page 1: English, page 2: Chinese (the fan, 散热风扇)


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


def test_a_chinese_question_about_a_scanned_chinese_page_cites_that_page(appliance: Appliance, tmp_path: Path) -> None:
    """The scan has no text layer: the Chinese text is only in the image, so finding it needs OCR, and the
    Chinese question must find the Chinese page (full text and vectors) rather than the English one."""
    path = tmp_path / CHINESE_SCAN
    path.write_bytes(image_pdf([scan(ENGLISH, seed=3), scan(CHINESE, seed=4)]))
    c = Client(appliance.url, verbose=False)
    assert c.predict([handle_file(str(path))], api_name="/ingest")[0][0]["status"] == "queued"
    [doc] = indexed(c, CHINESE_SCAN)
    assert (doc["status"], doc["pages"], doc["note"]) == ("ok", 2, None), doc
    answer, sources = c.submit("散热风扇应该多久清洁一次？", [doc["id"]], api_name="/ask").result()
    assert answer.strip() and sources, f"no source was offered; the answer: {answer!r}"
    first = sources[0]
    assert (first["file"], first["page"], first["ocr"]) == (CHINESE_SCAN, 2, True), sources
    assert 0.5 < first["confidence"] <= 1, first
    assert "清洁" in first["text"] and "散热" in first["text"], f"the OCR'd text cited: {first['text']!r}"
