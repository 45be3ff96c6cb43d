"""The knowledge base's knobs, filled from Settings by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from app.knowledge.loaders import ReadLimits


@dataclass(frozen=True)
class KnowledgeOptions:
    max_file_mb: float = 200.0  # larger files are refused (also the upload limit)
    read_timeout_s: float = 300.0  # a document's reader process is killed after this long
    read_memory_mb: int = 1024  # address-space limit of the reader process
    max_unpacked_mb: float = 100.0  # a .docx whose XML unpacks to more is refused
    max_pages: int = 2000  # pages read of one document; the rest is left out, and it says so
    max_chunks: int = 5000  # chunks embedded of one document; the rest is left out, and it says so
    large_file_mb: float = 4.0  # larger files are indexed in a lane of their own (never ahead of small ones)
    small_lane_chunks: int = 400  # a smaller file with more passages moves to that lane (about a minute of embedding)
    page_chars: int = 3000  # size of a pseudo-page of a text file
    chunk_tokens: int = 200  # word pieces per chunk (MiniLM reads at most 254)
    chunk_overlap: int = 30  # word pieces shared by neighbouring chunks (whole sentences)
    embed_batch: int = 32  # chunks per embedding call; a search waits at most for one call
    watch: bool = True  # watch the kb folder for changes
    settle_s: float = 1.0  # a changed file is indexed once its size and mtime held still this long
    rescan_s: float = 300.0  # full rescan of the kb folder and of every indexed file, in seconds

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 2**20)

    @property
    def read_limits(self) -> ReadLimits:
        return ReadLimits(
            timeout_s=self.read_timeout_s, memory_mb=self.read_memory_mb, max_pages=self.max_pages,
            max_unpacked_mb=self.max_unpacked_mb, page_chars=self.page_chars,
        )  # fmt: skip
