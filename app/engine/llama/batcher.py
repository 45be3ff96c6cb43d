"""Continuous batching: every running answer advances in one llama_decode per step.

A step holds the next token of every answer that is generating (with its draft), then (while room is left in
`prompt_chunk`) a chunk of the prompt of answers still reading theirs — chunked prefill, so a long prompt
arriving never freezes the answers already streaming; a chunk ends at the prompt's checkpoint marks. Each answer
lives in a slot, one llama.cpp sequence; which slot it takes and how much of its prompt that slot keeps is
slot_memory.py's. Cancelling marks the answer; it ends at the start of the next step.

This runs where llama.cpp lives (the engine worker, or the app process): loop.py's `serve` is its loop.
"""

from __future__ import annotations

import time
from typing import Any

import llama_cpp

from app.engine.counts import MIN_ROOM, overflow
from app.engine.events import EngineError, Event, GenerationRequest
from app.engine.llama import logprobs
from app.engine.llama.drafts import DraftConfig, accepted
from app.engine.llama.kv_host import MIN_SAVE
from app.engine.llama.slot_memory import SlotMemory
from app.engine.llama.slots import Answer, Batch, Prepared, Sampler, Slot
from app.engine.meter import CacheUse

Emitted = list[tuple[int, Event]]


class Batcher:
    def __init__(
        self,
        llm: Any,
        *,
        parallel: int,
        n_ctx: int,
        prompt_chunk: int,
        max_tokens: int,
        kv_cache_bytes: int = 0,
        v_transposed: bool = True,
        n_batch: int = 0,
        drafts: DraftConfig | None = None,
        ctx_checkpoints: int = 0,
    ) -> None:
        self.llm = llm
        self.slots = [Slot(seq) for seq in range(parallel)]
        self.n_ctx = n_ctx  # per answer
        self.prompt_chunk = max(1, prompt_chunk)
        self.max_tokens = max_tokens
        # a step holds at most n_batch tokens (llama_decode's bound): every answer's next token, drafts, prompt
        self.batch = Batch(max(n_batch, parallel + self.prompt_chunk))
        self.drafts = drafts if drafts is not None and drafts.on else None
        self.kv = SlotMemory(
            llm, kv_cache_bytes=kv_cache_bytes, v_transposed=v_transposed, ctx_checkpoints=ctx_checkpoints
        )
        self.last_refused = 0  # tokens the grammar refused in the last constrained answer

    def busy(self) -> bool:
        return any(slot.answer is not None for slot in self.slots)

    def running(self) -> int:
        return sum(slot.answer is not None for slot in self.slots)

    def add(
        self, job_id: int, request: GenerationRequest, prepared: Prepared, *, check_picked: bool = True
    ) -> CacheUse:
        """Start an answer in a free slot; raises EngineError for a request that cannot run."""
        prompt, stops = prepared.prompt, prepared.stops
        room = self.n_ctx - len(prompt)
        if room < MIN_ROOM:
            raise overflow(len(prompt), self.n_ctx)
        free = [slot for slot in self.slots if slot.answer is None]
        if not free:
            raise EngineError("every slot of the engine is busy", kind="busy")
        slot, cached, restored = self.kv.place(free, prompt)
        sampler = Sampler(self.llm, request, prepared.grammar, check_picked=check_picked)
        budget = min(request.max_tokens, self.max_tokens, room)
        slot.answer = Answer(
            job_id=job_id,
            prompt=prompt,
            stops=stops,
            budget=budget,
            sampler=sampler,
            cached=cached,
            want_logprobs=request.logprobs,
            drafts=self.drafts,
        )
        slot.read, slot.runs = len(prompt), slot.runs if cached >= MIN_SAVE else 1
        slot.answer.marks = self.kv.marks(prompt, held=cached)
        return CacheUse(cached, restored, self.kv.host.bytes, len(self.kv.host.entries))

    def cancel(self, job_id: int) -> None:
        for slot in self.slots:
            if slot.answer is not None and slot.answer.job_id == job_id:
                slot.answer.cancelled = True

    def step(self) -> Emitted:
        """One llama_decode for every running answer; the events it gave, by job id."""
        out: Emitted = []
        for slot in self.slots:
            if slot.answer is not None and slot.answer.cancelled:
                out += self._end(slot, slot.answer.finish("cancelled"))
        active = self._fill()
        if not active:
            return out
        if len(active) > 1:  # tokens of several answers in one step: none sits next to its previous cells
            for slot in active:
                slot.runs += 1
        code = llama_cpp.llama_decode(self.llm._ctx.ctx, self.batch.raw)
        if code != 0:
            return out + self._fail(active, code)
        for slot in active:
            answer = slot.answer
            assert answer is not None
            if answer.logits_at >= 0:
                out += self._sample(slot, answer)
        return out

    def _fill(self) -> list[Slot]:
        """Put every generating answer's next token (and its draft) in the batch, then prompt chunks.

        Prompts take `prompt_chunk` tokens a step while answers stream beside them (so that they keep their
        pace), the whole batch when none does (fewer trips through the cards for a fresh prompt)."""
        self.batch.clear()
        active: list[Slot] = []
        generating = [s for s in self.slots if s.answer is not None and s.answer.next_token is not None]
        room = self.batch.capacity - len(generating) - (self.prompt_chunk if self._prefilling() else 0)
        for slot in generating:
            answer = slot.answer
            assert answer is not None and answer.next_token is not None
            self.kv.checkpoint(slot, answer)
            answer.draft = answer.next_draft(min(room, self.n_ctx - len(slot.cache) - 1))
            room -= len(answer.draft)
            answer.logits_at = self._feed(slot, [answer.next_token, *answer.draft], all_logits=True)
            answer.next_token = None
            active.append(slot)
        room = self.prompt_chunk if generating else self.batch.capacity
        for slot in sorted(self._prefilling(), key=lambda s: s.answer.started if s.answer else 0.0):
            answer = slot.answer
            assert answer is not None
            self.kv.checkpoint(slot, answer)
            end = min(answer.fed + room, *(m for m in answer.marks if m > answer.fed), len(answer.prompt))
            take = answer.prompt[answer.fed : end]
            if not take:
                break
            answer.fed += len(take)
            answer.logits_at = self._feed(slot, take, last_logits=not answer.prefilling)
            room -= len(take)
            active.append(slot)
        return active

    def _prefilling(self) -> list[Slot]:
        return [s for s in self.slots if s.answer is not None and s.answer.prefilling]

    def _feed(self, slot: Slot, tokens: list[int], *, last_logits: bool = False, all_logits: bool = False) -> int:
        """Add tokens of one sequence to the batch; the batch index of the first logits asked for, or -1."""
        index = -1
        for i, token in enumerate(tokens):
            logits = all_logits or (last_logits and i == len(tokens) - 1)
            at = self.batch.add(token, pos=len(slot.cache), seq=slot.seq, logits=logits)
            slot.cache.append(token)
            index = at if logits and index < 0 else index
        return index

    def _sample(self, slot: Slot, answer: Answer) -> Emitted:
        """Take the answer's tokens from this step's logits: one, or (with a draft) each drafted token the
        sampler picks itself and the one after; the KV cells of the rejected rest are dropped."""
        first, draft = answer.logits_at, answer.draft
        answer.logits_at, answer.draft = -1, []
        events: list[Event] = []
        over = False

        def sample(i: int) -> int | None:
            nonlocal over
            token, taken, over = self._take(answer, first + i)
            events.extend(taken)
            return None if over else token

        _taken, kept = accepted(draft, sample)
        answer.verified(len(draft), kept)
        if not self.kv.drop_tail(slot, len(draft) - kept):
            error = EngineError("llama.cpp could not drop a rejected draft from the answer's memory")
            return self._end(slot, [*events, error.failed()])
        if over:
            return self._end(slot, events)
        return [(answer.job_id, event) for event in events]

    def _take(self, answer: Answer, index: int) -> tuple[int, list[Event], bool]:
        """The token sampled from the logits at `index`, the events it gives, and whether the answer is over."""
        top = answer.want_logprobs
        dist = logprobs.distribution(self.llm, index) if top is not None else None
        token = answer.sampler.sample(self.llm._ctx.ctx, index)
        end = bool(llama_cpp.llama_vocab_is_eog(self.llm._model.vocab, token))
        chosen = logprobs.of(self.llm, dist, token, top or 0) if dist is not None and not end else None
        events, over = answer.take(token, piece=b"" if end else self.llm.detokenize([token]), end=end, logprob=chosen)
        return token, events, over

    def _end(self, slot: Slot, events: list[Event]) -> Emitted:
        answer = slot.answer
        assert answer is not None
        if answer.sampler.checked is not None:
            self.last_refused = answer.sampler.refused
        answer.sampler.close()
        slot.answer, slot.last_used = None, time.monotonic()
        return [(answer.job_id, event) for event in events]

    def _fail(self, active: list[Slot], code: int) -> Emitted:
        """llama_decode refused the batch: its answers fail, and their sequences start clean."""
        error = EngineError(f"llama.cpp could not evaluate the batch (llama_decode returned {code})")
        out: Emitted = []
        for slot in active:
            self.kv.clear(slot)
            out += self._end(slot, [error.failed()])
        return out

    def forget(self) -> None:
        """Drop every idle slot's tokens and the host KV cache: the next prompts are read afresh (benches and
        tests that compare two ways of answering the same prompt)."""
        for slot in self.slots:
            if slot.answer is None:
                self.kv.clear(slot)
        self.kv.host.clear()

    def close(self) -> None:
        for slot in self.slots:
            if slot.answer is not None:
                slot.answer.sampler.close()
                slot.answer = None
        self.kv.host.clear()
        self.batch.close()
