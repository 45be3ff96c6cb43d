"""Whole-document mode: summarise a document, or ask about all of it, by map-reduce over its chunks.

Map: consecutive chunks are grouped to fit the model's context and each group gives short notes with
their pages. Reduce: the notes, merged in rounds while they do not fit, give the final answer, which
streams. Progress says which part is being read.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

from app.engine.events import GenerationRequest, Message
from app.engine.service import EngineService
from app.knowledge.answer import Answer, stream
from app.knowledge.service import KnowledgeService
from app.knowledge.store import StoredChunk

SUMMARY_TASK = "Summarise the main points."
_CHARS_PER_TOKEN = 2.0  # measured: GeoTopo's German gave 2.07 characters per token; a part that still
# overflows the context is split in two and read again


class Summariser:
    def __init__(
        self,
        knowledge: KnowledgeService,
        engine: EngineService,
        prompts: Path,
        *,
        notes_tokens: int = 160,
        answer_tokens: int = 400,
    ) -> None:
        self.knowledge, self.engine = knowledge, engine
        self.map_prompt = (prompts / "summary_map.txt").read_text(encoding="utf-8")
        self.reduce_prompt = (prompts / "summary_reduce.txt").read_text(encoding="utf-8")
        self.notes_tokens, self.answer_tokens = notes_tokens, answer_tokens

    def budget_chars(self) -> int:
        room = self.engine.config.n_ctx - max(self.notes_tokens, self.answer_tokens) - 250
        return max(1500, int(room * _CHARS_PER_TOKEN))

    def groups(self, chunks: list[StoredChunk]) -> list[list[StoredChunk]]:
        budget, size = self.budget_chars(), 0
        groups: list[list[StoredChunk]] = []
        current: list[StoredChunk] = []
        for chunk in chunks:
            if current and size + len(chunk.text) > budget:
                groups.append(current)
                current, size = [], 0
            current.append(chunk)
            size += len(chunk.text)
        return [*groups, current] if current else groups

    def run(self, document_id: int, *, question: str | None = None) -> Generator[Answer, None, None]:
        doc = self.knowledge.document(document_id)
        if doc is None or doc.status != "ok":
            raise ValueError(f"document {document_id} is not indexed" + (f" ({doc.status})" if doc else ""))
        task = f"Answer this question: {question.strip()}" if question and question.strip() else SUMMARY_TASK
        groups = self.groups(self.knowledge.document_chunks(document_id))
        notes: list[str] = []
        for i, group in enumerate(groups, start=1):
            part = f"part {i} of {len(groups)}"
            error = yield from self._map(doc.name, group, task, part, notes)
            if error:
                yield Answer("", done=True, error=error)
                return
        yield from self._reduce(doc.name, notes or ["(no part of the document had anything for this)"], task)

    def _map(self, name: str, group: list[StoredChunk], task: str, part: str,
             notes: list[str]) -> Generator[Answer, None, str | None]:
        """Notes on one group of chunks into `notes`; a group too long for the context is halved."""
        first, last = group[0].page, group[-1].page
        text = "\n".join(f"[p. {c.page}] {c.text}" for c in group)
        prompt = self.map_prompt.format(first=first, last=last, name=name, text=text, task=task)
        final = yield from self._quietly(prompt, self.notes_tokens, f"reading {part} (pages {first}–{last})")
        if final.error and "context holds" in final.error and len(group) > 1:
            half = len(group) // 2
            for piece in (group[:half], group[half:]):
                error = yield from self._map(name, piece, task, part, notes)
                if error:
                    return error
            return None
        if final.error:
            return final.error
        if final.text.strip() and "NOTHING" not in final.text[:20]:
            notes.append(final.text.strip())
        return None

    def _quietly(self, prompt: str, max_tokens: int, progress: str) -> Generator[Answer, None, Answer]:
        """Generate without streaming the text (only progress); returns the final Answer."""
        request = GenerationRequest(  # one part of many: background work, people's answers go first
            messages=(Message("user", prompt),), max_tokens=max_tokens, temperature=0.2, background=True
        )
        final = Answer("", done=True, error="no answer")
        for update in stream(self.engine, request, [], progress=progress):
            if update.done:
                final = update
            else:
                yield Answer("", progress=progress, waiting=update.waiting)
        return final

    def _reduce(self, name: str, notes: list[str], task: str) -> Generator[Answer, None, None]:
        budget = self.budget_chars()
        round_ = 0
        while sum(len(n) for n in notes) > budget and len(notes) > 1:  # merge in rounds until they fit
            round_ += 1
            merged: list[list[str]] = []
            batch: list[str] = []
            for note in notes:
                if batch and sum(len(n) for n in batch) + len(note) > budget:
                    merged.append(batch)
                    batch = []
                batch.append(note)
            merged.append(batch)
            notes = []
            for j, part in enumerate(merged, start=1):
                prompt = self.reduce_prompt.format(name=name, notes="\n\n".join(part), task=task)
                final = yield from self._quietly(prompt, self.notes_tokens, f"combining notes, round {round_}, {j}")
                if final.error:
                    yield final
                    return
                notes.append(final.text.strip())
        prompt = self.reduce_prompt.format(name=name, notes="\n\n".join(notes), task=task)
        request = GenerationRequest(messages=(Message("user", prompt),), max_tokens=self.answer_tokens, temperature=0.2)
        yield from stream(self.engine, request, [], progress="writing the answer")
