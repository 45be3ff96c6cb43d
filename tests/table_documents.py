"""Documents with known tables, made by the tests: a two-page invoice PDF with six line items, a lab
report PDF with twelve results in a grid, and a Chinese invoice as text. Each comes with its rows, so
a test can count how many cells the extraction got right and on which page each row stands.

The PDF is written by hand (pypdf reads PDFs but cannot lay out text): one content stream per page,
Type1 Helvetica, one text line per `Tj`, so the text layer keeps each table row on its own line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Known:
    """A document's text (pages) and the rows of its table, each with the page it is printed on."""

    pages: list[list[str]]
    rows: list[dict[str, Any]]
    row_pages: list[int]


def pdf(pages: list[list[str]]) -> bytes:
    """A PDF whose pages hold these lines, top to bottom, 14 points apart."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    font = 3
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for lines in pages:
        body = b"BT /F1 10 Tf 14 TL 50 790 Td " + b" ".join(b"(%s) Tj T*" % _escape(line) for line in lines) + b" ET"
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(body), body))
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content, font)
        )
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _escape(line: str) -> bytes:
    return line.encode("cp1252").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _line(cells: list[str], widths: list[int]) -> str:
    return "   ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


INVOICE_ITEMS = [
    ("Hardened steel shaft 25 x 400 mm", 120, 18.40),
    ("Bearing housing cast aluminium", 60, 42.75),
    ("Hexagon socket screw M8 x 30", 500, 0.32),
    ("Linear guide rail 600 mm", 8, 129.00),
    ("CNC machining setup", 1, 350.00),
    ("Packaging and freight to Cham", 1, 185.00),
]


def invoice() -> Known:
    """Six line items: four on page 1, two on page 2, then the totals."""
    widths = [3, 34, 5, 10, 10]
    header = [_line(["Pos", "Description", "Qty", "Unit price", "Amount"], widths)]
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    for pos, (text, qty, price) in enumerate(INVOICE_ITEMS, start=1):
        amount = round(qty * price, 2)
        rows.append({"description": text, "quantity": qty, "unit_price": price, "amount": amount})
        lines.append(_line([str(pos), text, str(qty), f"{price:,.2f}", f"{amount:,.2f}"], widths))
    subtotal = sum(r["amount"] for r in rows)
    first = [
        "INVOICE",
        "Nordlicht Praezisionsteile GmbH, Hafenstrasse 14, 28217 Bremen",
        "",
        "Invoice no.: NP-2024-03187",
        "Invoice date: 14 March 2024",
        "Bill to: Alpenwerk Maschinenbau AG",
        "",
        *header,
        *lines[:4],
        "",
        "continued on page 2",
    ]
    second = [
        "Invoice NP-2024-03187, page 2",
        "",
        *header,
        *lines[4:],
        "",
        f"Subtotal   {subtotal:,.2f} EUR",
        f"VAT 19 %   {subtotal * 0.19:,.2f} EUR",
        f"Total due   {subtotal * 1.19:,.2f} EUR",
        "Payment terms: net 30 days.",
    ]
    return Known([first, second], rows, [1, 1, 1, 1, 2, 2])


LAB_RESULTS = [
    ("Sodium", 141, "mmol/L", "135-145", ""),
    ("Potassium", 5.9, "mmol/L", "3.5-5.1", "H"),
    ("Chloride", 102, "mmol/L", "98-107", ""),
    ("Creatinine", 88, "umol/L", "62-106", ""),
    ("Urea", 9.8, "mmol/L", "2.5-7.8", "H"),
    ("Glucose", 5.2, "mmol/L", "3.9-6.1", ""),
    ("Haemoglobin", 118, "g/L", "130-170", "L"),
    ("Leukocytes", 7.4, "10^9/L", "4.0-10.0", ""),
    ("Platelets", 251, "10^9/L", "150-400", ""),
    ("CRP", 14.2, "mg/L", "0-5", "H"),
    ("ALT", 31, "U/L", "0-45", ""),
    ("TSH", 2.1, "mU/L", "0.4-4.0", ""),
]


def lab_report() -> Known:
    """Twelve results in a grid on one page."""
    widths = [12, 7, 8, 10, 4]
    lines = [_line([name, f"{value:g}", unit, ref, flag], widths) for name, value, unit, ref, flag in LAB_RESULTS]
    page = [
        "LABORATORY REPORT",
        "Report no.: LR-2024-5531   Sample ID: S-88412   Sample: serum",
        "Collected: 2024-03-04   Reported: 2024-03-05",
        "Laboratory: Hanse Clinical Lab, Bremen",
        "",
        _line(["Analyte", "Result", "Unit", "Reference", "Flag"], widths),
        *lines,
        "",
        "Signed: Dr. Jana Roth",
    ]
    rows = [
        {"analyte": n, "value": v, "unit": u, "reference_range": r, **({"flag": f} if f else {})}
        for n, v, u, r, f in LAB_RESULTS
    ]
    return Known([page], rows, [1] * len(rows))


CHINESE_ITEMS = [("服务器机柜", 2, 4800.00), ("千兆交换机", 4, 1250.00), ("安装调试服务", 1, 3000.00)]


def chinese_invoice() -> Known:
    """A Chinese invoice (text): three line items."""
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    for name, qty, price in CHINESE_ITEMS:
        amount = round(qty * price, 2)
        rows.append({"description": name, "quantity": qty, "unit_price": price, "amount": amount})
        lines.append(f"{name}    {qty}    {price:,.2f}    {amount:,.2f}")
    total = sum(r["amount"] for r in rows)
    page = [
        "增值税普通发票",
        "发票号码：FP-20240311",
        "开票日期：2024年3月11日",
        "销售方：深圳四芯科技有限公司",
        "购买方：杭州港湾数据有限公司",
        "",
        "货物或应税劳务名称    数量    单价    金额",
        *lines,
        "",
        f"价税合计：{total:,.2f}元",
    ]
    return Known([page], rows, [1] * len(rows))
