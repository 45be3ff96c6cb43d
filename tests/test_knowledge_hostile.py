"""Big and hostile files of every format cannot take the box: each is refused quickly or read in part
(saying so), in the limited reader process; pagination is linear; odd encodings and markup are read
as a person would read them. The files are made here, at the sizes an attack run used."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pytest

from app.knowledge.loaders import LoadError, Reader, ReadLimits, load
from app.knowledge.loaders.decoding import decode_text
from app.knowledge.loaders.html import visible_text
from app.knowledge.loaders.text import paginate
from tests.test_knowledge_fixtures import slow_pdf, worker_children

MB = 2**20
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
SMALL = ReadLimits(timeout_s=30, memory_mb=256, max_pages=20)


def docx_of(path: Path, *, paragraphs: int = 0, run_mb: int = 0) -> Path:
    """A .docx written as a stream: `paragraphs` short paragraphs, or one text run of `run_mb` MiB."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as xml:
            xml.write(f'<?xml version="1.0"?><w:document xmlns:w="{W}"><w:body>'.encode())
            paragraph = b"<w:p><w:r><w:t>The fourth card runs hot under load. </w:t></w:r></w:p>"
            for _ in range(0, paragraphs, 1000):
                xml.write(paragraph * 1000)
            if run_mb:
                xml.write(b"<w:p><w:r><w:t>")
                for _ in range(run_mb):
                    xml.write(b"lorem ipsum dolor sit amet " * (MB // 27) + b" " * (MB % 27))
                xml.write(b"</w:t></w:r></w:p>")
            xml.write(b"</w:body></w:document>")
    return path


def timed_load(path: Path, limits: ReadLimits = SMALL) -> tuple[float, LoadError | None, list[str], str | None]:
    started = time.monotonic()
    try:
        doc = load(path, max_bytes=500 * MB, limits=limits)
    except LoadError as err:
        return time.monotonic() - started, err, [], None
    return time.monotonic() - started, None, [p.text for p in doc.pages], doc.note


@pytest.mark.slow
def test_a_docx_zip_bomb_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    bomb = docx_of(tmp_path / "bomb.docx", paragraphs=2_720_000)  # 190 MB (182 MiB) of XML in 600 kB
    assert bomb.stat().st_size < 1 * MB
    with zipfile.ZipFile(bomb) as archive:
        assert archive.getinfo("word/document.xml").file_size > 190e6
    took, err, _, _ = timed_load(bomb, ReadLimits(max_unpacked_mb=100))
    assert err is not None and err.kind == "too_large", err
    assert "unpacks to 182 MB" in err.message and "at most 100 MB" in err.message
    assert took < 5


@pytest.mark.slow
def test_a_docx_whose_text_is_one_huge_run_is_read_in_part_in_little_memory(tmp_path: Path) -> None:
    """190 MB in one <w:t>: parsed as a stream (the reader is allowed 256 MB), cut at the page limit."""
    run = docx_of(tmp_path / "one-run.docx", run_mb=190)
    limits = ReadLimits(timeout_s=30, memory_mb=256, max_pages=20, max_unpacked_mb=300)
    took, err, pages, note = timed_load(run, limits)
    assert err is None, err
    assert len(pages) == 20 and all(2000 < len(p) <= 3000 for p in pages) and pages[0].startswith("lorem ipsum")
    assert note and note.startswith("Indexed in part: only its first 20 pages were read")
    assert took < 10
    assert worker_children(os.getpid()) == []


@pytest.mark.slow
def test_a_csv_of_a_million_rows_is_read_in_part_quickly(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    with path.open("w") as out:
        out.write("id,card,temperature,comment\n")
        for start in range(0, 1_000_000, 10_000):
            rows = range(start, start + 10_000)
            out.writelines(f"{i},{i % 4},{40 + i % 30},reading number {i} is fine\n" for i in rows)
    assert path.stat().st_size > 33 * MB
    took, err, pages, note = timed_load(path)
    assert err is None and len(pages) == 20 and note and "Indexed in part" in note
    first = "id: 0; card: 0; temperature: 40; comment: reading number 0 is fine"
    assert pages[0].splitlines()[:2] == ["id | card | temperature | comment", first]
    assert took < 5


def test_a_20_mb_one_line_html_file_is_read_in_part_quickly(tmp_path: Path) -> None:
    path = tmp_path / "one-line.html"
    words = b"the cards share one fan and two cores " * (20 * MB // 38)
    path.write_bytes(b"<html><body><p>" + words + b"</p></body></html>")
    took, err, pages, note = timed_load(path)
    assert err is None and len(pages) == 20 and note and "Indexed in part" in note
    assert pages[0].startswith("the cards share one fan")
    assert took < 5


def test_an_html_comment_left_open_shows_nothing(tmp_path: Path) -> None:
    path = tmp_path / "comment.html"
    path.write_bytes(b"<html><body><h1>Fan speeds</h1><p>Visible text.</p><!-- " + b"commented out text\n" * 300_000)
    took, err, pages, _ = timed_load(path, ReadLimits(timeout_s=30, max_pages=2000))
    assert took < 5
    assert err is None and pages == ["# Fan speeds\n\nVisible text."]
    only_comment = tmp_path / "only-comment.html"
    only_comment.write_bytes(b"<html><body><!-- " + b"nothing to see " * 10_000)
    _, err, _, _ = timed_load(only_comment)
    assert err is not None and err.kind == "empty" and "only-comment.html" in err.message


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_bom_is_read_as_text(tmp_path: Path, encoding: str) -> None:
    text = "Card 3 runs at 71 °C.\nDie Größe der Karte: 10 cm.\n第四张卡的温度是七十一度。\n" * 50
    assert decode_text(text.encode(encoding), name="x.txt") == text
    path = tmp_path / "notes.txt"
    path.write_bytes(text.encode(encoding))
    _, err, pages, _ = timed_load(path)
    assert err is None and "".join(pages).replace("\n", "") == text.replace("\n", "")


def test_binary_files_with_nul_bytes_are_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "firmware.txt"
    path.write_bytes(bytes(range(256)) * 64 + b"\x00\x00\x10\x00" * 512)
    _, err, _, _ = timed_load(path)
    assert err is not None and err.kind == "unsupported" and "binary file" in err.message


def test_pagination_is_linear_in_the_text() -> None:
    """40 MB without a line end: the old cut (copying the rest at each page) took 3.6 s for 20 MB."""
    text = "abcdefghij " * (40 * MB // 11)
    started = time.monotonic()
    pages = paginate(text, page_chars=3000)
    assert time.monotonic() - started < 3
    assert len(pages) > 40 * MB // 3000 and "".join(p.text for p in pages) == text.strip("\n")


@pytest.mark.slow
def test_a_kept_reader_serves_document_after_document_and_starts_afresh_after_a_bad_one(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nCard 2 was replaced.")
    slow = tmp_path / "slow.pdf"
    slow.write_bytes(slow_pdf())
    reader = Reader()
    try:
        for _ in range(3):
            assert load(notes, max_bytes=MB, reader=reader).pages[0].text == "# Notes\n\nCard 2 was replaced."
        kept = worker_children(os.getpid())
        assert len(kept) == 1, "one process serves one document after another"
        with pytest.raises(LoadError) as caught:
            load(slow, max_bytes=MB, reader=reader, timeout_s=1.5)
        assert caught.value.kind == "timeout" and worker_children(os.getpid()) == []
        assert load(notes, max_bytes=MB, reader=reader).pages[0].text.startswith("# Notes")
        assert worker_children(os.getpid()) not in ([], kept), "a fresh process after the timeout"
    finally:
        reader.close()
    assert worker_children(os.getpid()) == []


def test_html_text_does_not_depend_on_where_the_stream_was_cut() -> None:
    html = (
        "<html><head><title>Card\n guide</title></head><body><h1>Installing &amp; cabling</h1>\n\t \nIntro<p>Connect"
        " card 0\n first.</p> <!-- a note -->  <table><tr><td>card</td> <td>port</td></tr></table>\n\n\n"
        "<p>中文段落。</p><script>var a = '<p>';</script>  \n<li>one</li><li>two words</li>  end</body></html>"
    )
    whole = "".join(visible_text([html]))
    assert whole.startswith("Card\nguide\n\n# Installing & cabling\n\nIntro\nConnect card 0\nfirst.")
    assert "var" not in whole and "note" not in whole
    for size in (1, 2, 3, 7, 16):
        assert "".join(visible_text(html[i : i + size] for i in range(0, len(html), size))) == whole, size


def test_nul_bytes_that_only_look_like_utf16_are_refused() -> None:
    """`abc\\0` repeated: zeros on every other byte pair, but read as UTF-16 it is "扡c扡c…"."""
    with pytest.raises(LoadError, match="binary file") as refused:
        decode_text(b"abc\x00" * 10_000, name="abc.txt")
    assert refused.value.kind == "unsupported"
