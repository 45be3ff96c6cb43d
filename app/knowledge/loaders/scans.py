"""Scanned pages in the reader process (`worker.py`): images of pages, bounded, read by OCR (`ocr.py`).

An image file (PNG, JPEG, TIFF with all its pages, WebP) is opened by Pillow, a PDF page without a
text layer is rendered by pypdfium2 at 300 dpi; neither may have more than `max_pixels` (Pillow's
checked from each image's header: a decompression bomb is refused before it is unpacked), and a
page is read in at most `page_timeout_s`. In the lane of small files at most `max_pages` pages are
read by OCR: a longer scan is handed on to the lane of large files (`ScanTooLong`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from PIL import Image, ImageSequence

from app.knowledge.loaders.ocr import OcrError, read_image
from app.knowledge.loaders.types import LoadError, ScanTooLong

_DPI = 300
_THIN = 16  # pixels: a strip narrower than this holds no readable line


class ScanSink(Protocol):
    def total(self, pages: int) -> None: ...

    def page(self, number: int, text: str, *, failed: str | None = None, ocr: float | None = None) -> None: ...

    def reading_by_ocr(self, number: int) -> None: ...


@dataclass
class Scans:
    max_pixels: int
    page_timeout_s: float
    max_pages: int | None  # None: no limit (the lane of large files)
    allow_cpu: Callable[[float], None]  # more CPU seconds for the reader process, per page read
    count: int = 0  # pages read by OCR so far

    def page(self, number: int, image: Image.Image, sink: ScanSink) -> None:
        """Read one page image by OCR and send it on (a page that fails is sent as failed)."""
        self.start(number, sink)
        self.read(number, image, sink)

    def read(self, number: int, image: Image.Image, sink: ScanSink, *, layer: str = "") -> None:
        """The OCR of a page `start` was called for; where OCR finds nothing (or fails), the page's own bit of
        text layer (`layer`: a caption, a page number) is kept rather than lost."""
        try:
            found = read_image(image, timeout_s=self.page_timeout_s)
        except OcrError as err:
            sink.page(number, layer, failed=None if layer.strip() else str(err))
            return
        if not found.text.strip() and layer.strip():
            sink.page(number, layer)
            return
        sink.page(number, found.text, ocr=found.confidence)

    def start(self, number: int, sink: ScanSink) -> None:
        """Count the page (ScanTooLong past `max_pages`), give it CPU time, and say it is being read."""
        if self.max_pages is not None and self.count >= self.max_pages:
            raise ScanTooLong
        self.count += 1
        self.allow_cpu(self.page_timeout_s * 4 + 5)  # the reader's own share of its tries (ocr.read_image)
        sink.reading_by_ocr(number)


def read_image_file(path: Path, *, name: str, scans: Scans, sink: ScanSink) -> None:
    """Every page (frame) of an image file, read by OCR."""
    image = _opened(path, name=name, max_pixels=scans.max_pixels)
    frames = getattr(image, "n_frames", 1)
    sink.total(frames)
    for number, frame in enumerate(_frames(image, name=name, max_pixels=scans.max_pixels), start=1):
        scans.page(number, frame, sink)


def _opened(path: Path, *, name: str, max_pixels: int) -> Image.Image:
    Image.MAX_IMAGE_PIXELS = None  # checked below from the header, before any pixel is unpacked
    try:
        image = Image.open(path)
    except (OSError, ValueError, SyntaxError) as err:
        raise LoadError("corrupt", f"{name} is damaged or not an image Pillow can read ({err}).") from None
    width, height = image.size
    if width * height > max_pixels:
        raise LoadError("too_large", _too_many_pixels(name, image.size, max_pixels))
    if min(width, height) < _THIN:
        raise LoadError("no_text", f"{name} is {width:,} × {height:,} pixels: too thin to hold readable text.")
    return image


def _frames(image: Image.Image, *, name: str, max_pixels: int) -> Iterator[Image.Image]:
    try:
        for frame in ImageSequence.Iterator(image):
            if frame.size[0] * frame.size[1] > max_pixels:  # a later page of a TIFF may be larger
                raise LoadError("too_large", _too_many_pixels(name, frame.size, max_pixels))
            frame.load()
            yield frame.copy()
    except (OSError, ValueError, SyntaxError) as err:
        raise LoadError("corrupt", f"{name} is damaged: its image data cannot be read ({err}).") from None


def _too_many_pixels(name: str, size: tuple[int, int], max_pixels: int) -> str:
    return (
        f"{name} is {size[0]:,} × {size[1]:,} pixels, more than the {max_pixels / 1e6:g} million pixels an image "
        "may have to be read by OCR (setting knowledge.ocr_max_megapixels). Scan it at 300 dpi or less."
    )


class PdfPages:
    """A PDF's pages as images, by pypdfium2 (opened on the first page that needs it)."""

    def __init__(self, path: str, password: str | None, *, max_pixels: int) -> None:
        self.path = path
        self.password = password
        self.max_pixels = max_pixels
        self._pdf: Any = None

    def image(self, number: int) -> Image.Image:
        import pypdfium2

        if self._pdf is None:
            self._pdf = pypdfium2.PdfDocument(self.path, password=self.password)
        page = self._pdf[number - 1]
        width, height = page.get_size()  # points
        scale = min(_DPI / 72, (self.max_pixels / max(1.0, width * height)) ** 0.5)
        return page.render(scale=scale, grayscale=True).to_pil()

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()
