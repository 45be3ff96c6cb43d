"""Scanned pages made at test time: text rendered with Pillow and Debian's Noto CJK font into a grey image,
with paper noise, a little blur and a few degrees of skew — as a flatbed scan or a phone photo looks.
Shared by the OCR tests and bench/ocr.py (so the benchmark measures the pages the tests read)."""

from __future__ import annotations

import io
import random
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")  # fonts-noto-cjk (launcher/setup.sh)
_SC = 2  # the face index of Noto Sans CJK SC in the collection

ENGLISH = [
    "Delivery note 4471 for Quartet appliance",
    "Four accelerator cards were shipped on 12 March 2025.",
    "The cooling fan must be cleaned every six months.",
    "Contact the service desk before opening the case.",
]
GERMAN = [
    "Lieferschein Nr. 2291 für die Prüfstelle",
    "Die Wärmeleitpaste wurde am 3. Mai gewechselt.",
    "Größere Störungen bitte sofort melden.",
    "Übergabe erfolgt an der Laderampe in München.",
]
CHINESE = [
    "送货单编号三七二一",
    "四张加速卡已于三月送达仓库。",
    "请每六个月清洁一次散热风扇。",
    "如有故障请联系技术支持部门。",
]
TABLE = [
    "Test          Result    Unit     Range",
    "Glucose       5.4       mmol/L   3.9-6.1",
    "Sodium        141       mmol/L   135-145",
    "Potassium     4.2       mmol/L   3.5-5.1",
]
PAGES = {"english": ENGLISH, "german": GERMAN, "chinese": CHINESE, "table": TABLE}


def font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT), size, index=_SC)


def scan(
    lines: Sequence[str],
    *,
    width: int = 1100,
    size: int = 34,
    noise: int = 18,
    blur: float = 0.6,
    skew: float = 1.5,
    rotate: int = 0,
    seed: int = 1,
) -> Image.Image:
    """`lines` as a scanned page: greyscale, noisy, blurred, skewed by `skew` degrees, and turned by
    `rotate` (0/90/180/270) as a page fed in sideways or upside down."""
    leading = int(size * 1.8)
    height = 80 + leading * len(lines) + 60
    page = Image.new("L", (width, height), 245)
    draw = ImageDraw.Draw(page)
    face = font(size)
    for i, line in enumerate(lines):
        draw.text((60, 60 + i * leading), line, fill=25, font=face)
    page = _scanned(page, noise=noise, blur=blur, skew=skew, seed=seed)
    return page.rotate(rotate, expand=True) if rotate else page


def vertical_scan(
    lines: Sequence[str], *, size: int = 34, noise: int = 18, blur: float = 0.6, seed: int = 1
) -> Image.Image:
    """`lines` written as vertical Chinese: each line a column, top to bottom, the columns right to left,
    scanned as `scan` does (noise, blur, 1.5° of skew)."""
    step, leading = int(size * 1.15), int(size * 1.8)
    width, height = 120 + leading * len(lines), 120 + step * max(len(line) for line in lines)
    page = Image.new("L", (width, height), 245)
    draw = ImageDraw.Draw(page)
    face = font(size)
    for column, line in enumerate(lines):
        for row, character in enumerate(line):
            draw.text((width - 60 - size - column * leading, 60 + row * step), character, fill=25, font=face)
    return _scanned(page, noise=noise, blur=blur, skew=1.5, seed=seed)


def _scanned(page: Image.Image, *, noise: int, blur: float, skew: float, seed: int) -> Image.Image:
    if noise:
        rng = random.Random(seed)
        speckle = Image.frombytes("L", page.size, bytes(rng.randrange(256) for _ in range(page.width * page.height)))
        page = Image.blend(page, speckle, noise / 255)
    if blur:
        page = page.filter(ImageFilter.GaussianBlur(blur))
    if skew:
        page = page.rotate(skew, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=245)
    return page


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def image_pdf(images: Sequence[Image.Image], *, dpi: int = 150) -> bytes:
    """An image-only PDF (no text layer): one page per image, as a scanner writes it."""
    out = io.BytesIO()
    first, *rest = [im.convert("RGB") for im in images]
    first.save(out, "PDF", save_all=True, append_images=rest, resolution=dpi)
    return out.getvalue()


def tiff(images: Sequence[Image.Image]) -> bytes:
    """A multi-page TIFF, as a fax or a document scanner writes it."""
    out = io.BytesIO()
    first, *rest = list(images)
    first.save(out, "TIFF", save_all=True, append_images=rest, compression="tiff_deflate")
    return out.getvalue()


def cer(expected: str, got: str) -> float:
    """Character error rate: edit distance over the expected length, whitespace ignored."""
    a, b = "".join(expected.split()), "".join(got.split())
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[len(b)] / max(1, len(a))


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width` × `height` pixels, with a little compressed data (a bomb's header)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 10_000))
        + chunk(b"IEND", b"")
    )


def truncated_jpeg() -> bytes:
    """A JPEG cut off half-way (an interrupted transfer)."""
    out = io.BytesIO()
    scan(ENGLISH).save(out, "JPEG")
    return out.getvalue()[: len(out.getvalue()) // 2]


def strip() -> bytes:
    """A 100,000 × 1 pixel image: valid, and too thin to hold a line of text."""
    return png(Image.new("L", (100_000, 1), 255))


def a3_scan_pdf() -> bytes:
    """One A3 page scanned at 600 dpi (7016 × 9921 pixels, a few lines of text) as an image-only PDF."""
    page = Image.new("L", (7016, 9921), 250)
    draw = ImageDraw.Draw(page)
    for i, line in enumerate(ENGLISH):
        draw.text((600, 800 + i * 260), line, fill=20, font=font(150))
    out = io.BytesIO()
    page.save(out, "PDF", resolution=600)
    return out.getvalue()
