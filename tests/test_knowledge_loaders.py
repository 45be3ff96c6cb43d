"""Loaders on made and hostile files: a clear LoadError for each way a file can be wrong.

The tests write their own documents (tests/documents.py); the tests taking the `corpus` fixture repeat the
checks on real-world PDFs when that corpus is beside the checkout, and are skipped, saying so, when it is not.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pypdf
import pytest

from app.knowledge.loaders import LoadError, ReadLimits, load
from app.knowledge.loaders.text import decode_text, paginate
from tests.documents import all_chinese, broken_page_tree, chinese, chinese_prose, encrypted, wrapped
from tests.library import (
    DELIVERY,
    HANDBOOK,
    LEFT,
    PASSWORD,
    RIGHT,
    chinese_pdf,
    handbook,
    newsletter,
    scanned_delivery,
    service_form,
)
from tests.test_knowledge_fixtures import (
    docx,
    memory_hungry_pdf,
    slow_pdf,
    text_pdf,
    worker_children,
)

MB = 2**20


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


NO_OCR = ReadLimits(ocr=False)  # the reading without OCR (setting knowledge.ocr = false)


def failure(path: Path, **options: object) -> LoadError:
    with pytest.raises(LoadError) as caught:
        load(path, max_bytes=options.pop("max_bytes", 50 * MB), **options)  # type: ignore[arg-type]
    return caught.value


def test_pdf_pages_are_read_in_a_child_with_progress(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    doc = load(write(tmp_path / "handbook.pdf", handbook()), max_bytes=MB, on_page=lambda d, t: seen.append((d, t)))
    assert [p.number for p in doc.pages] == [1, 2, 3, 4]
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    for page, written in zip(doc.pages, HANDBOOK, strict=True):
        assert page.text.split() == " ".join(wrapped(written)).split(), f"page {page.number} reads differently"
    assert worker_children(os.getpid()) == []


def test_real_pdf_pages_are_read_in_a_child_with_progress(corpus: Path) -> None:
    seen: list[tuple[int, int]] = []
    doc = load(corpus / "pdf" / "pdflatex-4-pages.pdf", max_bytes=50 * MB, on_page=lambda d, t: seen.append((d, t)))
    assert [p.number for p in doc.pages] == [1, 2, 3, 4]
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert "Hello, here is some text without a meaning" in doc.pages[0].text
    assert worker_children(os.getpid()) == []


@pytest.mark.slow
def test_encrypted_pdf_needs_its_password(tmp_path: Path) -> None:
    locked = write(tmp_path / "locked.pdf", encrypted(handbook(), PASSWORD))
    err = failure(locked)
    assert err.kind == "encrypted" and "password-protected" in err.message
    assert failure(locked, password="wrong").message == "The password given for locked.pdf is wrong."
    doc = load(locked, max_bytes=MB, password=PASSWORD)
    assert len(doc.pages) == 4 and "450 watts" in doc.pages[1].text


def test_a_real_encrypted_pdf_needs_its_password(corpus: Path) -> None:
    locked = corpus / "pdf" / "libreoffice-writer-password.pdf"
    err = failure(locked)
    assert err.kind == "encrypted" and "password-protected" in err.message
    assert failure(locked, password="wrong").message == f"The password given for {locked.name} is wrong."
    doc = load(locked, max_bytes=50 * MB, password="openpassword")
    assert "Lorem ipsum" in doc.pages[0].text


def test_pages_without_a_text_layer(tmp_path: Path) -> None:
    """Pages 4 and 5 of the delivery note are pictures only. Alone, they give no_text (OCR turned off)."""
    source = write(tmp_path / "delivery.pdf", scanned_delivery())
    mixed = load(source, max_bytes=MB, limits=NO_OCR)
    assert mixed.blank_pages == [4, 5] and mixed.note and "OCR is not available" in mixed.note
    assert [p.text.strip() for p in mixed.pages[:3]] == DELIVERY
    writer = pypdf.PdfWriter()
    for number in (4, 5):
        writer.add_page(pypdf.PdfReader(source).pages[number - 1])
    scanned = tmp_path / "scan.pdf"
    with scanned.open("wb") as out:
        writer.write(out)
    err = failure(scanned, limits=NO_OCR)
    assert err.kind == "no_text" and "OCR is not available" in err.message and "2 pages" in err.message


def test_real_pages_without_a_text_layer(tmp_path: Path, corpus: Path) -> None:
    """imagemagick-images.pdf: pages 4 and 5 are images only. Alone, they give no_text (OCR turned off)."""
    pdfs = corpus / "pdf"
    mixed = load(pdfs / "imagemagick-images.pdf", max_bytes=50 * MB, limits=NO_OCR)
    assert mixed.blank_pages == [4, 5] and mixed.note and "OCR is not available" in mixed.note
    writer = pypdf.PdfWriter()
    for number in (4, 5):
        writer.add_page(pypdf.PdfReader(pdfs / "imagemagick-images.pdf").pages[number - 1])
    scanned = tmp_path / "scan.pdf"
    with scanned.open("wb") as out:
        writer.write(out)
    err = failure(scanned, limits=NO_OCR)
    assert err.kind == "no_text" and "OCR is not available" in err.message and "2 pages" in err.message


@pytest.mark.parametrize(
    ("data", "kind", "words"),
    [
        (b"", "empty", "empty"),
        (b"%PDF-1.4\nnot really", "corrupt", "damaged"),
        (b"<html>not a pdf</html>", "corrupt", "damaged"),
    ],
)
def test_broken_pdfs(tmp_path: Path, data: bytes, kind: str, words: str) -> None:
    err = failure(write(tmp_path / "broken.pdf", data))
    assert err.kind == kind and words in err.message and "broken.pdf" in err.message


@pytest.mark.slow
def test_truncated_pdf_is_corrupt_or_partly_read(tmp_path: Path) -> None:
    """Cut anywhere, a PDF is either refused as damaged or read as far as it goes — never a crash."""
    data = newsletter()
    for cut in (len(data) // 4, len(data) // 2, len(data) - 200):
        path = write(tmp_path / "half.pdf", data[:cut])
        try:
            doc = load(path, max_bytes=MB)
        except LoadError as err:
            assert err.kind in ("corrupt", "no_text") and "half.pdf" in err.message
        else:
            assert doc.pages
    refused = failure(write(tmp_path / "tree.pdf", broken_page_tree()))
    assert refused.kind == "corrupt" and "tree.pdf is damaged" in refused.message


def test_two_columns_read_column_by_column_with_hyphenated_words_joined(tmp_path: Path) -> None:
    page = load(write(tmp_path / "news.pdf", newsletter()), max_bytes=MB).pages[2].text
    left, right = " ".join(LEFT), " ".join(RIGHT).replace("kilo- metres", "kilometres")
    flowing = " ".join(page.split())
    assert " ".join(left.split()) in flowing and " ".join(right.split()) in flowing
    assert flowing.index("Lake Saimaa") < flowing.index("Our team hiking trip"), "the right column came first"
    assert "eighteen kilometres from Malham" in page, "a word hyphenated at a line end was not joined"


@pytest.mark.slow
def test_a_form_and_a_chinese_pdf_read_their_text(tmp_path: Path) -> None:
    form = load(write(tmp_path / "form.pdf", service_form()), max_bytes=MB)
    assert len(form.pages) == 1 and "Service request form." in form.pages[0].text
    lines = [line for line in chinese().splitlines() if line.strip()]
    text = load(write(tmp_path / "部署.pdf", chinese_pdf()), max_bytes=MB).pages[0].text
    assert "每张卡上运行一个 RPC 服务器进程" in text and lines[0] in text
    assert "量化到 4 比特以后" in text and "，" not in text, "full-width commas should read as ASCII ones (NFKC)"


def test_truncated_real_pdf_is_corrupt_or_partly_read(tmp_path: Path, corpus: Path) -> None:
    """Half of a real PDF: either refused as damaged or read as far as it goes — never a crash."""
    pdfs = corpus / "pdf"
    data = (pdfs / "multicolumn.pdf").read_bytes()
    path = write(tmp_path / "half.pdf", data[: len(data) // 2])
    try:
        doc = load(path, max_bytes=50 * MB)
    except LoadError as err:
        assert err.kind in ("corrupt", "no_text") and "half.pdf" in err.message
    else:
        assert doc.pages
    assert failure(pdfs / "unreadablemetadata.pdf").kind == "corrupt"


@pytest.mark.slow
def test_a_pdf_that_takes_too_long_is_killed(tmp_path: Path) -> None:
    path = write(tmp_path / "slow.pdf", slow_pdf())
    started = time.monotonic()
    err = failure(path, timeout_s=1.5)
    assert err.kind == "timeout" and "1.5 s" in err.message
    assert time.monotonic() - started < 5
    assert worker_children(os.getpid()) == [], "the reader process outlived its time limit"


@pytest.mark.slow
def test_a_pdf_that_needs_too_much_memory_is_stopped(tmp_path: Path) -> None:
    err = failure(write(tmp_path / "hungry.pdf", memory_hungry_pdf()), memory_mb=150, timeout_s=60)
    assert err.kind == "too_large" and "150 MB of memory" in err.message


def test_size_limit_and_unsupported_types(tmp_path: Path) -> None:
    err = failure(write(tmp_path / "big.txt", b"x" * 2048), max_bytes=1024)
    assert err.kind == "too_large" and "big.txt" in err.message
    err = failure(write(tmp_path / "sheet.xlsx", b"PK\x03\x04"))
    assert err.kind == "unsupported" and ".xlsx files are not supported" in err.message
    assert failure(write(tmp_path / "empty.md", b"")).kind == "empty"
    assert failure(write(tmp_path / "blank.txt", b" \n\n\t ")).kind == "empty"


def test_text_encodings() -> None:
    text = all_chinese()[:2000]
    assert decode_text(text.encode("gbk"), name="x.txt") == text
    assert decode_text(text.encode("gb18030"), name="x.txt").startswith(text[:50])
    assert decode_text("\ufeffMit BOM".encode(), name="x.txt") == "Mit BOM"
    assert decode_text("Größe".encode("utf-16"), name="x.txt") == "Größe"
    assert decode_text("Straße und Größe, café".encode("cp1252"), name="x.txt") == "Straße und Größe, café"


def test_binary_content_named_txt_is_refused(tmp_path: Path) -> None:
    err = failure(write(tmp_path / "photo.txt", scanned_delivery()[:4096] + b"\x00\x01"))
    assert err.kind == "unsupported" and "binary file" in err.message
    noise = bytes((i * 7919 + 13) % 256 for i in range(4096)).replace(b"\x00", b"\x01")
    err = failure(write(tmp_path / "noise.txt", noise))
    assert err.kind == "corrupt" and "Save it as UTF-8" in err.message


def test_pseudo_pages_cut_at_sentence_ends() -> None:
    text = chinese_prose()
    pages = paginate(text, page_chars=800)
    assert len(pages) >= 4 and [p.number for p in pages] == list(range(1, len(pages) + 1))
    assert all(len(p.text) <= 800 for p in pages)
    assert all(p.text.rstrip()[-1] in "。！？；.!?;”）)" for p in pages[:-1]), "a page ended mid-sentence"
    assert "".join(p.text for p in pages).replace("\n", "") == text.replace("\n", "")
    assert [p.text for p in paginate("one\fpage two\f\fthree", page_chars=100)] == ["one", "page two", "three"]


def test_html_keeps_visible_text_and_headings(tmp_path: Path) -> None:
    html = (
        "<html><head><title>Card guide</title><style>p {color: red}</style></head><body>"
        "<h1>Installing &amp; cabling</h1><p>Connect card 0 first.</p><script>alert('x')</script>"
        "<table><tr><td>card</td><td>port</td></tr></table><p>中文段落。</p></body></html>"
    )
    text = load(write(tmp_path / "guide.html", html.encode()), max_bytes=MB).pages[0].text
    assert "# Installing & cabling" in text and "Connect card 0 first." in text and "中文段落。" in text
    assert "alert" not in text and "color" not in text and "Card guide" in text


def test_docx_paragraphs_headings_and_tables(tmp_path: Path) -> None:
    data = docx([("Heading1", "Setup"), ("", "Plug in the four cards."), ("berschrift2", "Kühlung")], [["a", "b"]])
    text = load(write(tmp_path / "setup.docx", data), max_bytes=MB).pages[0].text
    assert text.split("\n\n") == ["# Setup", "Plug in the four cards.", "## Kühlung", "a | b"]
    err = failure(write(tmp_path / "fake.docx", b"not a zip at all"))
    assert err.kind == "corrupt" and "fake.docx" in err.message


def test_csv_rows_read_on_their_own(tmp_path: Path) -> None:
    data = b"country;capital;population\nAustria;Vienna;8.9\nBelgium;Brussels;11.5\n"
    text = load(write(tmp_path / "eu.csv", data), max_bytes=MB).pages[0].text
    assert "country: Austria; capital: Vienna; population: 8.9" in text.splitlines()


def test_a_hand_made_pdf_reads_back(tmp_path: Path) -> None:
    doc = load(write(tmp_path / "hello.pdf", text_pdf("Hello from a tiny PDF")), max_bytes=MB)
    assert doc.pages[0].text == "Hello from a tiny PDF" and doc.note is None
