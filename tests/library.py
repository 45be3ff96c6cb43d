"""A small library of documents the tests write themselves, and questions whose answers are on known pages.

It stands in for a real-world corpus: multi-page and two-column PDFs, a form, an encrypted PDF, image-only
pages, a truncated and a broken PDF, Chinese articles (text and PDF), DOCX, HTML, CSV, Markdown and a file
type the appliance does not read. Every fact in it was written for the project.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.documents import (
    CHINESE_ARTICLES,
    ZH,
    chinese,
    chinese_lines,
    encrypted,
    grey_image,
    image_page,
    pdf,
    text_lines,
    two_columns,
    wrapped,
)
from tests.test_knowledge_fixtures import docx

PASSWORD = "quartet-open-sesame"

HANDBOOK = [
    """Quartet appliance handbook. Chapter 1: What is in the box.

    The box holds one host computer, four RK1828 accelerator cards, a power cable and a quick start card.
    Before you switch the appliance on, check that every card sits firmly in its slot and that its retaining
    screw is tight. Keep the box: the cards travel safely only in their foam trays.""",
    """Chapter 2: Cabling and power.

    The power supply delivers 450 watts, which is enough for the host and all four cards at full load.
    Connect the host to the office network with the port marked LAN. The port marked CARDS is for the
    internal card network only and must never be connected to the office network: the cards accept work
    from anyone who can reach them.""",
    """Chapter 3: Cooling.

    Each card has a small fan and an aluminium heat sink. The cards throttle at 85 degrees Celsius, and the
    admin page marks a card orange at 80 degrees. Clean the heat sinks with compressed air every six months,
    with the appliance switched off and unplugged. Leave one empty slot between two cards where you can.""",
    """Chapter 4: Troubleshooting.

    When a card is down, its green LED blinks twice a second and the answer that was being written stops
    with a message naming the card. The launcher restarts a card agent that exits; if the same card fails
    three times in an hour, replace its fan first, then the card.""",
]

NEWSLETTER_PAGES = [
    """Harbour Analytics newsletter, spring issue.

    Our Leeds office moved to a new building on Wellington Street in March. The meeting rooms are named
    after rivers: Aire, Wharfe and Calder. Parking is behind the building.""",
    """Kitchen news.

    The office kitchen has a coffee machine that grinds its own beans. Please empty the milk jug every
    evening; the cleaning team will not.""",
]
LEFT = [
    "Lake Saimaa in eastern Finland is the",
    "largest lake of the country, with an area",
    "of about 4,400 square kilometres and more",
    "than thirteen thousand islands. Its water",
    "is so clear in winter that the ice can be",
    "read like a window. The Saimaa ringed seal",
    "lives only here; fewer than five hundred",
    "remain, and the local people build snow",
    "drifts for them when the winter is warm.",
]
RIGHT = [
    "Our team hiking trip went to the Yorkshire",
    "Dales this year. We walked eighteen kilo-",
    "metres from Malham Cove to Gordale Scar",
    "and back, and nobody got lost, although",
    "the map was read upside down twice. Next",
    "year we will choose a route with fewer",
    "stiles and more places to buy cake.",
]

FORM_TEXT = """Service request form.

Fill in your name and the serial number of the card, then send the form to the service desk. A technician
answers within two working days."""

DELIVERY = [
    "Delivery note 2024-117. Four RK1828 cards, one host, one power cable.",
    "Delivered to Harbour Analytics Ltd, Leeds. Received in good condition.",
    "Signed for by the office manager on 12 March 2024.",
]

DOCX_PARAGRAPHS = [
    ("Heading1", "Purchasing rules"),
    ("", "A new card order is approved by the head of operations, not by the finance team."),
    ("", "Orders above ten cards need a second quote from another supplier."),
]
HTML = """<html><head><title>Admin guide</title></head><body><h1>Resetting the admin password</h1>
<p>To reset the admin password, stop the appliance, run the reset command on the host and start it again.
The old sessions end at once.</p><h2>Backups</h2><p>The data folder is copied to the backup disk every
night at two o'clock.</p></body></html>"""
CSV = "serial;slot;installed\nRK-0001;1;2024-03-12\nRK-0002;2;2024-03-12\nRK-0003;3;2024-04-02\nRK-0004;4;2024-03-12\n"
MARKDOWN = "# Release notes\n\nVersion 0.3 adds answers with citations to the page they come from.\n"


DATASHEET = [
    """Nordlicht NL-4 edge inference box. Datasheet, revision C.

    Manufacturer: Nordlicht Instruments GmbH, Hamburg. Model: NL-4. Product type: edge inference appliance
    with four RK1828 accelerator cards.""",
    """Electrical ratings.

    Supply voltage: 100-240 V AC, 50/60 Hz. Typical power consumption: 180 W; maximum 210 W at full load.""",
    """Environment and mechanics.

    Operating temperature: 5 to 35 degrees C. Ingress protection: IP20. Dimensions: 440 x 88 x 420 mm
    (width x height x depth). Weight: 7.5 kg.""",
    """Interfaces.

    2x Ethernet 1 Gbit/s, 2x USB 3.0, 1x HDMI for the kiosk display. Certifications: CE, UKCA.""",
]


