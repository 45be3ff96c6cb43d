"""Merging the records of a document's parts: agreement, conflicts, lists, and provenance from the text."""

from __future__ import annotations

from pathlib import Path

from jsonschema import FormatChecker
from jsonschema.validators import Draft202012Validator

from app.extraction.json_schema import check_schema, load_templates
from app.extraction.merge import PartResult, mark_unsure, merge, provenance, record_of

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = load_templates(ROOT / "assets/schemas")["contract"].schema
LISTS = check_schema({"type": "object", "properties": {"parties": {"type": "array", "items": {"type": "string"}}}})
INVOICE = load_templates(ROOT / "assets/schemas")["invoice"].schema

PAGES = {
    1: "RECHNUNG Nr. INV-2024-007 vom 01.03.2024\nVerkäufer: ACME GmbH, Berlin\nKäufer: 北京星辰科技有限公司",
    2: "Position 1: Wartung 1.000,00\nPosition 2: Ersatzteile 234,50\nGesamt: 1.234,50 EUR",
    3: "Zahlungsziel: 30 Tage. Übertrag aus Vorperiode: 1.300,00 EUR",
    4: "Anlage: Lieferschein. Summe laut Lieferschein 1.300,00 EUR",
}


def test_parts_that_agree_give_one_value_located_on_its_page() -> None:
    parts = [
        PartResult((1, 2), {"seller": "ACME GmbH", "total": 1234.5, "invoice_date": "2024-03-01"}),
        PartResult((3, 4), {"seller": "acme  gmbh", "total": 1234.50, "invoice_date": "2024-3-1"}),
    ]
    fields = merge(parts, INVOICE, PAGES)
    assert list(fields) == ["invoice_date", "seller", "total"], "schema order, absent fields left out"
    seller = fields["seller"]
    assert (seller.value, seller.page, seller.verified, seller.conflict, seller.conflicts) == (
        "ACME GmbH",
        1,
        True,
        False,
        [],
    )
    assert "Verkäufer: ACME GmbH" in seller.snippet
    total = fields["total"]
    assert (total.value, total.page, total.verified) == (1234.5, 2, True), "the page comes from the text"
    assert "1.234,50" in total.snippet
    assert (fields["invoice_date"].value, fields["invoice_date"].page) == ("2024-03-01", 1)
    assert not fields["invoice_date"].conflict, "the same day written two ways is one value"


def test_conflicting_totals_are_flagged_with_every_candidate_and_its_page() -> None:
    parts = [PartResult((1, 2), {"total": 1234.5}), PartResult((3, 4), {"total": 1300})]
    total = merge(parts, INVOICE, PAGES)["total"]
    assert total.conflict is True
    assert [(c.value, c.page, c.verified) for c in total.conflicts] == [(1234.5, 2, True), (1300, 3, True)]
    assert total.value == 1234.5, "both found once on their pages: the first part's value"
    assert "1.300,00" in total.conflicts[1].snippet


def test_a_value_found_on_its_pages_beats_one_that_is_not() -> None:
    parts = [
        PartResult((1,), {"total": 999.0}),
        PartResult((2,), {"total": 999}),
        PartResult((3,), {"total": 1300.0}),
    ]
    total = merge(parts, INVOICE, PAGES)["total"]
    assert (total.value, total.page, total.verified, total.conflict) == (1300.0, 3, True, True)
    hallucinated = total.conflicts[0]
    assert (hallucinated.value, hallucinated.parts, hallucinated.verified, hallucinated.page) == (999.0, 2, False, 1)


def test_among_found_values_the_one_most_parts_gave_wins() -> None:
    parts = [
        PartResult((2,), {"total": 1234.5}),
        PartResult((3,), {"total": 1300}),
        PartResult((4,), {"total": 1300}),
    ]
    total = merge(parts, INVOICE, PAGES)["total"]
    assert (total.value, total.page) == (1300, 3)
    assert [(c.value, c.parts) for c in total.conflicts] == [(1234.5, 1), (1300, 2)]


def test_a_value_missing_from_its_part_is_unverified_on_the_parts_first_page() -> None:
    parts = [PartResult((3, 4), {"seller": "ACME GmbH", "buyer": "北京星辰科技有限公司", "total": 1234.5})]
    fields = merge(parts, INVOICE, PAGES)
    for name in ("seller", "buyer", "total"):
        assert (fields[name].verified, fields[name].page, fields[name].snippet) == (False, 3, ""), name
    assert merge([PartResult((1,), {"buyer": "北京星辰科技有限公司"})], INVOICE, PAGES)["buyer"].verified


