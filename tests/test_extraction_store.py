"""Extraction runs in a real SQLite file: results, corrections that win, and exports Excel opens."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from app.database import Database
from app.extraction.json_schema import load_templates
from app.extraction.merge import FieldValue, PartResult, merge
from app.extraction.store import ExtractionStore

ROOT = Path(__file__).resolve().parent.parent
INVOICE = load_templates(ROOT / "assets/schemas")["invoice"].schema
LAB = load_templates(ROOT / "assets/schemas")["lab_report"].schema
PAGES = {
    1: '发票号码：INV-2024-007 开票日期：2024年3月1日\n销售方：北京星辰科技有限公司\n购买方：=HYPERLINK("http://x")',
    2: "明细：Wartung, @SUM(A1)\n合计：1,234.50元 税额：-50.00 备注：+86 10 1234 5678",
}


def store(path: Path) -> ExtractionStore:
    return ExtractionStore(Database(path))


def invoice_fields(**record: Any) -> dict[str, FieldValue]:
    return merge([PartResult((1, 2), record)], INVOICE, PAGES)


def parse_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))


@pytest.fixture
def filled(tmp_path: Path) -> tuple[ExtractionStore, int, int, int]:
    """A finished run over two documents: one extracted, one failed."""
    s = store(tmp_path / "q.db")
    run_id = s.create_run(template="invoice", schema=INVOICE, title="Invoices", documents_total=2)
    s.start_run(run_id)
    fields = invoice_fields(
        invoice_number="INV-2024-007",
        invoice_date="2024-03-01",
        seller="北京星辰科技有限公司",
        buyer='=HYPERLINK("http://x")',
        total=1234.5,
        tax=-50.0,
        payment_terms="+86 10 1234 5678",
        line_items=[{"description": "Wartung"}, {"description": "@SUM(A1)"}],
        iban="DE00 0000",  # not on any page
    )
    good = s.save_result(run_id, "发票 2024-007.pdf", fields, document_id=7)
    bad = s.save_result(run_id, "=cmd.pdf", {}, error="The file has no text layer: run OCR first.")
    s.progress(run_id, 2)
    s.finish_run(run_id)
    return s, run_id, good, bad


def test_a_run_and_its_results_survive_reopening(filled: tuple[ExtractionStore, int, int, int], tmp_path: Path) -> None:
    _, run_id, good, bad = filled
    again = store(tmp_path / "q.db")
    run = again.run(run_id)
    assert run is not None
    assert (run.template, run.title, run.status, run.documents_total, run.documents_done) == (
        "invoice",
        "Invoices",
        "done",
        2,
        2,
    )
    assert run.schema == INVOICE and run.finished_at and run.error is None
    results = again.results(run_id)
    assert [r.id for r in results] == [good, bad]
    first = results[0]
    assert (first.document_id, first.document_name, first.status, first.error) == (7, "发票 2024-007.pdf", "done", None)
    assert first.record["seller"] == "北京星辰科技有限公司" and first.record["total"] == 1234.5
    assert first.fields["total"]["page"] == 2 and "1,234.50" in first.fields["total"]["snippet"]
    assert first.fields["iban"]["verified"] is False
    assert first.unverified == ["iban"]
    assert (results[1].status, results[1].error, results[1].record) == (
        "error",
        "The file has no text layer: run OCR first.",
        {},
    )


def test_runs_are_listed_newest_first_and_a_failed_run_says_why(tmp_path: Path) -> None:
    s = store(tmp_path / "q.db")
    first = s.create_run(template="invoice", schema=INVOICE, title="A", documents_total=1)
    second = s.create_run(template="", schema=INVOICE, title="B", documents_total=3)
    assert [r.id for r in s.runs()] == [second, first]
    assert [r.status for r in s.runs()] == ["queued", "queued"]
    s.start_run(second)
    assert s.runs()[0].status == "running"
    s.finish_run(second, error="The model stopped answering.")
    failed = s.run(second)
    assert failed is not None and (failed.status, failed.error) == ("error", "The model stopped answering.")
    s.delete_run(first)
    assert [r.id for r in s.runs()] == [second] and s.results(first) == []


def test_a_correction_keeps_the_original_and_wins_in_both_exports(
    filled: tuple[ExtractionStore, int, int, int],
) -> None:
    s, run_id, good, _ = filled
    s.correct(good, "total", 1300)
    s.correct(good, "iban", "DE89 3704 0044 0532 0130 00")
    s.correct(good, "due_date", "2024-03-31")
    s.correct(good, "invoice_number", None)  # cleared
    result = s.result(good)
    assert result is not None
    assert result.record["total"] == 1234.5, "the extracted value is kept"
    assert result.corrected == {"total": 1300, "iban": "DE89 3704 0044 0532 0130 00", "due_date": "2024-03-31"} | {
        "invoice_number": None
    }
    assert result.final["total"] == 1300 and "invoice_number" not in result.final
    assert result.unverified == [], "a corrected field was checked by a person"
    row = parse_csv(s.export_csv(run_id))[0]
    assert (row["total"], row["due_date"], row["invoice_number"], row["unverified"]) == ("1300", "2024-03-31", "", "")
    exported = json.loads(s.export_json(run_id))[0]
    assert exported["record"]["total"] == 1300 and "invoice_number" not in exported["record"]
    assert exported["corrected"]["total"] == 1300 and exported["fields"]["total"]["page"] == 2
    s.revert(good, "total")
    assert parse_csv(s.export_csv(run_id))[0]["total"] == "1234.5"


def test_a_correction_must_fit_the_schema(filled: tuple[ExtractionStore, int, int, int]) -> None:
    s, _, good, _ = filled
    with pytest.raises(ValueError, match="total: 'a lot' is not of type 'number'"):
        s.correct(good, "total", "a lot")
    with pytest.raises(ValueError, match=re.escape("due_date: '31.03.2024' is not a 'date'")):
        s.correct(good, "due_date", "31.03.2024")
    with pytest.raises(ValueError, match="'colour' is not a field of Invoices"):
        s.correct(good, "colour", "red")
    with pytest.raises(LookupError):
        s.correct(9999, "total", 1)
    result = s.result(good)
    assert result is not None and result.corrected == {}


def test_csv_opens_in_excel_with_chinese_text_and_defused_formulas(
    filled: tuple[ExtractionStore, int, int, int],
) -> None:
    s, run_id, _, _ = filled
    text = s.export_csv(run_id)
    assert text.startswith("\ufeff"), "a BOM makes Excel read UTF-8"
    assert text.encode("utf-8").decode("utf-8-sig") == text[1:]
    header = next(csv.reader(io.StringIO(text[1:])))
    assert header == ["document", *INVOICE["properties"], "unverified", "error"]
    good, bad = parse_csv(text)
    assert good["document"] == "发票 2024-007.pdf" and good["seller"] == "北京星辰科技有限公司"
    assert good["buyer"] == '\'=HYPERLINK("http://x")'
    assert good["payment_terms"] == "'+86 10 1234 5678"
    assert good["line_items"] == "2", "a table's column counts its rows; the rows have their own CSV"
    rows = parse_csv(s.export_table_csv(run_id, "line_items"))
    assert [r["description"] for r in rows] == ["Wartung", "'@SUM(A1)"]
    assert good["tax"] == "-50.0", "a number stays a number"
    assert good["invoice_date"] == "2024-03-01" and good["unverified"] == "iban"
    assert bad["document"] == "'=cmd.pdf" and bad["error"].startswith("The file has no text layer")
    assert all(bad[name] == "" for name in INVOICE["properties"])


def test_a_list_starting_with_a_formula_is_defused(tmp_path: Path) -> None:
    s = store(tmp_path / "q.db")
    run_id = s.create_run(template="lab_report", schema=LAB, title="x", documents_total=1)
    s.save_result(run_id, "a.pdf", merge([PartResult((1,), {"methods": ["-1 Rabatt", "Wartung"]})], LAB, PAGES))
    assert parse_csv(s.export_csv(run_id))[0]["methods"] == "'-1 Rabatt; Wartung"


def test_json_export_keeps_chinese_readable(filled: tuple[ExtractionStore, int, int, int]) -> None:
    s, run_id, _, _ = filled
    text = s.export_json(run_id)
    assert "北京星辰科技有限公司" in text, "not \\u escapes"
    documents = json.loads(text)
    assert [d["document"] for d in documents] == ["发票 2024-007.pdf", "=cmd.pdf"]
    assert list(documents[0]["record"]) == [name for name in INVOICE["properties"] if name in documents[0]["record"]]
    assert documents[0]["record"]["line_items"] == [{"description": "Wartung"}, {"description": "@SUM(A1)"}]
    assert documents[0]["fields"]["seller"]["verified"] is True
    assert documents[1]["status"] == "error" and documents[1]["record"] == {}
    with pytest.raises(LookupError):
        s.export_json(9999)
