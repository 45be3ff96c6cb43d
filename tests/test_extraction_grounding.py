"""Grounding: is an extracted value on the page, whichever way the page writes it?"""

from __future__ import annotations

from typing import Any

import pytest

from app.extraction.grounding import PageTexts, find, is_grounded, locate, normalise


@pytest.mark.parametrize(
    "page",
    [
        "Total: 1.234,50 EUR",
        "合计：1,234.50元",
        "Total 1234.5",
        "Total 1234.50",
        "Gesamt 1 234,50 €",
        "Gesamt 1\u00a0234,50\u00a0€",  # non-breaking space as thousands separator
        "Total €1,234.50 due",
        "Betrag CHF 1'234.50",
        "合计：１，２３４．５０元",  # full-width digits and punctuation
        "Qty 2 1,234.50",  # a number right after another
    ],
)
def test_a_number_is_found_in_any_common_format(page: str) -> None:
    assert is_grounded(1234.5, page) is True
    assert is_grounded("1,234.50", page) is True, "a numeric string counts as its number"


@pytest.mark.parametrize(
    ("value", "page"),
    [
        (1234.6, "Total: 1.234,50 EUR"),
        (1234.6, "合计：1,234.50元"),
        (123.45, "Total: 1.234,50 EUR"),
        (12345, "Total: 1.234,50 EUR"),
        (1234.5, "Total: 1.234,55 EUR"),
        (1234.5, "Seller: ACME GmbH, Berlin"),
        ("€ 99.00", "Total 1,234.50"),
    ],
)
def test_a_different_number_is_not_found(value: Any, page: str) -> None:
    assert is_grounded(value, page) is False


def test_numbers_read_both_ways_when_the_page_is_ambiguous() -> None:
    assert is_grounded(1234, "Units: 1,234") and is_grounded(1.234, "Units: 1,234")
    assert is_grounded(30, "Payment within 30 days.")
    assert is_grounded(-40, "Operating temperature: −40 °C to +85 °C")
    assert not is_grounded(40.5, "Operating temperature: −40 °C to +85 °C")


@pytest.mark.parametrize(
    "page",
    [
        "Effective date: 2024-03-01.",
        "Datum: 01.03.2024",
        "Datum: 1.3.2024",
        "signed on 1 March 2024",
        "signed on 1st of March, 2024",
        "signed on 01-Mar-2024",
        "dated March 1, 2024",
        "dated Mar. 1st 2024",
        "生效日期：2024年3月1日",
        "生效日期：2024 年 03 月 01 日",
        "Date: 01/03/2024",
        "Date: 03/01/2024",
        "Date: 2024/03/01",
        "Datum: 1. März 2024",
    ],
)
def test_an_iso_date_is_found_in_any_common_format(page: str) -> None:
    assert is_grounded("2024-03-01", page) is True


@pytest.mark.parametrize(
    "page", ["Date: 02.03.2024", "1 April 2024", "2024年3月2日", "Date: 01/03/2023", "March 11, 2024", "12024-03-01"]
)
def test_another_date_is_not_found(page: str) -> None:
    assert is_grounded("2024-03-01", page) is False


def test_text_is_found_whatever_its_case_spacing_dashes_and_quotes() -> None:
    assert is_grounded("ACME GmbH", "Seller:  acme\u00a0GMBH, Berlin")
    assert is_grounded("Müller–Schmidt “Consulting”", 'MÜLLER-SCHMIDT "consulting"')
    assert is_grounded("Room 4", "Room\u3000４")  # full-width space and digit
    assert is_grounded("laws of England\nand Wales", "governed by the laws of England and Wales.")
    assert not is_grounded("ACME Ltd", "Seller: ACME GmbH")


def test_chinese_text_is_found_without_word_boundaries_even_when_spaced_out() -> None:
    page = "甲方：北京星辰科技有限公司（以下简称“甲方”）乙方：上海"
    assert is_grounded("北京星辰科技有限公司", page)
    assert is_grounded("北京星辰科技有限公司", "甲方： 北 京 星 辰 科 技\n有限公司")
    assert not is_grounded("北京星辰科技股份公司", page)


