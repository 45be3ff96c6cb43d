"""Speculative decoding from the context: the same engine with drafts off and on, side by side in one run.

    .venv/bin/python bench/speculation.py [--rounds 3] [--rows quote,extract,plain]

Starts four card agents on loopback, loads the demo model across them in this process, and runs each row's
request with drafts off, then on (then on, off in the next round, and so on), its prompt read afresh each time.
Rows: `quote`, a grounded answer that quotes its passage; `extract`, a JSON-schema extraction of fields that
stand in the document (bench/extraction.py's invoice); `plain`, an answer with nothing to copy (nothing may be
lost there). Prints each run, then per row the medians: decode tok/s (generated − 1 over the time after the first
token), tokens per step, drafts kept, and on ÷ off; whether the texts were the same both ways.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as bench  # bench/engine.py
import extraction  # bench/extraction.py: its invoice

sys.path.insert(0, str(bench.ROOT))
from app.engine.events import GenerationRequest, Message
from app.engine.llama.drafts import DraftConfig

PASSAGE = (
    "Section 4.2, Thermal limits. Each card throttles its clock at 85 degrees Celsius and shuts down at 95 "
    "degrees Celsius. The host reads every card's temperature once a second and holds new answers while any "
    "card is above 85 degrees Celsius; answers already running finish. A card that has shut down comes back "
    "by itself once it has cooled below 60 degrees Celsius, and the engine loads the model on it again."
)
FIELDS = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string"},
        "seller": {"type": "string"},
        "seller_address": {"type": "string"},
        "buyer": {"type": "string"},
        "buyer_address": {"type": "string"},
        "seller_vat_id": {"type": "string"},
    },
    "required": ["invoice_number", "seller", "seller_address", "buyer", "buyer_address", "seller_vat_id"],
    "additionalProperties": False,
}


def requests(max_tokens: int) -> dict[str, GenerationRequest]:
    quote = (
        f"Source [1], handbook.pdf page 3:\n{PASSAGE}\n\nWhat happens when a card gets too hot? Answer by quoting "
        "source [1] word for word, then cite it as [1]."
    )
    extract = f"Extract the fields from this invoice as JSON.\n\n{extraction.INVOICE}"
    plain = "Write a short story about a lighthouse keeper who finds a message in a bottle."
    ask = {"quote": quote, "extract": extract, "plain": plain}
    return {
        row: GenerationRequest(
            messages=(Message("user", text),),
            max_tokens=max_tokens,
            temperature=0.0,
            json_schema=json.dumps(FIELDS) if row == "extract" else None,
        )
        for row, text in ask.items()
    }


def measure(engine: Any, request: GenerationRequest, drafts: DraftConfig | None) -> dict[str, Any]:
    engine.batcher.forget()
    engine.batcher.drafts = drafts
    started = time.monotonic()
    text, stats = bench.generate(engine, request)
    stats["wall_s"] = round(time.monotonic() - started, 3)
    decode_s = stats["total_s"] - stats["ttft_s"]
    stats["tps"] = (stats["generated_tokens"] - 1) / decode_s if decode_s > 0 else 0.0
    stats["per_step"] = stats["generated_tokens"] / max(1, stats["steps"])
    stats["kept"] = stats["accepted_tokens"] / stats["drafted_tokens"] if stats["drafted_tokens"] else 0.0
    stats["text"] = text
    return stats


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rows", default="quote,extract,plain")
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--draft-max", type=int, default=16)
    p.add_argument("--draft-ngram", type=int, default=4)
    p.add_argument("--model", default=str(bench.MODEL))
    p.add_argument("--card-threads", type=int, default=1)
    p.add_argument("--ports", type=int, nargs=4, default=[26152, 26153, 26154, 26155])
    p.add_argument("--health-ports", type=int, nargs=4, default=[27152, 27153, 27154, 27155])
    p.add_argument("--cache-dir", default="/tmp/quartet-bench/rpc-cache")
    args = p.parse_args()
    rows = args.rows.split(",")
    on = DraftConfig(ngram=args.draft_ngram, max_tokens=args.draft_max)
    procs = bench.start_cards(args, {})
    engine = None
    try:
        spec = {"model": args.model, "cards": [f"127.0.0.1:{port}" for port in args.ports], "n_ctx": 4096}
        engine = bench.engine_for(spec)
        info = engine.load()
        print(f"layers per card: { {c.endpoint: len(c.layers) for c in info.cards} }", flush=True)
        asked = requests(args.max_tokens)
        measure(engine, asked["plain"], None)  # warm-up
        runs: dict[tuple[str, bool], list[dict[str, Any]]] = {(row, side): [] for row in rows for side in (False, True)}
        for round_ in range(args.rounds):
            for row in rows:
                for side in (False, True) if round_ % 2 == 0 else (True, False):
                    r = measure(engine, asked[row], on if side else None)
                    runs[(row, side)].append(r)
                    print(
                        f"  round {round_} {row:8} drafts {'on ' if side else 'off'}: {r['tps']:6.1f} tok/s, "
                        f"{r['generated_tokens']} tokens in {r['steps']} steps, kept {r['accepted_tokens']}/"
                        f"{r['drafted_tokens']}, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        report(runs, rows)
    finally:
        if engine is not None:
            engine.close()
        bench.stop_procs(procs)
    return 0


def report(runs: dict[tuple[str, bool], list[dict[str, Any]]], rows: list[str]) -> None:
    print(
        f"\n{'row':10}{'off tok/s':>11}{'on tok/s':>10}{'on/off':>8}{'tokens/step':>13}{'drafts kept':>13}  same text"
    )
    for row in rows:
        off, on = runs[(row, False)], runs[(row, True)]

        def med(side: list[dict[str, Any]], key: str) -> float:
            return float(statistics.median(r[key] for r in side))

        same = {r["text"] for r in off} == {r["text"] for r in on}
        print(
            f"{row:10}{med(off, 'tps'):11.1f}{med(on, 'tps'):10.1f}{med(on, 'tps') / med(off, 'tps'):8.2f}"
            f"{med(on, 'per_step'):13.2f}{med(on, 'kept'):13.2f}  {same}"
        )
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
