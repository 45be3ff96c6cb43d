"""The rows of bench/peer.py (issue 48's table): what each asks the sides and which number it compares.

A side is something with `run(asks) -> answers` (peer.py: Quartet's worker, llama-server plain, llama-server with
`--spec-type ngram-simple`); an answer is peer_server.measured's dict. Each row measures the sides it names in the
round's order and returns every side's value; `higher` says which way is better (ratios are always oriented so
that above 1.0 means Quartet better: Quartet ÷ peer for speeds, peer ÷ Quartet for times and memory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import peer_prompts as ask


class Side(Protocol):
    name: str

    def run(self, asks: list[dict[str, Any]]) -> list[dict[str, Any]]: ...


Q, PEER, SPEC = "quartet", "llama-server", "llama-server ngram-simple"


@dataclass
class Round:
    """One round of the bench: its number, its sides in this round's order, and answers already measured in it
    (a row that needs another's answer, as the returning conversation needs the first turn, reuses it)."""

    number: int
    sides: dict[str, Side]
    order: list[str]
    seen: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    last: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # each side's answers its last row read

    def answers(self, key: str, side: str, make: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        if (key, side) not in self.seen:
            self.seen[key, side] = self.sides[side].run(make())
        self.last[side] = self.seen[key, side]
        return self.seen[key, side]

    def tag(self, row: str) -> str:
        return f"r{self.number} {row}"


Measure = Callable[[Round, str], tuple[float, str]]  # (round, side) -> (value, a note on it)


@dataclass(frozen=True)
class Row:
    name: str
    label: str
    unit: str
    higher: bool  # a higher value is better (speeds), else lower (times, memory)
    peers: tuple[str, ...]  # the peer sides measured; the ratio is against the best of them
    measure: Measure


def one_stream(r: Round, side: str) -> tuple[float, str]:
    a = r.answers("decode", side, lambda: [ask.decode(128)])[0]
    return a["decode_tps"], _note(a)


def fresh(r: Round, side: str) -> tuple[float, str]:
    a = r.answers("fresh", side, lambda: [ask.fresh(r.tag("fresh"))])[0]
    return a["ttft_s"], f"{a['prompt_tokens']} prompt tokens"


def returning(r: Round, side: str) -> tuple[float, str]:
    first = r.answers("fresh", side, lambda: [ask.fresh(r.tag("fresh"))])[0]
    turn = ask.returning(ask.fresh(r.tag("fresh")), first["text"])
    again = r.answers("returning", side, lambda: [turn])[0]
    return again["ttft_s"] / first["ttft_s"], f"TTFT {again['ttft_s']:.2f} s after {first['ttft_s']:.2f} s"


def streams(r: Round, side: str) -> tuple[float, str]:
    answers = r.answers("streams", side, lambda: ask.streams(64))
    tokens = sum(a["generated"] for a in answers)
    wall = max(a["end"] for a in answers) - min(a["t0"] for a in answers)
    return tokens / wall, f"{tokens} tokens in {wall:.1f} s"


def agent(r: Round, side: str) -> tuple[float, str]:
    tag = r.tag("agent")
    first = r.answers("agent", side, lambda: [ask.agent(tag, "Add a docstring to Batcher.step.")])[0]
    again = r.answers("agent again", side, lambda: [ask.agent(tag, "Now rename Slot to Seat everywhere.")])[0]
    return again["ttft_s"], f"{again['prompt_tokens']} prompt tokens, first send {first['ttft_s']:.1f} s"


def rag(r: Round, side: str) -> tuple[float, str]:
    a = r.answers("rag", side, lambda: [ask.rag(r.tag("rag"))])[0]
    return a["decode_tps"], _note(a)


def extraction(r: Round, side: str) -> tuple[float, str]:
    a = r.answers("json", side, lambda: [ask.extraction(r.tag("json"))])[0]
    return a["decode_tps"], f"{a['prompt_tokens']} prompt tokens, " + _note(a)


def _note(a: dict[str, Any]) -> str:
    """Tokens, the engine's own decode speed and its drafts: kept of drafted, and tokens per step (a step gives
    one token plus the drafted ones it keeps)."""
    steps = max(1, a["generated"] - a.get("accepted", 0))
    drafts = f", {a['accepted']} of {a['drafted']} drafted kept" if a.get("drafted") else ""
    per_step = f", {a['generated'] / steps:.2f} tokens a step" if a.get("drafted") else ""
    return f"{a['generated']} tokens, engine's own {a['engine_tps']:.1f} tok/s{drafts}{per_step}"


ROWS = (
    Row("decode", "one stream, decode tok/s", "tok/s", True, (PEER,), one_stream),
    Row("fresh", "first token of a fresh ~2,000-token prompt", "s", False, (PEER,), fresh),
    Row("returning", "returning conversation, TTFT ÷ first turn", "×", False, (PEER,), returning),
    Row("streams", "4 streams, aggregate tok/s", "tok/s", True, (PEER,), streams),
    Row("agent", "an agent re-sending a ~6k-token prompt with a new last message, TTFT", "s", False, (PEER,), agent),
    Row("rag", "a RAG answer quoting its passage, decode tok/s", "tok/s", True, (PEER, SPEC), rag),
    Row("json", "a JSON extraction of fields in a 1.6k-token document, tok/s", "tok/s", True, (PEER, SPEC), extraction),
    Row("ngram", "plain decode, peer with ngram-simple, tok/s", "tok/s", True, (SPEC,), one_stream),
)
NAMES = (*(row.name for row in ROWS), "memory")
