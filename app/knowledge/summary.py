"""Whole-document mode: summarise a document, or ask about all of it, by map-reduce over its chunks.

Map: consecutive chunks are grouped to fit the model's context and each group gives short notes with
their pages. Reduce: the notes, merged in rounds while they do not fit, give the final answer, which
streams. Progress says which part is being read. Parts are sized by the engine's exact token counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from dataclasses import replace
from pathlib import Path

from app.engine.events import EngineError, GenerationRequest, Message
from app.engine.service import EngineService
from app.errors import NotFound, Refused
from app.knowledge.answer import Answer, never_cancelled, stream
from app.knowledge.service import KnowledgeService
from app.knowledge.store import DocumentInfo, StoredChunk

SUMMARY_TASK = "Summarise the main points."
BLANK_ANSWER = "The model wrote an empty answer twice after reading the document; ask again or ask a narrower question."
_SLACK_TOKENS = 32  # counted piece by piece, a prompt may differ from its whole by a token at each join; a
# part that still overflows the context (the engine says kind "context") is split in two and read again


class Summariser:
    def __init__(
        self,
        knowledge: KnowledgeService,
        engine: EngineService,
        prompts: Path,
        *,
        notes_tokens: int = 160,
        answer_tokens: int = 400,
        temperature: float = 0.2,
    ) -> None:
        self.knowledge, self.engine = knowledge, engine
        self.map_prompt = (prompts / "summary_map.txt").read_text(encoding="utf-8")
        self.reduce_prompt = (prompts / "summary_reduce.txt").read_text(encoding="utf-8")
        self.notes_tokens, self.answer_tokens, self.temperature = notes_tokens, answer_tokens, temperature

    def budget_tokens(self, template: str, **fields: str) -> int:
        """The tokens left for the text in `template` (filled with `fields`), the answer's tokens kept free."""
        skeleton = GenerationRequest(messages=(Message("user", template.format(**fields)),))
        room = self.engine.loaded()[1] - max(self.notes_tokens, self.answer_tokens) - _SLACK_TOKENS
        return max(64, room - self.engine.count_tokens(skeleton))

    def groups(self, chunks: list[StoredChunk], *, name: str = "", task: str = SUMMARY_TASK) -> list[list[StoredChunk]]:
        """Consecutive chunks, as many to a group as fit the context (counted by the engine's tokenizer)."""
        budget = self.budget_tokens(self.map_prompt, first="0", last="0", name=name, text="", task=task)
        counts = self.engine.count_text([_line(c) for c in chunks])
        return [[chunks[i] for i in group] for group in _packed(counts, budget)]

    def run(
        self, document_id: int, *, question: str | None = None, cancelled: Callable[[], bool] = never_cancelled
    ) -> Generator[Answer, None, None]:
        """`cancelled()` says the reader pressed Stop: the part being read stops, no later part is read, and
        the run ends (done, progress "stopped")."""
        doc = self.knowledge.document(document_id)
        if doc is None or doc.status != "ok":
            if doc is None:
                raise NotFound(f"no document {document_id} in the knowledge base")
            raise Refused(f"document {document_id} is not indexed ({doc.status})")
        for update in self._run(doc, question, cancelled):
            yield grounded(update, doc.name, doc.pages_total)

    def _run(
        self, doc: DocumentInfo, question: str | None, cancelled: Callable[[], bool]
    ) -> Generator[Answer, None, None]:
        document_id = doc.id
        task = f"Answer this question: {question.strip()}" if question and question.strip() else SUMMARY_TASK
        try:
            groups = self.groups(self.knowledge.document_chunks(document_id), name=doc.name, task=task)
        except EngineError as err:
            yield Answer("", done=True, error=str(err), kind=err.kind)
            return
        notes: list[str] = []
        for i, group in enumerate(groups, start=1):
            part = f"part {i} of {len(groups)}"
            error = yield from self._map(doc.name, group, task, part, notes, cancelled)
            if cancelled():
                yield Answer("", done=True, progress="stopped")
                return
            if error:
                yield Answer("", done=True, error=error)
                return
        notes = notes or ["(no part of the document had anything for this)"]
        yield from self._reduce(doc.name, notes, task, cancelled)

    def _map(
        self, name: str, group: list[StoredChunk], task: str, part: str, notes: list[str], cancelled: Callable[[], bool]
    ) -> Generator[Answer, None, str | None]:
        """Notes on one group of chunks into `notes`; a group too long for the context is halved."""
        first, last = group[0].page, group[-1].page
        text = "\n".join(_line(c) for c in group)
        prompt = self.map_prompt.format(first=first, last=last, name=name, text=text, task=task)
        final = yield from self._quietly(prompt, self.notes_tokens, f"reading {part} (pages {first}–{last})", cancelled)
        if final.kind == "context" and len(group) > 1 and not cancelled():
            half = len(group) // 2
            for piece in (group[:half], group[half:]):
                error = yield from self._map(name, piece, task, part, notes, cancelled)
                if error:
                    return error
            return None
        if final.error:
            return final.error
        if final.text.strip() and "NOTHING" not in final.text[:20]:
            notes.append(final.text.strip())
        return None

    def _quietly(
        self, prompt: str, max_tokens: int, progress: str, cancelled: Callable[[], bool]
    ) -> Generator[Answer, None, Answer]:
        """Generate without streaming the text (only progress); returns the final Answer."""
        request = GenerationRequest(  # one part of many: background work, people's answers go first
            messages=(Message("user", prompt),), max_tokens=max_tokens, temperature=self.temperature, background=True
        )
        final = Answer("", done=True, error="no answer")
        for update in stream(self.engine, request, [], progress=progress, cancelled=cancelled):
            if update.done:
                final = update
            else:
                yield Answer("", progress=progress, waiting=update.waiting, reading=update.reading)
        return final

    def _reduce(
        self, name: str, notes: list[str], task: str, cancelled: Callable[[], bool]
    ) -> Generator[Answer, None, None]:
        try:
            budget = self.budget_tokens(self.reduce_prompt, name=name, notes="", task=task)
            round_ = 0  # merge the notes in rounds until they fit
            while len(notes) > 1 and sum(counts := [n + 2 for n in self.engine.count_text(notes)]) > budget:
                round_ += 1
                merged, notes = [[notes[i] for i in batch] for batch in _packed(counts, budget)], []
                for j, part in enumerate(merged, start=1):
                    prompt = self.reduce_prompt.format(name=name, notes="\n\n".join(part), task=task)
                    step = f"combining notes, round {round_}, {j}"
                    final = yield from self._quietly(prompt, self.notes_tokens, step, cancelled)
                    if cancelled():
                        yield Answer("", done=True, progress="stopped")
                        return
                    if final.error:
                        yield final
                        return
                    notes.append(final.text.strip())
        except EngineError as err:  # the engine could not count (it is not available)
            yield Answer("", done=True, error=str(err), kind=err.kind)
            return
        prompt = self.reduce_prompt.format(name=name, notes="\n\n".join(notes), task=task)
        request = GenerationRequest(
            messages=(Message("user", prompt),), max_tokens=self.answer_tokens, temperature=self.temperature
        )
        # a blank answer after the whole document was read is written once more (sampled; greedy would repeat
        # itself), then refused in words: the reader never gets an empty bubble for minutes of reading
        for attempt, progress in enumerate(("writing the answer", "writing the answer again")):
            retry = replace(request, temperature=max(request.temperature, 0.7)) if attempt else request
            ended: Answer | None = None
            for update in stream(self.engine, retry, [], progress=progress, cancelled=cancelled):
                if update.done:
                    ended = update
                else:
                    yield update
            if ended is None or ended.text.strip() or ended.error or ended.progress == "stopped" or cancelled():
                if ended is not None:
                    yield ended
                return
        yield Answer("", done=True, error=BLANK_ANSWER)


