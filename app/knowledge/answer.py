"""Questions over the documents: retrieve, ask the model with numbered sources, stream a cited answer.

A source is only offered to the model when it is really about the question (cosine similarity, or
a full-text match for Chinese, which the English embedder reads poorly); with none, the answer says
so instead of inventing one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.engine.events import Done, EngineError, Failed, GenerationRequest, Message, Queued, Reading, Token
from app.engine.follow import follow
from app.engine.service import EngineService
from app.errors import Kind, Refused
from app.knowledge.script import has_cjk
from app.knowledge.search import Hit
from app.knowledge.service import KnowledgeService

NOTHING_FOUND = "I found nothing about this in the documents, so I cannot answer it from them."
_CITATION = re.compile(r"\[(\d+)\]")
_SLACK_TOKENS = 16  # counted piece by piece, a prompt may differ from its whole by a token at each join


def never_cancelled() -> bool:
    return False


@dataclass(frozen=True)
class Source:
    number: int
    document_id: int
    name: str
    page: int
    start: int
    end: int
    text: str
    score: float
    ocr: float | None = None  # the passage was read by OCR, with this confidence (0–1)


@dataclass(frozen=True)
class Answer:
    text: str
    sources: list[Source] = field(default_factory=list)
    waiting: int = 0  # position in the engine's queue while someone is ahead, else 0
    progress: str = ""
    reading: bool = False  # the answer has its slot: the model reads the prompt (no word yet)
    done: bool = False
    error: str | None = None
    kind: Kind | None = None  # the failure's kind (app/errors.py): branch on it, not on `error`
    cut: bool = False  # the answer reached its token limit: it ends there, perhaps mid-sentence
    footer: str = ""  # what a whole-document answer rests on (its document and the pages it cites)

    def cited(self) -> list[Source]:
        """The sources the answer actually cites, in order of first citation."""
        numbers = dict.fromkeys(int(n) for n in _CITATION.findall(self.text))
        return [s for n in numbers for s in self.sources if s.number == n]


class Answerer:
    def __init__(
        self,
        knowledge: KnowledgeService,
        engine: EngineService,
        prompts: Path,
        *,
        k: int,
        max_tokens: int,
        min_similarity: float = 0.3,
        temperature: float = 0.2,
    ) -> None:
        self.knowledge, self.engine = knowledge, engine
        self.system = (prompts / "qa_system.txt").read_text(encoding="utf-8").strip()
        self.template = (prompts / "qa_user.txt").read_text(encoding="utf-8")
        self.k, self.min_similarity, self.max_tokens = k, min_similarity, max_tokens
        self.temperature = temperature

    def sources(self, question: str, *, document_ids: Sequence[int] | None = None) -> list[Source]:
        hits = self.knowledge.search(question, k=self.k, document_ids=document_ids)
        return numbered(self._relevant(question, hits))

    def _relevant(self, question: str, hits: list[Hit]) -> list[Hit]:
        if not hits:
            return []
        vectors = self.knowledge.embedder.embed([question, *(h.text for h in hits)])
        similarity = np.asarray(vectors[1:] @ vectors[0])
        chinese = has_cjk(question)
        return [
            h
            for h, s in zip(hits, similarity, strict=True)
            if s >= self.min_similarity or (chinese and h.text_rank is not None)
        ]

    def ask(
        self,
        question: str,
        *,
        document_ids: Sequence[int] | None = None,
        cancelled: Callable[[], bool] = never_cancelled,
    ) -> Iterator[Answer]:
        """`cancelled()` (looked at while the answer waits and while it streams) says the asker pressed Stop:
        the answer then ends as the engine's Done, with the text so far."""
        if not question.strip():
            raise Refused("the question is empty")
        sources = self.sources(question, document_ids=document_ids)
        if not sources:
            yield Answer(NOTHING_FOUND, [], done=True)
            return
        entries = _entries(sources)  # one per number: the passages of one page go together
        try:
            listed = self._fitting(entries, question)
        except EngineError as err:
            yield Answer("", sources, done=True, error=str(err), kind=err.kind)
            return
        given = [s for s in sources if s.number <= listed]
        yield from stream(self.engine, self._request(entries[:listed], question), given, cancelled=cancelled)

    def _request(self, entries: list[str], question: str) -> GenerationRequest:
        prompt = self.template.format(sources="\n\n".join(entries), question=question.strip())
        return GenerationRequest(
            messages=(Message("system", self.system), Message("user", prompt)),
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )

    def _fitting(self, entries: list[str], question: str) -> int:
        """How many sources (the best first) fit the context beside the question and the answer's tokens,
        counted exactly by the engine's tokenizer; the best one always goes."""
        room = self.engine.loaded()[1] - self.max_tokens - self.engine.count_tokens(self._request([], question))
        used, listed = _SLACK_TOKENS, 0
        for tokens in self.engine.count_text(entries):
            if listed and used + tokens > room:
                break
            used += tokens + 1  # the blank line between two sources
            listed += 1
        return listed


def numbered(hits: list[Hit]) -> list[Source]:
    """The passages found as sources, numbered by distinct source (a document's page): three passages of one
    page are one source, [1], not [1] [2] [3] pointing at the same page."""
    numbers: dict[tuple[int, int], int] = {}
    for h in hits:
        numbers.setdefault((h.document_id, h.page), len(numbers) + 1)
    return [
        Source(
            numbers[h.document_id, h.page],
            h.document_id,
            h.name,
            h.page,
            h.start,
            h.end,
            h.text,
            round(h.score, 4),
            h.ocr,
        )
        for h in hits
    ]


def _entries(sources: list[Source]) -> list[str]:
    """The sources as the prompt lists them, one entry per number (in number order)."""
    texts: dict[int, list[str]] = {}
    heads: dict[int, str] = {}
    for s in sources:
        heads.setdefault(s.number, f"[{s.number}] {s.name}, page {s.page}:")
        texts.setdefault(s.number, []).append(s.text.strip())
    return [f"{heads[n]}\n" + "\n…\n".join(texts[n]) for n in sorted(heads)]


def stream(
    engine: EngineService,
    request: GenerationRequest,
    sources: list[Source],
    *,
    progress: str = "",
    cancelled: Callable[[], bool] = never_cancelled,
) -> Iterator[Answer]:
    """Follow one generation to its end as Answer updates; an engine failure ends it with the reason, a
    Stop (`cancelled()`) with the text so far."""
    try:
        ticket = engine.submit(request)
    except EngineError as err:
        yield Answer("", sources, done=True, error=str(err), kind=err.kind)
        return
    text = ""
    for event in follow(ticket, cancelled=cancelled):
        if isinstance(event, Queued):
            yield Answer(text, sources, waiting=event.position, progress=progress)
        elif isinstance(event, Reading):
            yield Answer(text, sources, progress=progress, reading=True)
        elif isinstance(event, Token):
            text += event.text
            yield Answer(text, sources, progress=progress)
        elif isinstance(event, Done):
            yield Answer(text, sources, progress=progress, done=True, cut=event.stats.finish_reason == "length")
        elif isinstance(event, Failed):
            yield Answer(text, sources, progress=progress, done=True, error=event.message, kind=event.kind)
