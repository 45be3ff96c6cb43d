"""Extraction: grammar-constrained (JSON schema) generation vs free generation on the same prompt.

    .venv/bin/python bench/extraction.py [--reps 5] [--max-tokens 128] [--inproc] [--case table]

One worker process loads the demo model once, split across four card agents of its own (or, with
--inproc, every layer on the host CPU), and builds the app's extraction request for an invoice of
about 1,500 characters: the prompt files assets/prompts/extract_*.txt, the fields described by
`_describe` of the invoice template, the page text as the Extractor marks it. Two sides ask it:
  json: the app's request, `json_schema=json.dumps(bounded(schema))` (the grammar-constrained answer);
  free: the same messages with no json_schema.
Temperature 0, the same max_tokens and a fresh KV cache for every run, sides alternating json, free,
free, json, ... after one warm-up each. A constrained answer may stop early (its JSON is complete):
then it has fewer tokens than the free one and only per-token rates compare. Besides the engine's
own numbers, the worker measures the thread CPU time of each `llm.sample()` (where the grammar
filters the whole vocabulary; its wall time is no measure: with cards it includes waiting for the
cards' logits) and the bench reads each process's CPU time per token.
With --case table the document is a lab report whose twelve results stand in a grid, asked with the
lab_report template (its `results` table: an array of objects, bounded by `bounded` like the app's).
Reuses bench/engine.py's worker driver, card agents and CPU readers.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as bench  # bench/engine.py

ROOT = bench.ROOT
SIDES = ("json", "free")
LABELS = {"json": "constrained (json_schema)", "free": "free (no schema)"}
METRICS = (
    "generated_tokens",
    "decode_tps",
    "ttft_s",
    "prompt_tps",
    "host_cpu_ms_tok",
    "cards_cpu_ms_tok",
    "sample_ms_tok",
    "sample_cpu_ms_tok",
    "forward_ms_tok",
    "grammar_ms",
)
DOCUMENT = "invoice-NP-2024-03187.pdf"
INVOICE = """INVOICE
Nordlicht Präzisionsteile GmbH, Hafenstraße 14, 28217 Bremen, Germany
VAT ID: DE289514773 - Tel. +49 421 5567 0 - www.nordlicht-praezision.de

Bill to: Alpenwerk Maschinenbau AG, Industriering 7, 6330 Cham, Switzerland
Customer VAT: CHE-114.582.907 MWST - Customer no. 40917

Invoice no.: NP-2024-03187
Invoice date: 14 March 2024
Delivery date: 11 March 2024
Your order: AW-PO-55120 of 26 February 2024
Due date: 13 April 2024

Pos. Description                             Qty   Unit price     Amount
1    Hardened steel shaft, 25 mm x 400 mm     120    18.40 EUR   2,208.00 EUR
2    Bearing housing, cast aluminium           60    42.75 EUR   2,565.00 EUR
3    CNC machining setup (one-off)              1   350.00 EUR     350.00 EUR
4    Packaging and freight to Cham              1   185.00 EUR     185.00 EUR

Subtotal                                                         5,308.00 EUR
VAT 19 %                                                         1,008.52 EUR
Total due                                                        6,316.52 EUR

