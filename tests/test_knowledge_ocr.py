"""Scanned pages read by OCR in the reader process: the engine on images, scanned and mixed PDFs, image
files, rotated pages, hostile images, the lane of small files, and OCR turned off. The scans are made
here (tests/scans.py): text rendered with Noto Sans CJK, with noise, blur and skew."""

from __future__ import annotations

import io
from pathlib import Path

import pypdf
import pytest

from app.knowledge.loaders import LoadError, ReadLimits, ScanTooLong, load
from app.knowledge.loaders.ocr import read_image
from tests.documents import pdf, text_lines
from tests.scans import (
    CHINESE,
    ENGLISH,
    GERMAN,
    cer,
    image_pdf,
    png,
    png_header,
    scan,
    strip,
    tiff,
    truncated_jpeg,
    vertical_scan,
)
from tests.table_documents import lab_report

pytestmark = pytest.mark.slow  # Tesseract over whole pages: seconds a test

MB = 2**20
# measured (bench/ocr.py): English 0.000, German 0.014, Chinese 0.039, vertical Chinese 0.020 — bounds with room
BOUND = {"english": 0.05, "german": 0.08, "chinese": 0.15, "vertical": 0.15}


def text(lines: list[str]) -> str:
    return "\n".join(lines)


@pytest.mark.parametrize(("lines", "bound"), [(GERMAN, BOUND["german"]), (CHINESE, BOUND["chinese"])])
def test_german_and_chinese_scans_are_read(lines: list[str], bound: float) -> None:
    found = read_image(scan(lines))
    assert cer(text(lines), found.text) <= bound, found.text
    assert 0.5 < found.confidence <= 1


@pytest.mark.parametrize("turn", [90, 180])
def test_a_turned_page_is_set_upright_before_reading(turn: int) -> None:
    found = read_image(scan(CHINESE, rotate=turn))
    assert found.rotated == turn and cer(text(CHINESE), found.text) <= BOUND["chinese"], found.text


def test_a_page_of_vertical_chinese_is_read_in_reading_order() -> None:
    """Columns top to bottom, right to left: read across, as horizontal lines, it is noise (CER 1.0)."""
    found = read_image(vertical_scan(CHINESE))
    assert found.vertical and cer(text(CHINESE), found.text) <= BOUND["vertical"], found.text
    assert found.text.index("送货单") < found.text.index("四张") < found.text.index("技术支持"), "out of order"
    assert not read_image(scan(CHINESE)).vertical, "a horizontal Chinese page was read as vertical"


def test_a_noisy_page_that_osd_takes_for_upside_down_is_read_upright() -> None:
    """Small digits in noise: OSD says 180° (read so: confidence 0.44, CER 0.91); upright it is 0.82, 0.017."""
    results = lab_report().pages[0][5:-2]
    found = read_image(scan(results, width=1300, size=24, noise=50, blur=0.8))
    assert found.rotated == 0 and cer(text(results), found.text) <= BOUND["english"], found


def test_a_scanned_pdf_is_read_page_by_page_with_progress(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(image_pdf([scan(ENGLISH), scan(GERMAN)]))
    seen: list[tuple[int, int]] = []
    doc = load(path, max_bytes=MB * 20, on_ocr=lambda page, total: seen.append((page, total)))
    assert seen == [(1, 2), (2, 2)] and doc.note is None
    assert [p.ocr is not None for p in doc.pages] == [True, True]
    assert cer(text(ENGLISH), doc.pages[0].text) <= BOUND["english"]
    assert "München" in doc.pages[1].text


def test_a_mixed_pdf_keeps_its_text_pages_and_reads_the_image_page(tmp_path: Path) -> None:
    writer = pypdf.PdfWriter()
    for part in (pdf([text_lines(["A page with a text layer about cabling."])]), image_pdf([scan(ENGLISH)])):
        for page in pypdf.PdfReader(io.BytesIO(part)).pages:
            writer.add_page(page)
    path = tmp_path / "mixed.pdf"
    with path.open("wb") as out:
        writer.write(out)
    doc = load(path, max_bytes=MB * 20)
    assert doc.pages[0].text.strip() == "A page with a text layer about cabling." and doc.pages[0].ocr is None
    assert doc.pages[1].ocr is not None and cer(text(ENGLISH), doc.pages[1].text) <= BOUND["english"]


def test_png_and_multi_page_tiff_are_read(tmp_path: Path) -> None:
    (tmp_path / "note.png").write_bytes(png(scan(GERMAN)))
    (tmp_path / "fax.tiff").write_bytes(tiff([scan(ENGLISH), scan(CHINESE)]))
    assert "Störungen" in load(tmp_path / "note.png", max_bytes=MB * 20).pages[0].text
    fax = load(tmp_path / "fax.tiff", max_bytes=MB * 20)
    assert len(fax.pages) == 2 and cer(text(CHINESE), fax.pages[1].text) <= BOUND["chinese"]


@pytest.mark.parametrize(
    ("name", "make", "kind", "says"),
    [
        ("bomb.png", lambda: png_header(100_000, 100_000), "too_large", "million pixels"),
        ("huge.png", lambda: png_header(20_000, 20_000), "too_large", "20,000 × 20,000 pixels"),
        ("cut.jpg", truncated_jpeg, "corrupt", "damaged"),
        ("strip.png", strip, "no_text", "too thin"),
    ],
)
def test_hostile_images_get_a_clear_status(tmp_path: Path, name: str, make: object, kind: str, says: str) -> None:
    path = tmp_path / name
    path.write_bytes(make())  # type: ignore[operator]
    with pytest.raises(LoadError) as caught:
        load(path, max_bytes=MB * 20, limits=ReadLimits(timeout_s=60, memory_mb=512))
    assert caught.value.kind == kind and says in caught.value.message and name in caught.value.message


def test_a_long_scan_leaves_the_lane_of_small_files(tmp_path: Path) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(image_pdf([scan(ENGLISH, noise=0), scan(ENGLISH, noise=0)]))
    with pytest.raises(ScanTooLong):
        load(path, max_bytes=MB * 20, limits=ReadLimits(ocr_max_pages=1))


def test_with_ocr_turned_off_scans_say_so(tmp_path: Path) -> None:
    (tmp_path / "scan.pdf").write_bytes(image_pdf([scan(ENGLISH)]))
    (tmp_path / "note.png").write_bytes(png(scan(ENGLISH)))
    off = ReadLimits(ocr=False)
    with pytest.raises(LoadError) as caught:
        load(tmp_path / "scan.pdf", max_bytes=MB * 20, limits=off)
    assert caught.value.kind == "no_text" and "OCR is not available" in caught.value.message
    with pytest.raises(LoadError) as caught:
        load(tmp_path / "note.png", max_bytes=MB * 20, limits=off)
    assert caught.value.kind == "no_text" and "knowledge.ocr" in caught.value.message
