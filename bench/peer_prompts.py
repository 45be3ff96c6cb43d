"""What bench/peer.py asks both engines: one ask per row and round, the same for Quartet and llama-server.

Texts come from this repository (its docs and engine source), cut to a token budget by characters, so the
prompt sizes are approximate (peer.py prints each side's count of prompt tokens). Every long prompt of a round
starts with a tag of its own (`[r2 fresh]`), so that neither engine finds it in a cache from an earlier round:
both reuse KV by common prefix only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHARS_PER_TOKEN = 3.6  # English markdown in Gemma 3's tokenizer, about (peer.py prints the real counts)
DECODE = (
    "Write a detailed, step-by-step guide to baking sourdough bread at home, from feeding the "
    "starter to cooling the loaf. Use numbered steps."
)
STREAMS = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a bicycle's gears work, for a ten-year-old.",
    "List ten things to pack for a week of hiking in the mountains, with a reason for each.",
    "Describe the water cycle in five paragraphs.",
)
FIELDS = {
    "supplier": "Nordlicht Maschinenbau GmbH",
    "invoice_number": "NM-2024-08817",
    "invoice_date": "14 March 2024",
    "customer": "Quartet Appliances Ltd",
    "total_amount": "EUR 18,442.50",
    "iban": "DE89 3704 0044 0532 0130 00",
    "due_date": "13 April 2024",
}


def ask(messages: list[dict[str, str]], max_tokens: int, json_schema: str | None = None) -> dict[str, Any]:
    return {"messages": messages, "max_tokens": max_tokens, "json_schema": json_schema}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def text(*paths: str, tokens: int) -> str:
    """About `tokens` tokens of the named files of this repository, in order."""
    joined = "\n\n".join((ROOT / path).read_text(encoding="utf-8") for path in paths)
    return joined[: int(tokens * CHARS_PER_TOKEN)]


def decode(tokens: int) -> dict[str, Any]:
    return ask([user(DECODE)], tokens)


def fresh(tag: str) -> dict[str, Any]:
    """A question over ~2,000 tokens of a document nobody asked about before."""
    doc = text("docs/design.md", tokens=2000)
    return ask([user(f"[{tag}] Here is a design document.\n\n{doc}\n\nWhat is this document about?")], 16)


def returning(first: dict[str, Any], answer: str) -> dict[str, Any]:
    """The same conversation's next turn: the first question, the side's own answer to it, a new question."""
    follow = "Thank you. Which part of it talks about the cards?"
    return ask([*first["messages"], {"role": "assistant", "content": answer}, user(follow)], 16)


def streams(tokens: int) -> list[dict[str, Any]]:
    return [ask([user(prompt)], tokens) for prompt in STREAMS]


def agent(tag: str, last: str) -> dict[str, Any]:
    """A coding agent's ~6,000-token prompt (instructions, files, its own last reply) with `last` at its end."""
    files = text(
        "app/engine/llama/batcher.py",
        "app/engine/llama/slots.py",
        "app/engine/llama/drafts.py",
        "app/engine/llama/kv_host.py",
        "app/engine/llama/engine.py",
        tokens=5800,
    )
    task = f"[{tag}] You are a coding agent. These are the files of the project you work on:\n\n{files}"
    reply = "I have read the files. What should I change?"
    return ask([user(task), {"role": "assistant", "content": reply}, user(last)], 8)


def rag(tag: str) -> dict[str, Any]:
    """A grounded answer that quotes its passage."""
    passage = text("README.md", tokens=450)
    question = (
        f"[{tag}] Answer from this passage only, quoting it word for word.\n\nPassage:\n{passage}\n\n"
        "Question: What does the passage say? Quote it exactly, from its first sentence on."
    )
    return ask([user(question)], 128)


def extraction(tag: str) -> dict[str, Any]:
    """JSON fields whose values stand in a ~1,600-token document, constrained by a JSON schema."""
    filler = text("docs/using.md", tokens=1560)
    head = "\n".join(f"{name.replace('_', ' ').title()}: {value}" for name, value in FIELDS.items())
    doc = f"INVOICE\n{head}\n\nTerms and notes:\n{filler}\n\nPayable to {FIELDS['iban']} by {FIELDS['due_date']}."
    schema = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in FIELDS},
        "required": list(FIELDS),
        "additionalProperties": False,
    }
    question = f"[{tag}] Extract these fields from the document as JSON: {', '.join(FIELDS)}.\n\n{doc}"
    return ask([user(question)], 160, json.dumps(schema))
