"""Text from an image of a page: Tesseract (Debian's tesseract-ocr with chi_sim, eng and deu), the one
place the OCR engine enters (chosen by bench/ocr.py, see docs/benchmarks.md).

Runs in the reader process (`worker.py`): pytesseract starts the `tesseract` program, which inherits
the reader's memory and CPU limits, and is killed after `timeout_s`. A page turned by 90°, 180° or
270° is set upright first (Tesseract's orientation detection, OSD); the page is read with every
language at once, since a page's language is not known beforehand (and pages mix them). Chinese
written in columns (top to bottom, right to left) reads as noise across them: a page read unsure is
read again as vertical Chinese (`chi_sim_vert`, one vertical block), and the surer reading is kept.
"""

from __future__ import annotations

import functools
import re
import shutil
import time
from dataclasses import dataclass, replace

from PIL import Image

from app.knowledge.script import is_cjk

LANGUAGES = "chi_sim+eng+deu"
VERTICAL = "chi_sim_vert"  # Debian's tesseract-ocr-chi-sim-vert; without it, vertical pages are not tried
_MAX_SIDE = 5000  # longer sides are scaled down: 300 dpi A3 is 4961 px; more adds time, not accuracy
_SURE = 0.6  # a page read with less confidence than this is tried as vertical Chinese and in the other orientations
_TRIES = 4  # all runs at one page within this many page timeouts: the reader allows a page that long (reader.py)
_ROTATE = re.compile(r"Rotate: (\d+)")
_ORIENTATION_CONFIDENCE = re.compile(r"Orientation confidence: ([\d.]+)")


class OcrError(Exception):
    """The page could not be read by OCR; the message says why, for people."""


@dataclass(frozen=True)
class OcrText:
    text: str
    confidence: float  # 0–1: Tesseract's word confidences, weighted by word length; 0 when no text
    rotated: int = 0  # degrees the page was turned (clockwise) before reading
    vertical: bool = False  # read as Chinese in columns, right to left


def unavailable() -> str | None:
    """Why OCR cannot run on this machine, or None when it can."""
    if shutil.which("tesseract") is None:
        return "the tesseract program is not installed (launcher/setup.sh installs Debian's tesseract-ocr)"
    return None


def read_image(image: Image.Image, *, timeout_s: float = 60.0, languages: str = LANGUAGES) -> OcrText:
    """The text of a page image, set upright first. Each run of Tesseract stops after `timeout_s` (the page
    fails if its first reading does), all runs together after `_TRIES` times that. Raises OcrError."""
    deadline = time.monotonic() + _TRIES * timeout_s
    page = _prepared(image)
    rotated = _orientation(page, timeout_s=timeout_s)
    best = _read(page, rotated, languages=languages, timeout_s=min(timeout_s, _left(deadline)))
    tries: list[tuple[int, str, int]] = []  # when unsure: vertical Chinese, then the other orientations
    if "chi_sim" in languages.split("+") and _has_vertical():
        tries.append((rotated, VERTICAL, 5))  # one vertical block of text: columns right to left
    tries += [(turn, languages, 3) for turn in (0, 90, 180, 270) if turn != rotated]  # OSD is weak on Chinese
    for turn, langs, psm in tries:  # and on noisy pages: try them, keep the surest
        if best.confidence >= _SURE or _left(deadline) < 1:
            break
        try:
            found = _read(page, turn, languages=langs, timeout_s=min(timeout_s, _left(deadline)), psm=psm)
        except OcrError:  # out of time: the surest reading so far stands
            break
        if found.confidence > best.confidence:
            best = replace(found, vertical=langs == VERTICAL)
    return best


def _left(deadline: float) -> float:
    return max(0.5, deadline - time.monotonic())


@functools.cache
def _has_vertical() -> bool:
    import pytesseract

    try:
        return VERTICAL in pytesseract.get_languages()
    except (OSError, pytesseract.TesseractError):
        return False


def _read(page: Image.Image, rotated: int, *, languages: str, timeout_s: float, psm: int = 3) -> OcrText:
    import pytesseract

    upright = page.rotate(-rotated, expand=True, fillcolor=255) if rotated else page
    try:
        data = pytesseract.image_to_data(
            upright, lang=languages, config=f"--psm {psm}", timeout=timeout_s, output_type=pytesseract.Output.DICT
        )
    except RuntimeError as err:  # pytesseract's "Tesseract process timeout"
        raise OcrError(f"reading the page by OCR took longer than {timeout_s:g} s") from err
    except pytesseract.TesseractError as err:
        raise OcrError(f"the OCR engine failed ({err.message or err.status})"[:300]) from err
    return _assembled(data, rotated)


def _prepared(image: Image.Image) -> Image.Image:
    page = image.convert("L")
    if max(page.size) > _MAX_SIDE:
        page.thumbnail((_MAX_SIDE, _MAX_SIDE), Image.Resampling.LANCZOS)
    return page


def _orientation(page: Image.Image, *, timeout_s: float) -> int:
    """Degrees to turn the page clockwise to set it upright (0 when unsure, or too little text)."""
    import pytesseract

    try:
        osd = pytesseract.image_to_osd(page, config="--psm 0", timeout=timeout_s)
    except (RuntimeError, pytesseract.TesseractError):  # too few characters to tell: read it as it is
        return 0
    rotate, confidence = _ROTATE.search(osd), _ORIENTATION_CONFIDENCE.search(osd)
    if not rotate or not confidence or float(confidence.group(1)) < 1.0:
        return 0
    return int(rotate.group(1)) % 360


def _assembled(data: dict[str, list[object]], rotated: int) -> OcrText:
    """Words into lines (Chinese without spaces between characters), lines into paragraphs."""
    lines: dict[tuple[int, int, int], list[str]] = {}
    weighted = total = 0.0
    for i, word in enumerate(data["text"]):
        text = str(word).strip()
        confidence = float(str(data["conf"][i]))
        if not text or confidence < 0:
            continue
        key = (int(str(data["block_num"][i])), int(str(data["par_num"][i])), int(str(data["line_num"][i])))
        lines.setdefault(key, []).append(text)
        weighted += confidence * len(text)
        total += len(text)
    out: list[str] = []
    previous: tuple[int, int] | None = None
    for (block, par, _), words in lines.items():
        if previous is not None and previous != (block, par):
            out.append("")
        out.append(_joined(words))
        previous = (block, par)
    return OcrText("\n".join(out), round(weighted / total / 100, 3) if total else 0.0, rotated)


def _joined(words: list[str]) -> str:
    line = words[0]
    for word in words[1:]:
        line += word if is_cjk(line[-1]) or is_cjk(word[0]) else " " + word
    return line