def test_yes_no_and_empty_values_are_not_checkable() -> None:
    assert is_grounded(True, "Auto renewal: yes") is None
    assert is_grounded(False, "no") is None
    assert is_grounded(None, "anything") is None
    assert is_grounded("  ", "anything") is None
    assert is_grounded([], "anything") is None


def test_a_list_is_grounded_when_every_item_is() -> None:
    page = "Parties: ACME GmbH and 北京星辰科技有限公司"
    assert is_grounded(["ACME GmbH", "北京星辰科技有限公司"], page) is True
    assert is_grounded(["ACME GmbH", "Beta Ltd"], page) is False
    assert is_grounded(["ACME GmbH", True], page) is True, "an uncheckable item does not count"


def test_normalise_folds_what_people_do_not_see() -> None:
    assert normalise("  ACME\u00a0\u00a0GmbH\n") == "acme gmbh"
    assert normalise("１２３４ＡＢＣ") == "1234abc"
    assert normalise("a–b—c−d") == "a-b-c-d"
    assert normalise("‘x’ “y”") == "'x' \"y\""
    assert normalise("Stra\u00dfe") == normalise("STRASSE")


def test_find_returns_the_span_in_the_original_text() -> None:
    page = "Ｔｏｔａｌ：  1.234,50\u00a0EUR"
    start, end = find(1234.5, page) or (0, 0)
    assert page[start:end] == "1.234,50"
    start, end = find("total", page) or (0, 0)
    assert page[start:end] == "Ｔｏｔａｌ"
    text = "Cafe\u0301 Müller"  # a combining accent stays with its letter
    start, end = find("café", text) or (0, 0)
    assert text[start:end] == "Cafe\u0301"


def test_locate_gives_the_first_page_and_a_snippet_around_the_match() -> None:
    pages = {
        3: "Summary. " + "Lorem ipsum dolor sit amet. " * 10 + "Total: 1.234,50 EUR. " + "Thank you. " * 20,
        1: "Invoice INV-7 for ACME GmbH",
        2: "Nothing to see here.",
        5: "Carried over total 1.234,50 EUR",
    }
    page, snippet = locate(1234.5, pages) or (0, "")
    assert page == 3
    assert "Total: 1.234,50 EUR" in snippet and 100 <= len(snippet) <= 125
    assert snippet.startswith("…") and snippet.endswith("…")
    assert locate("acme gmbh", pages) == (1, "Invoice INV-7 for ACME GmbH")
    assert locate("2024-03-01", pages) is None
    assert locate(True, pages) is None
    assert locate(["INV-7", "1234.5"], pages) is None, "no page has both"
    assert locate(["carried over", "1234.5"], pages) == (5, "Carried over total 1.234,50 EUR")


def test_page_texts_locate_within_some_pages_only() -> None:
    texts = PageTexts({1: "Total 1.234,50", 2: "nothing", 3: "Summe 1234,50"})
    assert texts.locate(1234.5, within=(2, 3, 9)) == (3, "Summe 1234,50")
    assert texts.locate(1234.5, within=(2,)) is None
    assert texts.locate(1234.5) == (1, "Total 1.234,50")


INVOICE_PAGE = "Invoice date: 2025-06-30\nSeller: Quartet Labs\nTotal: 1,250.00 EUR\nRef 12/05"


@pytest.mark.parametrize("value", [1, 250, 30, 12, 5, 2025, "net 30", "30 days"])
def test_parts_of_other_numbers_dates_and_codes_do_not_count(value: object) -> None:
    # seen in the browser: "total: 1" and "payment_terms: net 30" were marked found on this page
    assert is_grounded(value, INVOICE_PAGE) is False


@pytest.mark.parametrize("value", [1250, "1250", "EUR 1,250.00", "1.250,00 €", "2025-06-30"])
def test_whole_numbers_and_dates_still_count(value: object) -> None:
    assert is_grounded(value, INVOICE_PAGE) is True
