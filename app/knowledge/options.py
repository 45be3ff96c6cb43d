"""The knowledge base's knobs: the `[knowledge]` section of the settings (app/settings.py adds the folder,
the embedder's threads and the sources of an answer), handed to the knowledge service as they are."""

from __future__ import annotations

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from app.knowledge.loaders import ReadLimits


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class KnowledgeOptions:
    max_file_mb: float = Field(
        default=200.0,
        gt=0,
        description="Largest document accepted, uploaded or in the folder, in MiB (larger: refused).",
    )
    read_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="A document's reader process (every format) is stopped after this many seconds.",
    )
    read_memory_mb: int = Field(
        default=1024, ge=128, description="Memory (address space) of a document's reader process, in MiB."
    )
    max_unpacked_mb: float = Field(
        default=100.0,
        gt=0,
        description="A .docx whose text XML unpacks to more than this many MiB is refused (zip bombs).",
    )
    max_pages: int = Field(
        default=2000,
        ge=1,
        description="Pages read of one document (text: pages of `page_chars`); the rest is left out, saying so.",
    )
    max_chunks: int = Field(
        default=5000,
        ge=1,
        description="Passages embedded of one document; the pages after them are left out, saying so.",
    )
    large_file_mb: float = Field(
        default=4.0,
        gt=0,
        description="Files larger than this (MiB) are indexed one at a time in a lane of their own, beside small ones.",
    )
    small_lane_chunks: int = Field(
        default=400, ge=1, description="A smaller file with more passages than this moves to the large files' lane too."
    )
    ocr: bool = Field(
        default=True,
        description="Pages without a text layer (scans) and image files (PNG, JPEG, TIFF, WebP) are read by OCR.",
    )
    ocr_page_timeout_s: float = Field(
        default=60.0, gt=0, description="The OCR of one page is stopped after this many seconds (per try)."
    )
    ocr_max_megapixels: float = Field(
        default=50.0,
        gt=0,
        description="Images with more pixels than this (millions) are refused: decompression bombs, giant scans.",
    )
    small_lane_ocr_pages: int = Field(
        default=3, ge=1, description="A file in the small files' lane with more pages to OCR moves to the large lane."
    )
    page_chars: int = Field(default=3000, ge=100, description="Characters of a page of a plain-text file.")
    chunk_tokens: int = Field(
        default=200, ge=16, le=254, description="Word pieces per passage (whole sentences; MiniLM reads at most 254)."
    )
    chunk_overlap: int = Field(
        default=30, ge=0, description="Word pieces neighbouring passages share (whole sentences)."
    )
    embed_batch: int = Field(
        default=32, ge=1, description="Passages per embedding call; a search waits at most for one call."
    )
    watch: bool = Field(default=True, description="Watch the folder for new, changed and deleted files.")
    settle_s: float = Field(
        default=1.0, gt=0, description="A changed file is indexed once its size and time held still this many seconds."
    )
    rescan_s: float = Field(
        default=300.0, gt=0, description="Seconds between full rescans of the folder and of every indexed file."
    )

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 2**20)

    @property
    def read_limits(self) -> ReadLimits:
        return ReadLimits(
            timeout_s=self.read_timeout_s, memory_mb=self.read_memory_mb, max_pages=self.max_pages,
            max_unpacked_mb=self.max_unpacked_mb, page_chars=self.page_chars, ocr=self.ocr,
            ocr_page_timeout_s=self.ocr_page_timeout_s, ocr_max_pixels=int(self.ocr_max_megapixels * 1e6),
        )  # fmt: skip