Payment terms: net 30 days; 2 % discount if paid within 10 days of the invoice date.
Please pay to Sparkasse Bremen, IBAN DE44 2905 0101 0012 3456 78, BIC SBREDE22XXX,
quoting the invoice number. Goods remain our property until paid in full.
Place of performance and jurisdiction: Bremen. Questions about this invoice:
accounts@nordlicht-praezision.de, +49 421 5567 230 (Ms. Hannah Albers).
Thank you for your order."""


LAB_REPORT = """LABORATORY REPORT
Report no.: LR-2024-5531   Sample ID: S-88412   Sample: serum
Collected: 2024-03-04   Reported: 2024-03-05
Laboratory: Hanse Clinical Lab, Bremen
Analyte        Result    Unit       Reference    Flag
Sodium         141       mmol/L     135-145
Potassium      5.9       mmol/L     3.5-5.1      H
Chloride       102       mmol/L     98-107
Creatinine     88        umol/L     62-106
Urea           9.8       mmol/L     2.5-7.8      H
Glucose        5.2       mmol/L     3.9-6.1
Haemoglobin    118       g/L        130-170      L
Leukocytes     7.4       10^9/L     4.0-10.0
Platelets      251       10^9/L     150-400
CRP            14.2      mg/L       0-5          H
ALT            31        U/L        0-45
TSH            2.1       mU/L       0.4-4.0
Signed: Dr. Jana Roth"""
CASES = {"invoice": (DOCUMENT, INVOICE, "invoice"), "table": ("lab-report-LR-2024-5531.pdf", LAB_REPORT, "lab_report")}


def extraction_request(max_tokens: int, case: str = "invoice") -> Any:
    """The request the app's Extractor sends for this one-page document (first attempt)."""
    from app.engine.events import GenerationRequest, Message
    from app.extraction.answers import bounded, describe
    from app.extraction.extractor import Part
    from app.extraction.json_schema import load_templates

    name, text, template_name = CASES[case]
    prompts = ROOT / "assets" / "prompts"
    schema = load_templates(ROOT / "assets" / "schemas")[template_name].schema
    system = (prompts / "extract_system.txt").read_text(encoding="utf-8").strip()
    template = (prompts / "extract_user.txt").read_text(encoding="utf-8")
    part = Part(((1, text),))
    prompt = template.format(name=name, first=1, last=1, fields=describe(schema), text=part.text)
    return GenerationRequest(
        messages=(Message("system", system), Message("user", prompt)),
        max_tokens=max_tokens,
        temperature=0.0,
        json_schema=json.dumps(bounded(schema)),
    )


