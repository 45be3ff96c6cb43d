"""Scans through the knowledge service, as the app indexes them: a small file is not held up by a long
scan (which shows its OCR progress page by page), and hostile images get a clear status while the
app's memory stays bounded (measured in a fresh process, as in tests/test_knowledge_limits.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.knowledge.embedder import Embedder
from app.knowledge.options import KnowledgeOptions
from tests.scans import ENGLISH, GERMAN, a3_scan_pdf, image_pdf, png_header, scan, strip, truncated_jpeg
from tests.test_knowledge_fixtures import eventually
from tests.test_knowledge_limits import GROWTH_BOUND_MB, INDEXING_PROCESS, READER_MEMORY_MB, ROOT, service_with
from tests.test_knowledge_limits import embedder as embedder


def test_a_small_file_is_not_held_up_by_a_long_scan(tmp_path: Path, embedder: Embedder) -> None:
    """A 3-page scan (small on disk) reads 1 page by OCR in the small lane, then moves to the large one."""
    long_scan = tmp_path / "scan.pdf"
    long_scan.write_bytes(image_pdf([scan(GERMAN if n % 2 else ENGLISH, noise=0, seed=n) for n in range(3)]))
    small = tmp_path / "small.md"
    small.write_text("# Fans\n\nThe fan of the appliance spins at 2,400 rpm.")
    options = KnowledgeOptions(watch=False, small_lane_ocr_pages=1)
    # The model loaded first: a cold load (seconds) would hold both lanes until both had little left to do,
    # and which then ends first is a coin toss (CI lost it once). The lanes are what is tested here.
    embedder.count_tokens(["warm"])
    with service_with(tmp_path, embedder, options) as kb:
        kb.ingest_paths([long_scan])
        seen = eventually(
            lambda: (p := kb.progress().active) and p.state == "ocr" and p.pages_done >= 1 and p,
            timeout=60, message="no page of the scan was shown being read by OCR",
        )  # fmt: skip
        assert seen.pages_total == 3
        kb.ingest_paths([small])
        eventually(
            lambda: next((d for d in kb.documents() if d.name == "small.md" and d.status == "ok"), None),
            timeout=120, message="the small file was not indexed",
        )  # fmt: skip
        scanned = next(d for d in kb.documents() if d.name == "scan.pdf")
        assert scanned.status in ("indexing", "queued"), "the small file should be done before the scan"
        assert kb.wait_idle(300)
        scanned = next(d for d in kb.documents() if d.name == "scan.pdf")
        assert (scanned.status, scanned.pages_total, scanned.note) == ("ok", 3, None)


@pytest.mark.slow
def test_hostile_images_get_a_clear_status_and_the_apps_memory_stays_bounded(tmp_path: Path) -> None:
    folder = tmp_path / "hostile"
    folder.mkdir()
    made = {
        "bomb.png": png_header(100_000, 100_000), "huge.png": png_header(20_000, 20_000),
        "cut.jpg": truncated_jpeg(), "strip.png": strip(), "a3-600dpi.pdf": a3_scan_pdf(),
    }  # fmt: skip
    for name, data in made.items():
        (folder / name).write_bytes(data)
    request = {"db": str(tmp_path / "kb.db"), "files": [str(folder / n) for n in made], "reader_mb": READER_MEMORY_MB}
    done = subprocess.run(
        [sys.executable, "-c", INDEXING_PROCESS, json.dumps(request)], cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["idle"]
    growth_mb = (report["after_kb"] - report["before_kb"]) / 1024
    print(f"took {report['took']:.1f} s; app +{growth_mb:.0f} MB; readers' peak {report['readers_kb'] / 1024:.0f} MB")
    assert growth_mb < GROWTH_BOUND_MB and report["readers_kb"] / 1024 < READER_MEMORY_MB
    docs = {d["name"]: (d["status"], d["kind"], d["note"]) for d in report["docs"]}
    assert docs["bomb.png"][:2] == ("error", "too_large") and "100,000 × 100,000 pixels" in docs["bomb.png"][2]
    assert docs["huge.png"][:2] == ("error", "too_large") and "20,000 × 20,000" in docs["huge.png"][2]
    assert docs["cut.jpg"][:2] == ("error", "corrupt") and "damaged" in docs["cut.jpg"][2]
    assert docs["strip.png"][:2] == ("error", "no_text") and "too thin" in docs["strip.png"][2]
    assert docs["a3-600dpi.pdf"][0] == "ok", docs["a3-600dpi.pdf"]