_PAGE_REF = re.compile(r"\s?\[p(?:p)?\.\s*(\d+)(?:\s*[–-]\s*(\d+))?\]")


def grounded(update: Answer, name: str, pages: int) -> Answer:
    """A whole-document answer cites only pages the document has (a model's "[p. 51]" in an 8-page PDF is
    dropped), and once done it says what it rests on: the document, the pages it cites, all of it read."""
    cited: list[int] = []

    def keep(match: re.Match[str]) -> str:
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if pages and not 1 <= first <= last <= pages:
            return ""
        cited.extend(range(first, last + 1))
        return match.group(0)

    text = _PAGE_REF.sub(keep, update.text)
    footer = ""
    if update.done and (text.strip() or update.progress == "stopped"):
        read = f"all {pages} pages read" if pages > 1 else "read whole"
        shown = ", ".join(str(p) for p in sorted(set(cited)))
        pages_cited = f"page{'s' if len(set(cited)) > 1 else ''} {shown} cited, " if cited else ""
        footer = f"Source: {name} — {pages_cited}{read}"
    return replace(update, text=text, footer=footer)


def _line(chunk: StoredChunk) -> str:
    return f"[p. {chunk.page}] {chunk.text}"


def _packed(counts: list[int], budget: int) -> list[list[int]]:
    """Indexes of consecutive pieces grouped so that each group's tokens (+1 per line break) stay within
    `budget`; a piece larger than that goes alone."""
    groups: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, tokens in enumerate(counts):
        if current and size + tokens + 1 > budget:
            groups.append(current)
            current, size = [], 0
        current.append(i)
        size += tokens + 1
    return [*groups, current] if current else groups