@dataclass(frozen=True)
class Question:
    question: str
    file: str
    page: int
    evidence: str


QUESTIONS = [
    Question("What is in the box of the appliance?", "handbook.pdf", 1, "four RK1828 accelerator cards"),
    Question("How many watts does the power supply deliver?", "handbook.pdf", 2, "450 watts"),
    Question(
        "Which network port must never be connected to the office network?", "handbook.pdf", 2, "The port marked CARDS"
    ),
    Question("At what temperature do the cards throttle?", "handbook.pdf", 3, "85 degrees Celsius"),
    Question("How often should the heat sinks be cleaned?", "handbook.pdf", 3, "every six months"),
    Question("What does the LED do when a card is down?", "handbook.pdf", 4, "blinks twice a second"),
    Question("Where did the Leeds office move to?", "newsletter.pdf", 1, "Wellington Street"),
    Question("What is the area of Lake Saimaa?", "newsletter.pdf", 3, "4,400 square kilometres"),
    Question("Where did the team go hiking?", "newsletter.pdf", 3, "Yorkshire"),
    Question("When was the delivery signed for?", "delivery-scan.pdf", 3, "12 March 2024"),
    Question("Who approves a new card order?", "purchasing.docx", 1, "head of operations"),
    Question("How do I reset the admin password?", "admin-guide.html", 1, "run the reset command"),
    Question("When was card RK-0003 installed?", "cards.csv", 1, "RK-0003"),
    Question("Which release added citations?", "release-notes.md", 1, "Version 0.3"),
    Question("RPC 服务器是怎么部署的？", "rpc-deployment.txt", 1, "每张卡上运行一个 RPC 服务器进程"),
    Question("芯片在多少度开始降频？", "cooling-and-pcie.txt", 1, "八十五度时开始降频"),
    Question("中文全文检索为什么用三字组索引？", "document-search.txt", 1, "三字组索引"),
    Question("主机多久询问一次卡的健康状态？", "rpc-deployment.txt", 1, "每秒向每张卡的健康检查端口"),
]

# name -> (status, error kind or None, pages)
EXPECTED = {
    "handbook.pdf": ("ok", None, 4),
    "newsletter.pdf": ("ok", None, 3),
    "service-form.pdf": ("ok", None, 1),
    "delivery-scan.pdf": ("ok", None, 5),
    "部署说明.pdf": ("ok", None, 1),
    "locked.pdf": ("error", "encrypted", None),
    "broken.pdf": ("error", "corrupt", None),
    "purchasing.docx": ("ok", None, 1),
    "admin-guide.html": ("ok", None, 1),
    "cards.csv": ("ok", None, 1),
    "release-notes.md": ("ok", None, 1),
    "inventory.json": ("error", "unsupported", None),
    **{name: ("ok", None, 1) for name in CHINESE_ARTICLES},
}


def handbook() -> bytes:
    return pdf([text_lines(wrapped(page)) for page in HANDBOOK])


def newsletter() -> bytes:
    pages = [text_lines(wrapped(page)) for page in NEWSLETTER_PAGES]
    return pdf([*pages, two_columns(LEFT, RIGHT, heading="Stories from the team")])


QUICK_START = """Quick start.

To switch the appliance on the first time, plug the power cable into the host, press the round button on
the front and wait for the green light. Then open the appliance's address in a browser. The first answer
takes about a minute, because the model is loaded onto the four cards."""


def quick_start() -> bytes:
    return pdf([text_lines(wrapped(QUICK_START))])


def datasheet() -> bytes:
    return pdf([text_lines(wrapped(page)) for page in DATASHEET])


def scanned_delivery() -> bytes:
    """Three pages of text, then two pages that are only a picture (a scan without a text layer)."""
    pages = [text_lines([line]) for line in DELIVERY] + [image_page(), image_page()]
    return pdf(pages, images={3: grey_image(3), 4: grey_image(4)})


def service_form() -> bytes:
    return pdf([text_lines(wrapped(FORM_TEXT))], form=[("name", "Ada"), ("serial", "RK-0002")])


def chinese_pdf() -> bytes:
    lines = [line for line in chinese().splitlines() if line.strip()][:8]
    return pdf([chinese_lines([line[:40] for line in lines])], cjk=True)


def write_library(folder: Path) -> Path:
    """Every document of the library in `folder`; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "handbook.pdf": handbook(),
        "newsletter.pdf": newsletter(),
        "service-form.pdf": service_form(),
        "delivery-scan.pdf": scanned_delivery(),
        "部署说明.pdf": chinese_pdf(),
        "locked.pdf": encrypted(handbook(), PASSWORD),
        "broken.pdf": handbook()[:900],
        "purchasing.docx": docx(DOCX_PARAGRAPHS),
        "admin-guide.html": HTML.encode(),
        "cards.csv": CSV.encode(),
        "release-notes.md": MARKDOWN.encode(),
        "inventory.json": b'{"cards": 4}',
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    for name in CHINESE_ARTICLES:
        shutil.copyfile(ZH / name, folder / name)
    return folder
