"""What each slot's llama.cpp sequence holds, and how much of a new prompt it keeps.

A new answer goes to the free slot whose cached tokens share the longest usable prefix with its prompt (a
conversation's next turn finds its earlier turns there), else the least recently used one. What a reused slot
held is copied to host memory first (kv_host.py) and comes back into a slot when its conversation returns.
With windowed sliding-window layers, a prefix is usable only where the sequence still holds the window before
its end, or where a checkpoint of that window was taken (checkpoints.py). The batcher (batcher.py) decides
what goes in each step; this decides what each sequence keeps.
"""

from __future__ import annotations

from typing import Any

import llama_cpp

from app.engine.llama import checkpoints
from app.engine.llama.kv_host import MIN_SAVE, HostKvCache, shared_prefix, usable
from app.engine.llama.slots import Answer, Slot

MAX_RUNS = 2  # runs of KV cells a sequence may take and still be copied out with f16 V (see _save)
MAX_RUNS_FLAT = 256  # ... with a quantised cache (flash attention: V not transposed, a copy a run and layer)


class SlotMemory:
    """The KV memory of the slots' sequences: prefix reuse, host copies and window checkpoints."""

    def __init__(self, llm: Any, *, kv_cache_bytes: int, v_transposed: bool, ctx_checkpoints: int) -> None:
        self.ctx, self.vocab = llm._ctx.ctx, llm._model.vocab
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        n_swa = int(llama_cpp.llama_model_n_swa(llm._model.model))
        self.host = HostKvCache(self.ctx, budget_bytes=kv_cache_bytes, n_swa=n_swa)
        # checkpoints kept per slot: only where the window layers are windowed (the caller knows `swa_full`)
        self.ctx_checkpoints = ctx_checkpoints if n_swa > 0 else 0
        self.max_runs = MAX_RUNS if v_transposed else MAX_RUNS_FLAT

    def marks(self, prompt: list[int], *, held: int) -> list[int]:
        """Where reading `prompt` stops for a checkpoint (none without checkpoints)."""
        return checkpoints.marks(prompt, held=held, is_control=self._is_control) if self.ctx_checkpoints else []

    def clear(self, slot: Slot) -> None:
        """Empty the slot's sequence."""
        llama_cpp.llama_memory_seq_rm(self.memory, slot.seq, -1, -1)
        self.cut(slot, 0)

    def place(self, free: list[Slot], prompt: list[int]) -> tuple[Slot, int, bool]:
        """The free slot for `prompt`, how much of the prompt's KV it holds, and whether that came back from
        host memory (an entry there shares more with the prompt than any free slot does)."""
        slot = max(free, key=lambda s: self._worth(s, prompt))
        entry, from_host = self.host.best(prompt)
        if entry is None or not _real(from_host, prompt) or from_host <= self.held(slot, prompt):
            return slot, self._keep_prefix(slot, prompt), False
        target = min(free, key=lambda s: s.last_used)
        self.host.take(entry)
        self._save(target, keep=0)
        target.cache.clear()
        target.checkpoints.clear()
        if not self.host.restore(entry, target.seq):
            return target, 0, False
        target.cache.extend(entry.tokens)
        target.read, target.runs = len(entry.tokens), 1  # written back in one run
        kept = self._keep_prefix(target, prompt)
        return target, kept, kept > 0

    def _worth(self, slot: Slot, prompt: list[int]) -> tuple[int, bool, float]:
        """Why a slot suits a prompt, best first: a real shared prefix (a conversation's earlier turns, a
        long system prompt: 32 tokens or half the prompt, not a chat template's opening), then losing
        nothing (an empty slot), then the least recently used."""
        held = self.held(slot, prompt)
        return (held if _real(held, prompt) else 0), held == len(slot.cache), -slot.last_used

    def held(self, slot: Slot, prompt: list[int]) -> int:
        """Prompt tokens whose KV the slot's sequence holds and can keep (one token is always fed, for logits)."""
        return self._kept(slot, prompt)[0]

    def _kept(self, slot: Slot, prompt: list[int]) -> tuple[int, checkpoints.Checkpoint | None]:
        """How much of `prompt` the slot can keep, and the checkpoint whose window that needs written back (None:
        the sequence still holds the window before the prefix's end, or nothing is kept)."""
        common = min(shared_prefix(slot.cache, prompt), len(prompt) - 1)
        keep = usable(common, len(slot.cache), self.host.pos_min(slot.seq), self.host.n_swa)
        if keep or not common:
            return keep, None
        found, keep = checkpoints.best(slot.checkpoints, common)
        return keep, found

    def _keep_prefix(self, slot: Slot, prompt: list[int]) -> int:
        """Drop what the slot's sequence holds beyond the prefix it can keep of `prompt` (saving it to host
        memory first when that is worth it), its window written back from a checkpoint where needed."""
        keep, window = self._kept(slot, prompt)
        self._save(slot, keep=keep)
        # the window first: a checkpoint taken a token after `keep` holds that token too, and the cut drops it
        if keep and window is not None and not checkpoints.restore(self.ctx, slot.seq, window):
            keep = 0
        if keep < len(slot.cache) and not llama_cpp.llama_memory_seq_rm(self.memory, slot.seq, keep, -1):
            keep = 0
        if keep == 0:
            llama_cpp.llama_memory_seq_rm(self.memory, slot.seq, -1, -1)
        self.cut(slot, keep)
        return keep

    def cut(self, slot: Slot, keep: int) -> None:
        """The slot's tokens (and checkpoints) after its sequence was cut back to `keep` tokens."""
        del slot.cache[keep:]
        slot.checkpoints = [c for c in slot.checkpoints if c.n_tokens <= keep]

    def _save(self, slot: Slot, *, keep: int) -> None:
        """Copy the prompt part of what the slot holds to host memory, if it is about to lose it.

        Only the part read as a prompt, and only when it takes few runs of cells: llama.cpp copies a
        sequence run by run and layer by layer (and f16 V, stored transposed, row by row), each copy an RPC
        call to a card, so answers' tokens generated beside each other (one run per token) would cost
        seconds; a conversation's next turn extends its prompt anyway and reads the answer again."""
        read = min(slot.read, len(slot.cache))
        if read - keep < MIN_SAVE or slot.runs > self.max_runs:
            return
        if read < len(slot.cache):
            llama_cpp.llama_memory_seq_rm(self.memory, slot.seq, read, -1)
            self.cut(slot, read)
        self.host.save(slot.seq, slot.cache)

    def checkpoint(self, slot: Slot, answer: Answer) -> None:
        """Before the step: at one of the prompt's marks, or at its end before the first generated token goes in,
        copy the window layers out (the oldest out first)."""
        at = len(slot.cache)
        due = at in answer.marks if answer.prefilling else at == len(answer.prompt)
        if not self.ctx_checkpoints or not due or any(c.n_tokens == at for c in slot.checkpoints):
            return
        taken = checkpoints.take(self.ctx, slot.seq, at)
        if taken is not None:
            slot.checkpoints = [*slot.checkpoints, taken][-self.ctx_checkpoints :]

    def drop_tail(self, slot: Slot, count: int) -> bool:
        """Forget the last `count` tokens of the slot's sequence (a draft's rejected tokens); False if llama.cpp
        could not (the sequence is then cleared: what it holds no longer matches its tokens)."""
        if count <= 0:
            return True
        start = len(slot.cache) - count
        if llama_cpp.llama_memory_seq_rm(self.memory, slot.seq, start, -1):
            self.cut(slot, start)
            return True
        llama_cpp.llama_memory_seq_rm(self.memory, slot.seq, -1, -1)
        self.cut(slot, 0)
        return False

    def _is_control(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_control(self.vocab, token))


def _real(shared: int, prompt: list[int]) -> bool:
    """A shared prefix worth a slot or a restore: 32 tokens or half the prompt, not a chat template's opening."""
    return shared >= MIN_SAVE or 2 * shared >= len(prompt)