def test_a_value_unverified_on_one_part_takes_the_page_where_another_part_found_it() -> None:
    parts = [PartResult((3,), {"seller": "ACME GmbH"}), PartResult((1,), {"seller": "ACME GMBH"})]
    seller = merge(parts, INVOICE, PAGES)["seller"]
    assert (seller.value, seller.page, seller.verified, seller.conflict) == ("ACME GmbH", 1, True, False)


def test_lists_are_unioned_in_order_of_first_appearance() -> None:
    pages = {1: "between ACME GmbH and Beta Ltd", 2: "Beta Ltd and 北京星辰科技有限公司", 3: "signatures"}
    parts = [
        PartResult((1,), {"parties": ["ACME GmbH", "Beta Ltd"]}),
        PartResult((2,), {"parties": ["beta  LTD", "北京星辰科技有限公司", ""]}),
        PartResult((3,), {"parties": ["Gamma AG"]}),
    ]
    parties = merge(parts, LISTS, pages)["parties"]
    assert parties.value == ["ACME GmbH", "Beta Ltd", "北京星辰科技有限公司", "Gamma AG"]
    assert [(c.page, c.verified) for c in parties.items] == [(1, True), (1, True), (2, True), (3, False)]
    assert (parties.page, parties.verified, parties.conflict) == (1, False, False), "one item is not on its page"


def test_yes_no_values_cannot_be_verified_and_can_conflict() -> None:
    parts = [PartResult((1,), {"auto_renewal": True}), PartResult((2,), {"auto_renewal": False})]
    renewal = merge(parts, CONTRACT, {1: "renews automatically", 2: "does not renew"})["auto_renewal"]
    assert (renewal.value, renewal.verified, renewal.page, renewal.conflict) == (True, None, 1, True)
    assert [c.value for c in renewal.conflicts] == [True, False]


def test_empty_and_unknown_values_are_left_out() -> None:
    parts = [PartResult((1,), {"governing_law": "  ", "end_date": None, "parties": [], "invented": "x"})]
    assert merge(parts, CONTRACT, {1: "text"}) == {}


def test_the_merged_record_validates_against_the_schema_and_provenance_is_json_ready() -> None:
    pages = {1: "Service Agreement between ACME GmbH and Beta Ltd, effective 1 March 2024", 2: "Total EUR 12.000"}
    parts = [
        PartResult((1,), {"parties": [{"name": "ACME GmbH"}], "effective_date": "2024-03-01", "auto_renewal": True}),
        PartResult((2,), {"parties": [{"name": "Beta Ltd"}], "total_value": 12000, "currency": "EUR"}),
        PartResult((2,), {"total_value": 12000.0, "termination_notice_days": 90}),
    ]
    fields = merge(parts, CONTRACT, pages)
    record = record_of(fields)
    assert list(Draft202012Validator(CONTRACT, format_checker=FormatChecker()).iter_errors(record)) == []
    assert record["parties"] == [{"name": "ACME GmbH"}, {"name": "Beta Ltd"}] and record["total_value"] == 12000
    info = provenance(fields["total_value"])
    assert set(info) == {"page", "snippet", "verified", "conflicts", "conflict", "items", "rows", "unsure"}
    assert (info["page"], info["verified"]) == (2, True)
    assert fields["termination_notice_days"].verified is False, "90 is on no page"


def test_a_value_found_only_on_a_page_read_by_ocr_with_low_confidence_is_marked_unsure() -> None:
    """Page 2 is a scan read with low confidence: the total (only there) is unsure; the seller (page 1)
    and the amount 1.300,00 (on page 3 and 4, one of them read well) are not."""
    parts = [PartResult((1, 2, 3, 4), {"seller": "ACME GmbH", "total": 1234.5, "invoice_number": "INV-2024-007"})]
    fields = mark_unsure(merge(parts, INVOICE, PAGES), PAGES, {2, 4})
    assert fields["total"].verified is True and fields["total"].unsure
    assert not fields["seller"].unsure and not fields["invoice_number"].unsure
    assert provenance(fields["total"])["unsure"] is True
    again = mark_unsure(merge([PartResult((3, 4), {"total": 1300.0})], INVOICE, PAGES), PAGES, {4})
    assert not again["total"].unsure, "also on page 3, read well"
