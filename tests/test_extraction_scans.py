"""The lab-report template on a scanned lab report, through the running appliance: a two-page scan made
here (no text layer), page 1 the report's header as a poor fax (under a third of the resolution:
Tesseract reads it nearly right, but with confidence 0.64, under extraction's 0.8), page 2 its results
scanned cleanly (0.84). The record is typed by the template, values are grounded in the OCR'd text,
and those found only on the poorly read page are marked unsure, the rows of the results table (the
template's `results` alone) grounded on the well-read page and sure. The demo model's choice of values
is not checked, only what the appliance says about the values it gave."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from gradio_client import handle_file
from PIL import Image

from app.extraction.json_schema import check_schema, format_checker
from tests.harness import Appliance, api_client
from tests.scans import image_pdf, scan
from tests.table_documents import lab_report
from tests.test_documents import indexed

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = json.loads((ROOT / "assets" / "schemas" / "lab_report.json").read_text(encoding="utf-8"))
SCAN = "lab-report-scan.pdf"
FAX = 0.29  # page 1 is scanned at this share of the resolution (read with confidence 0.64)
POOR, WELL = 1, 2  # the pages
COLUMNS = ("analyte", "value", "unit")  # the results table's columns every printed row has
WELL_LINES = lab_report().pages[0][5:-2]  # what page 2 prints: the results table


def scanned_lab_report() -> bytes:
    lines = lab_report().pages[0]
    header, results = [*lines[:4], "Accreditation: ISO/IEC 17025", lines[-1]], WELL_LINES
    fax = scan(header, width=1300, noise=30, blur=0.8)
    fax = fax.resize((int(fax.width * FAX), int(fax.height * FAX)), Image.Resampling.BILINEAR)
    return image_pdf(
        [fax, scan(results, width=1300, noise=0, blur=0, skew=0)], dpi=300
    )  # rendered at 300 dpi: pixel for pixel


@pytest.fixture(scope="module")
def client(appliance: Appliance, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("scans") / SCAN
    path.write_bytes(scanned_lab_report())
    c = api_client(appliance.url)
    c.predict([handle_file(str(path))], api_name="/ingest")
    [doc] = indexed(c, SCAN)
    assert (doc["status"], doc["pages"]) == ("ok", 2), doc
    return c


def extract(client: Any, schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    result: dict[str, Any] = client.predict(SCAN, "", json.dumps(schema), max_tokens, api_name="/extract")
    jsonschema.validate(result["record"], check_schema(schema), format_checker=format_checker())  # typed
    print(f"record: {result['record']}\nplaces: {places_of(result['fields'])}\nproblems: {result['problems']}")
    return result


def test_the_lab_report_template_on_a_scan_gives_typed_fields_and_marks_poorly_read_values_unsure(
    client: Any,
) -> None:
    """The demo model fills the header's fields (page 1) within its cap, before the table. A value is unsure
    only when found on the poor page alone: beside two busy loops it once answered `report_number` "1",
    which page 2 prints too, and the appliance rightly called it sure."""
    result = extract(client, TEMPLATE, 400)
    verified = [p for p in places_of(result["fields"]) if p["verified"]]
    assert verified, "no value was grounded in the OCR'd text"
    well = "\n".join(WELL_LINES)
    for place in verified:  # a value also printed on the well-read page (a list's "H", a "1") is found there: sure
        value = result["record"].get(place["name"])
        if place["page"] == WELL or not (isinstance(value, list) or str(value) in well):
            assert place["unsure"] is (place["page"] == POOR), f"page 1 is read unsure, page 2 surely: {place}"
    assert any(p["page"] == POOR and p["unsure"] for p in verified), "nothing from the poor page was marked unsure"


def test_the_templates_results_table_from_the_well_read_page_is_grounded_and_sure(client: Any) -> None:
    """The template's table alone (its `results`), so the demo model's cap is spent on rows, and of its columns
    the three every row prints (analyte, value, unit): a row is grounded only when every cell is found, and with
    all five the demo model once filled `flag` and `reference_range` with its neighbours' text in a whole run
    beside two busy loops (no row grounded). The subject is what the appliance says of the rows it gets."""
    results = copy.deepcopy(TEMPLATE["properties"]["results"])
    columns = results["items"]["properties"]
    results["items"].update(properties={k: columns[k] for k in COLUMNS}, required=list(COLUMNS))
    result = extract(client, {"type": "object", "properties": {"results": results}}, 300)
    rows = [p for p in places_of(result["fields"]) if p["name"] == "results" and p["verified"]]
    assert rows, "no row of the results was grounded in the OCR'd text"
    assert all(p["page"] == WELL and p["unsure"] is False for p in rows), rows


def places_of(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """Each field's place, and each table row's: name, page, verified, unsure."""
    out = []
    for name, info in fields.items():
        for place in info.get("rows") or [info]:
            out.append({"name": name, **{k: place.get(k) for k in ("page", "verified", "unsure")}})
    return out
