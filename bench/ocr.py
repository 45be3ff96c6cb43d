"""OCR engines side by side on the same scanned pages: character error rate per page kind, pages/s.

    .venv/bin/python bench/ocr.py [--rounds 1] [--engines rapidocr,tesseract,quartet]

The pages are those of the tests (tests/scans.py): English, German, Chinese and a small table,
rendered with Noto Sans CJK into greyscale images with paper noise, blur and 1.5° of skew, plus a
"hard" variant of each (more noise, more blur, 3° of skew), a page of vertical Chinese (columns top
to bottom, right to left), and the pages of the appliance tests' scanned PDFs, rendered as the reader
renders them. Candidates, all read with every language at once as the appliance must (it
does not know a page's language beforehand):

  rapidocr   RapidOCR (PaddleOCR's PP-OCRv4 detection/recognition models in ONNX, inside its PyPI
             wheel `rapidocr-onnxruntime`), one thread
  tesseract  Debian's tesseract-ocr 5 with `chi_sim+eng+deu` through pytesseract, one thread
  quartet    what the appliance runs (app/knowledge/loaders/ocr.py): that Tesseract, with orientation
             detection and, for a page read unsure, vertical Chinese (`chi_sim_vert`) tried as well

Prints one row per page kind and engine (CER, seconds per page), then pages/s per engine. An engine
whose package is missing is reported as such. Results and the choice: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_THREAD_LIMIT", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from tests.scans import CHINESE, PAGES, cer, scan, vertical_scan  # noqa: E402

Engine = Callable[[Image.Image], str]


def rapidocr() -> Engine:
    import numpy as np
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)

    def read(image: Image.Image) -> str:
        found, _ = engine(np.array(image.convert("RGB")))
        return "\n".join(text for _, text, _ in found or [])

    return read


def tesseract() -> Engine:
    import pytesseract

    def read(image: Image.Image) -> str:
        return str(pytesseract.image_to_string(image, lang="chi_sim+eng+deu", config="--psm 3"))

    return read


def quartet() -> Engine:
    from app.knowledge.loaders.ocr import read_image

    return lambda image: read_image(image).text


CANDIDATES = {"rapidocr": rapidocr, "tesseract": tesseract, "quartet": quartet}


def pages() -> dict[str, tuple[str, Image.Image]]:
    made = {}
    for kind, lines in PAGES.items():
        made[kind] = ("\n".join(lines), scan(lines, seed=1))
        made[f"{kind} hard"] = ("\n".join(lines), scan(lines, noise=40, blur=1.0, skew=3.0, seed=2))
    made["chinese vertical"] = ("\n".join(CHINESE), vertical_scan(CHINESE, seed=1))
    return made | test_pdf_pages()


def test_pdf_pages() -> dict[str, tuple[str, Image.Image]]:
    """The pages of the appliance tests' scanned PDFs, rendered as the reader renders them (300 dpi):
    the Chinese page (tests/test_documents_ocr.py), and the lab report's faxed header and clean results
    (tests/test_extraction_scans.py)."""
    import tempfile

    from app.knowledge.loaders.scans import PdfPages
    from tests.scans import image_pdf
    from tests.table_documents import lab_report
    from tests.test_extraction_scans import scanned_lab_report

    lines = lab_report().pages[0]
    wanted = {
        "chinese (pdf)": (image_pdf([scan(CHINESE, seed=4)]), 1, CHINESE),
        "lab fax (pdf)": (scanned_lab_report(), 1, [*lines[:4], "Accreditation: ISO/IEC 17025", lines[-1]]),
        "lab table (pdf)": (scanned_lab_report(), 2, lines[5:-2]),
    }
    made = {}
    with tempfile.TemporaryDirectory() as folder:
        for kind, (data, number, expected) in wanted.items():
            path = Path(folder) / "scan.pdf"
            path.write_bytes(data)
            rendered = PdfPages(str(path), None, max_pixels=50_000_000)
            made[kind] = ("\n".join(expected), rendered.image(number))
            rendered.close()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--engines", default=",".join(CANDIDATES), help="which candidates, comma-separated")
    args = parser.parse_args()
    made = pages()
    print(f"{'page':<17} {'engine':<10} {'CER':>6} {'s/page':>7}")
    speed: dict[str, float] = {}
    for name, make in CANDIDATES.items():
        if name not in args.engines.split(","):
            continue
        try:
            read = make()
        except ImportError as err:
            print(f"{name}: not installed ({err})")
            continue
        read(made["english"][1])  # warm up (model load, first allocation)
        spent = 0.0
        for kind, (expected, image) in made.items():
            started = time.perf_counter()
            for _ in range(args.rounds):
                got = read(image)
            seconds = (time.perf_counter() - started) / args.rounds
            spent += seconds
            print(f"{kind:<17} {name:<10} {cer(expected, got):>6.3f} {seconds:>7.2f}")
        speed[name] = len(made) / spent
    for name, rate in speed.items():
        print(f"{name}: {rate:.2f} pages/s")


if __name__ == "__main__":
    main()