class Timer:
    """Wall and thread-CPU seconds spent in wrapped calls, per name, since the last reset."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn: Callable[..., Any], when: Callable[[], bool] = lambda: True) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not when():
                return fn(*args, **kwargs)
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall
                self.cpu[name] = self.cpu.get(name, 0.0) + time.thread_time() - cpu
                self.calls[name] = self.calls.get(name, 0) + 1

        return timed

    def ms_per_call(self, name: str, table: dict[str, float] | None = None) -> float:
        return round(1000 * (table or self.wall).get(name, 0.0) / max(1, self.calls.get(name, 0)), 3)


def worker(spec: dict[str, Any]) -> int:
    """Load the engine, then answer one generation per 'run [N]' line, on the sides in spec['plan']."""
    sys.path.insert(0, str(ROOT))
    from dataclasses import replace

    from app.engine.lifecycle import die_with_parent
    from app.engine.llama import engine as llama_engine

    die_with_parent()
    engine = bench.engine_for(spec)
    info = engine.load()
    llm = engine._llm
    assert llm is not None
    timer = Timer()
    llama_engine.grammar_for = timer.wrap(
        "grammar", llama_engine.grammar_for
    )  # the engine reads each request's grammar
    llm.sample = timer.wrap("sample", llm.sample)  # type: ignore[method-assign]
    llm.eval = timer.wrap("forward", llm.eval, when=lambda: timer.calls.get("sample", 0) > 0)  # type: ignore[method-assign]
    request = extraction_request(spec["max_tokens"], spec.get("case", "invoice"))
    sides = {"json": request, "free": replace(request, json_schema=None)}
    print(
        bench.RESULT
        + json.dumps(
            {
                "loaded": True,
                "load_s": round(info.load_s, 2),
                "layers": {c.endpoint: len(c.layers) for c in info.cards},
                "prompt_chars": sum(len(m.content) for m in request.messages),
                "schema_chars": len(request.json_schema),
            }
        ),
        flush=True,
    )
    plan = iter(spec["plan"])
    for tokens in bench.runs(engine, spec["max_tokens"]):
        side = next(plan)
        timer.reset()
        result = generate(engine, replace(sides[side], max_tokens=tokens))
        result.update(
            side=side,
            grammar_ms=round(1000 * timer.wall.get("grammar", 0.0), 1),
            sample_ms_tok=timer.ms_per_call("sample"),
            forward_ms_tok=timer.ms_per_call("forward"),
            sample_cpu_ms_tok=timer.ms_per_call("sample", timer.cpu),
        )
        print(bench.RESULT + json.dumps(result), flush=True)
    engine.close()
    return 0


def generate(engine: Any, request: Any) -> dict[str, Any]:
    """One generation's stats, its text's CRC and head, and whether the text is a JSON object."""
    answer, stats = bench.generate(engine, request)
    try:
        is_json = isinstance(json.loads(answer), dict)
    except ValueError:
        is_json = False
    return {**stats, "text_crc": zlib.crc32(answer.encode()), "head": answer[:160], "is_json": is_json}


def main() -> int:
    args = parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    order = [side for rep in range(args.reps) for side in (SIDES if rep % 2 == 0 else SIDES[::-1])]
    spec = {
        "model": args.model,
        "n_ctx": args.n_ctx,
        "threads": args.threads,
        "max_tokens": args.max_tokens,
        "plan": [*SIDES, *order],
        "case": args.case,
    }
    procs: list[Any] = []
    w: bench.Worker | None = None
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C even when started with SIGINT ignored
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally block on SIGTERM too
    try:
        if not args.inproc:
            procs = bench.start_cards(args, {})
        cards = [] if args.inproc else [f"127.0.0.1:{port}" for port in args.ports]
        w = bench.Worker("extraction", {**spec, "cards": cards}, {}, args.quiet_wait, script=Path(__file__))
        print(
            f"model {Path(args.model).name}, layers per card {w.info['layers'] or 'none (in-process)'}, "
            f"load {w.info['load_s']} s; prompt {w.info['prompt_chars']} characters, schema "
            f"{w.info['schema_chars']} characters",
            flush=True,
        )
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        for side in SIDES:
            check(w.run(procs, 32), side)  # warm-up
        for i, side in enumerate(order):
            r = check(w.run(procs), side)
            runs[side].append(r)
            print(
                f"  rep {i // 2} {side:4}: {r['generated_tokens']:4} tokens ({r['finish_reason']:6})  decode "
                f"{r['decode_tps']:6.1f} tok/s  ttft {r['ttft_s']:.3f} s  prompt {r['prompt_tps']:6.1f} tok/s  "
                f"cpu ms/token: sample {r['sample_cpu_ms_tok']:5.2f} host {r['host_cpu_ms_tok']:5.1f} cards"
                f" {r['cards_cpu_ms_tok']:5.1f}  other {r['other_cpu_pct']:4.1f}%",
                flush=True,
            )
        report(runs, args, w.info)
    finally:
        if w is not None:
            w.stop()
        bench.stop_procs(procs)
    return 0


def check(result: dict[str, Any], side: str) -> dict[str, Any]:
    if result.get("side") != side:
        raise RuntimeError(f"the worker answered side {result.get('side')!r}, the bench expected {side!r}")
    return result


def report(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace, info: dict[str, Any]) -> None:
    med = {side: {m: statistics.median(r[m] for r in v) for m in METRICS} for side, v in runs.items()}
    ratios = [j["decode_tps"] / f["decode_tps"] for j, f in zip(runs["json"], runs["free"], strict=True)]
    j, f = med["json"], med["free"]
    where = "in-process (no cards)" if args.inproc else f"4 loopback cards ({args.card_threads} thread each)"
    print(
        f"\ncase {args.case}; medians of {args.reps} runs per side, alternating json free free json ...; prompt "
        f"{runs['json'][0]['prompt_tokens']} tokens; max_tokens {args.max_tokens}; {where}; "
        f"host threads {args.threads}"
    )
    print(
        f"{'':27}{'tokens':>7}{'decode tok/s':>13}{'TTFT s':>8}{'prompt tok/s':>13}"
        f"{'sample CPU ms/tok':>18}{'CPU ms/tok host + cards':>25}"
    )
    for side in SIDES:
        m = med[side]
        print(
            f"{LABELS[side]:27}{m['generated_tokens']:7.0f}{m['decode_tps']:13.1f}{m['ttft_s']:8.3f}"
            f"{m['prompt_tps']:13.1f}{m['sample_cpu_ms_tok']:18.2f}{m['host_cpu_ms_tok']:15.1f} + "
            f"{m['cards_cpu_ms_tok']:.1f}"
        )
    print(
        f"{'ratio json/free':27}{'':7}{j['decode_tps'] / f['decode_tps']:13.2f}{j['ttft_s'] / f['ttft_s']:8.2f}"
        f"{j['prompt_tps'] / f['prompt_tps']:13.2f}{'':18}{j['host_cpu_ms_tok'] / f['host_cpu_ms_tok']:15.2f}"
    )
    extra = j["sample_cpu_ms_tok"] - f["sample_cpu_ms_tok"]
    print(
        f"\ndecode json/free, median of the {args.reps} per-rep ratios: {statistics.median(ratios):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f})"
    )
    print(
        f"the grammar's own cost: llm.sample() uses {extra:+.2f} ms of CPU per token more with the schema, "
        f"{100 * extra * f['decode_tps'] / 1000:.0f} % of a free token's {1000 / f['decode_tps']:.1f} ms; the host "
        f"process uses {j['host_cpu_ms_tok'] - f['host_cpu_ms_tok']:+.1f} ms CPU per token more; building the "
        f"grammar takes {j['grammar_ms']:.0f} ms before the prompt is evaluated (part of json's TTFT)"
    )
    notes(runs, args)
    if args.json:
        record = {"args": vars(args), "info": info, "runs": runs, "medians": med}
        Path(args.json).write_text(json.dumps(record, indent=1))


def notes(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    tokens = {side: sorted({r["generated_tokens"] for r in v}) for side, v in runs.items()}
    if tokens["json"] != tokens["free"]:
        print(
            f"token counts differ (json {tokens['json']}, free {tokens['free']}): an answer stopped before "
            f"max_tokens {args.max_tokens} (a constrained one when its JSON is complete), so compare per-token "
            "rates (decode tok/s, ms/token), not totals"
        )
    else:
        print(f"both sides generated {tokens['json']} tokens per run: totals compare as well as rates")
    valid = sum(r["is_json"] for r in runs["json"])
    noisy = sum(r["other_cpu_pct"] > 15 for v in runs.values() for r in v)
    print(
        f"constrained answers that parse as a JSON object: {valid} of {args.reps}; {noisy} of {2 * args.reps} runs "
        "had other processes above 15 % of the machine's CPU"
    )
    for side in SIDES:
        texts = {r["text_crc"] for r in runs[side]}
        print(f"{side} answer ({len(texts)} distinct text(s)): {runs[side][0]['head']!r}")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--model", default=None, help="GGUF file (default: the demo model, app.settings.DEMO_MODEL)")
    for flag, default, text in (
        ("--reps", 5, "measured runs per side (after one warm-up each)"),
        ("--max-tokens", 128, "max_tokens of both sides (a constrained answer may stop earlier)"),
        ("--n-ctx", 4096, "context size"),
        ("--threads", 2, "n_threads of the host process"),
        ("--card-threads", 1, "threads per card agent"),
    ):
        p.add_argument(flag, type=int, default=default, help=text)
    p.add_argument("--inproc", action="store_true", help="no cards: every layer in the worker process")
    p.add_argument(
        "--case",
        choices=sorted(CASES),
        default="invoice",
        help="invoice: flat fields of a one-page invoice; table: a lab report's table of twelve results",
    )
    p.add_argument("--ports", type=int, nargs=4, default=[30540, 30541, 30542, 30543], help="the cards' RPC ports")
    p.add_argument("--health-ports", type=int, nargs=4, default=None, help="default: RPC ports + 1000")
    p.add_argument("--cache-dir", default="/tmp/quartet-bench-extraction/rpc-cache", help="the cards' tensor cache")
    p.add_argument("--quiet-wait", type=float, default=10.0, help="max s to wait for a quiet machine before a run")
    p.add_argument("--json", help="also write every run's numbers to this file")
    args = p.parse_args()
    if args.model is None and not args.worker:
        sys.path.insert(0, str(ROOT))
        from app.settings import DEMO_MODEL

        args.model = str(DEMO_MODEL)
    args.health_ports = args.health_ports or [port + 1000 for port in args.ports]
    return args


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # card agents and the worker were stopped by main's finally
        sys.exit(130)
