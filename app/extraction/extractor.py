"""Schema-constrained extraction from one document.

The document's pages are cut into parts that fit the model's context; each part gets one
grammar-constrained answer (a hard token cap and a timeout stop a runaway), validated with
`jsonschema` and retried once with the validation error. The parts' answers are merged, and every
value's page and snippet come from searching the page text — the model never gets the last word.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.engine.events import Done, EngineError, Failed, GenerationRequest, Message, Queued, Reading, Token
from app.engine.follow import follow
from app.engine.service import EngineService
from app.errors import Kind, QuartetError
from app.extraction.answers import bounded, check, clean, cut
from app.extraction.answers import describe as _describe
from app.extraction.merge import FieldValue, PartResult, mark_unsure, merge, record_of, within_max_items
from app.knowledge.service import KnowledgeService

__all__ = ["Extraction", "ExtractionFailed", "Extractor", "Limits", "Part", "Step", "bounded"]
_SLACK_TOKENS = 32  # counted piece by piece, a prompt may differ from its whole by a token at each join (a part
# that overflows after all is read as two halves)

UNSURE_OCR = 0.8  # a value found only on pages read by OCR with less confidence than this is marked unsure


@dataclass(frozen=True)
class Step:
    """Progress of one extraction, for people."""

    text: str
    waiting: int = 0  # position in the engine's queue while someone is ahead, else 0
    reading: bool = False  # the answer has its slot: the model reads the part


@dataclass
class Extraction:
    document_id: int
    name: str
    fields: dict[str, FieldValue]
    record: dict[str, Any]
    parts: int
    problems: list[str] = field(default_factory=list)  # parts that gave no valid answer, and why
    constrained: bool = True  # the engine held every answer to the schema (else: asked, checked, repaired once)


@dataclass(frozen=True)
class Limits:
    """Per answer: a hard token cap and a timeout (waiting in the queue does not count)."""

    max_tokens: int
    timeout_s: float

    def within(self, other: Limits | None) -> Limits:
        """These limits, lowered by `other` where it asks for less (a caller can never raise them)."""
        if other is None:
            return self
        return Limits(min(self.max_tokens, max(1, other.max_tokens)), min(self.timeout_s, max(0.1, other.timeout_s)))


class ExtractionFailed(QuartetError):
    """No part of the document gave a valid answer (or the document cannot be read); `kind` says which."""

    def __init__(self, message: str, *, kind: Kind = "request") -> None:
        super().__init__(message, kind=kind)


@dataclass(frozen=True)
class Part:
    pieces: tuple[tuple[int, str], ...]  # (page number, text of that page or of a piece of it)

    @property
    def pages(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(n for n, _ in self.pieces))

    @property
    def text(self) -> str:
        return "\n".join(f"[p. {n}] {text}" for n, text in self.pieces)

    def split(self) -> list[Part]:
        """Two halves by page (a part that overflowed the context after all)."""
        pages = self.pages
        first = set(pages[: len(pages) // 2])
        return [Part(tuple(p for p in self.pieces if (p[0] in first) == side)) for side in (True, False)]


class Extractor:
    def __init__(
        self,
        knowledge: KnowledgeService,
        engine: EngineService,
        prompts: Path,
        *,
        max_tokens: int,
        timeout_s: float,
    ) -> None:
        self.knowledge, self.engine = knowledge, engine
        self.system = (prompts / "extract_system.txt").read_text(encoding="utf-8").strip()
        self.template = (prompts / "extract_user.txt").read_text(encoding="utf-8")
        self.limits = Limits(max_tokens, timeout_s)

    def pages(self, document_id: int) -> tuple[str, dict[int, str]]:
        doc = self.knowledge.document(document_id)
        if doc is None:
            raise ExtractionFailed(f"there is no document {document_id}", kind="not_found")
        if doc.status != "ok":
            raise ExtractionFailed(f"{doc.name} is not indexed ({doc.status}{': ' + doc.error if doc.error else ''})")
        texts = {n: self.knowledge.page_text(document_id, n) or "" for n in range(1, doc.pages_total + 1)}
        return doc.name, {n: t for n, t in texts.items() if t.strip()}

    def parts(self, pages: dict[int, str], schema: dict[str, Any], *, name: str = "") -> list[Part]:
        """Consecutive pages grouped to fit the context, counted by the engine's tokenizer; a page longer
        than that is cut into pieces."""
        budget = self._budget(schema, name)
        pieces = self._pieces(sorted(pages.items()), budget)
        counts = self.engine.count_text([Part((piece,)).text for piece in pieces])
        parts: list[Part] = []
        current: list[tuple[int, str]] = []
        size = 0
        for piece, tokens in zip(pieces, counts, strict=True):
            if current and size + tokens + 1 > budget:
                parts.append(Part(tuple(current)))
                current, size = [], 0
            current.append(piece)
            size += tokens + 1
        return [*parts, Part(tuple(current))] if current else parts

    def _budget(self, schema: dict[str, Any], name: str) -> int:
        """The tokens a part's text may take: the context less the prompt around it and the answer."""
        prompt = self.template.format(name=name, first=0, last=0, fields=_describe(schema), text="")
        around = self.engine.count_tokens(GenerationRequest((Message("system", self.system), Message("user", prompt))))
        return max(64, self.engine.loaded()[1] - self.limits.max_tokens - around - _SLACK_TOKENS)

    def _pieces(self, pages: list[tuple[int, str]], budget: int) -> list[tuple[int, str]]:
        """Each page whole, or cut into equal pieces of at most about `budget` tokens when it is longer."""
        counts = self.engine.count_text([Part((page,)).text for page in pages])
        pieces: list[tuple[int, str]] = []
        for (n, text), tokens in zip(pages, counts, strict=True):
            size = math.ceil(len(text) / math.ceil(tokens * 1.1 / budget)) if tokens > budget else len(text)
            pieces += [(n, text[i : i + size]) for i in range(0, len(text), max(1, size))]
        return pieces

    def run(
        self,
        document_id: int,
        schema: dict[str, Any],
        *,
        cancelled: Callable[[], bool] = lambda: False,
        limits: Limits | None = None,
    ) -> Generator[Step, None, Extraction]:
        """Extract `schema`'s fields from the document; raises ExtractionFailed when nothing valid came back."""
        limits = self.limits.within(limits)
        name, pages = self.pages(document_id)
        if not pages:
            raise ExtractionFailed(f"{name} has no text to extract from", kind="no_text")
        try:
            parts = self.parts(pages, schema, name=name)
        except EngineError as err:
            raise ExtractionFailed(f"{name} could not be cut into parts: {err}", kind=err.kind) from err
        results: list[PartResult] = []
        constrained = self._constrained()
        problems: list[str] = []
        queue = list(parts)
        done = 0
        while queue:
            part = queue.pop(0)
            label = f"{name}: part {done + 1} of {done + 1 + len(queue)} (pages {part.pages[0]}–{part.pages[-1]})"
            # the grammar: the only part is the whole document, where a table's minItems holds
            grammar = bounded(schema, whole=done == 0 and not queue) if constrained else None
            record, problem, note = yield from self._part(name, part, schema, grammar, label, cancelled, limits)
            if problem == "cancelled":
                raise ExtractionFailed("stopped before the end", kind="cancelled")
            if problem == "context" and len(part.pages) > 1:  # the estimate was short: read it as two halves
                queue[:0] = part.split()
                continue
            done += 1
            if note:
                problems.append(f"pages {part.pages[0]}–{part.pages[-1]}: {note}")
            if record is not None:
                results.append(PartResult(part.pages, record))
            else:
                problems.append(f"pages {part.pages[0]}–{part.pages[-1]}: {problem}")
        if not results:
            raise ExtractionFailed(
                "no part gave a valid answer: " + "; ".join(problems + [UNCONSTRAINED][constrained:])
            )
        unsure = {n for n, c in self.knowledge.ocr_pages(document_id).items() if c < UNSURE_OCR}
        fields, trimmed = within_max_items(mark_unsure(merge(results, schema, pages), pages, unsure), schema)
        problems += trimmed + [UNCONSTRAINED][constrained:]
        return Extraction(document_id, name, fields, record_of(fields), len(parts), problems, constrained)

    def _constrained(self) -> bool:
        """Whether the loaded engine holds an answer to a JSON Schema (an upstream may not)."""
        model = self.engine.status().model
        return model is None or model.can("json_schema")

    def _part(
        self,
        name: str,
        part: Part,
        schema: dict[str, Any],
        grammar: dict[str, Any] | None,
        label: str,
        cancelled: Callable[[], bool],
        limits: Limits,
    ) -> Generator[Step, None, tuple[dict[str, Any] | None, str | None, str | None]]:
        """(record, None, note) or (None, why, None); one retry with the validation error. An answer cut
        off by the token cap is closed at its last whole row or field when that still validates: the
        note says what was cut."""
        prompt = self.template.format(
            name=name, first=part.pages[0], last=part.pages[-1], fields=_describe(schema), text=part.text
        )
        messages: tuple[Message, ...] = (Message("system", self.system), Message("user", prompt))
        problem = ""
        for attempt in (1, 2):
            step = label if attempt == 1 else label + ", retry"
            text, failure = yield from self._generate(messages, grammar, step, cancelled, limits)
            if failure in ("context", "cancelled"):
                return None, failure, None
            if failure == "timeout":
                return None, f"stopped after {limits.timeout_s:g} s without finishing", None
            if failure is not None and failure != "length":
                problem = failure  # the engine failed (a card went away): the same question once more
                continue
            if failure == "length":
                problem = f"the answer reached the cap of {limits.max_tokens} tokens before its JSON was complete"
                closed = cut(text)
                if closed is not None and check(record := clean(closed.record), schema) is None:
                    note = f"the answer reached the cap of {limits.max_tokens} tokens: {closed.note}"
                    return record, None, note
            else:
                try:
                    record = clean(json.loads(text if grammar is not None else _braced(text)))
                    if (invalid := check(record, schema)) is None:
                        return record, None, None
                    problem = invalid
                except json.JSONDecodeError as err:
                    problem = f"the answer is not complete JSON ({err.msg} at character {err.pos})"
            messages = (
                *messages,
                Message("assistant", text),
                Message("user", f"That answer is invalid: {problem}. Answer again with valid, shorter JSON."),
            )
        return None, problem, None

    def _generate(
        self,
        messages: tuple[Message, ...],
        grammar: dict[str, Any] | None,
        label: str,
        cancelled: Callable[[], bool],
        limits: Limits,
    ) -> Generator[Step, None, tuple[str, str | None]]:
        """(text, None) or (partial text, reason); a generation past the timeout is cancelled. `grammar` None:
        the engine cannot hold an answer to a schema (the prompt describes the fields; the caller checks)."""
        request = GenerationRequest(
            messages=messages,
            max_tokens=limits.max_tokens,
            temperature=0.0,
            json_schema=json.dumps(grammar) if grammar is not None else None,
            background=True,  # people's answers go first
        )
        try:
            ticket = self.engine.submit(request)
        except EngineError as err:
            return "", str(err)
        text = ""
        yield Step(label)
        for event in follow(ticket, timeout=limits.timeout_s, cancelled=cancelled):  # waiting in line does not count
            if isinstance(event, Queued):
                yield Step(label, waiting=event.position)
            elif isinstance(event, Reading):
                yield Step(f"reading {label}", reading=True)
            elif isinstance(event, Token):
                text += event.text
            elif isinstance(event, Done):
                reason = event.stats.finish_reason
                return text, reason if reason in ("length", "cancelled") else None
            elif isinstance(event, Failed):
                return text, event.kind if event.kind in ("context", "timeout") else event.message
        return text, "the answer ended without a word from the engine"


UNCONSTRAINED = (
    "unconstrained: the engine cannot hold an answer to a schema, so each answer was asked for the schema's "
    "fields, checked against the schema and repaired once"
)


def _braced(text: str) -> str:
    """The JSON object in a free answer (a model not held to a schema may wrap it in words or a code fence)."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text
