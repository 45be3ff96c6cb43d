"""Sequences' KV state kept in host memory, so that a conversation whose slot was taken gets it back.

When a slot is about to be reused for another prompt, the KV its sequence holds (the part read as a
prompt; the batcher decides when a copy is cheap enough) is copied out (`llama_state_seq_get_data`) into
an entry keyed by its tokens; entries are dropped least recently used
first to stay within `kv_cache_mb`. A prompt that shares a longer prefix with an entry than with any free
slot has the entry copied back into a slot (`llama_state_seq_set_data`): only the rest is read.

Sliding-window layers (Gemma 3: 512 or 1024 positions): a sequence cut back to `n` tokens needs those
layers' KV for the window before `n`, and a saved state holds only the window before its end. As
llama-server does, a prefix is kept only where the sequence still holds that window (`usable`); otherwise
the prompt is read again, never answered from a cache that lacks part of its window.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any

import llama_cpp

MIN_SAVE = 32  # tokens a slot must be about to lose before its KV is worth copying out


def usable(common: int, held: int, pos_min: int, n_swa: int) -> int:
    """How much of a `common`-token shared prefix a sequence holding `held` tokens (its earliest KV position
    `pos_min`) can keep: all of it, unless cutting it back would leave a sliding window short."""
    if common >= held or n_swa <= 0 or pos_min <= max(0, common - n_swa):
        return common
    return 0


def shared_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens `a` and `b` share from their start (a slot's or a host entry's KV and a prompt)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class Entry:
    tokens: list[int]
    data: Any  # a ctypes uint8 array: the sequence's state as llama.cpp wrote it
    pos_min: int  # the earliest position the saved state holds in every layer's window
    used: float

    @property
    def size(self) -> int:
        return len(self.data)


class HostKvCache:
    """Saved sequences, least recently used first out, within `budget_bytes` (0 = keep nothing)."""

    def __init__(self, ctx: Any, *, budget_bytes: int, n_swa: int) -> None:
        self.ctx = ctx
        self.memory = llama_cpp.llama_get_memory(ctx)
        self.budget = max(0, budget_bytes)
        self.n_swa = n_swa
        self.entries: list[Entry] = []

    @property
    def bytes(self) -> int:
        return sum(entry.size for entry in self.entries)

    def pos_min(self, seq: int) -> int:
        return int(llama_cpp.llama_memory_seq_pos_min(self.memory, seq))

    def save(self, seq: int, tokens: list[int]) -> bool:
        """Copy sequence `seq` (holding `tokens`) out; False when it does not fit the budget at all."""
        if not tokens or self.budget == 0:
            return False
        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, seq))
        if size <= 0 or size > self.budget:
            return False
        # what the new entry holds makes entries that are its prefix worthless
        self.entries = [e for e in self.entries if shared_prefix(e.tokens, tokens) < len(e.tokens)]
        while self.entries and self.bytes + size > self.budget:
            self.entries.remove(min(self.entries, key=lambda e: e.used))
        data = (ctypes.c_uint8 * size)()
        if int(llama_cpp.llama_state_seq_get_data(self.ctx, data, size, seq)) != size:
            return False
        window_start = len(tokens) - self.n_swa if self.n_swa > 0 else 0
        pos_min = max(self.pos_min(seq), window_start, 0)
        self.entries.append(Entry(list(tokens), data, pos_min, time.monotonic()))
        return True

    def best(self, prompt: list[int]) -> tuple[Entry | None, int]:
        """The entry whose usable shared prefix with `prompt` is longest, and that length."""
        found: Entry | None = None
        length = 0
        for entry in self.entries:
            common = min(shared_prefix(entry.tokens, prompt), len(prompt) - 1)
            keep = usable(common, len(entry.tokens), entry.pos_min, self.n_swa)
            if keep > length:
                found, length = entry, keep
        return found, length

    def take(self, entry: Entry) -> None:
        """The entry leaves the cache (it is about to live in a slot again)."""
        self.entries.remove(entry)

    def restore(self, entry: Entry, seq: int) -> bool:
        """Write `entry` into sequence `seq` (emptied first); False when llama.cpp refused it."""
        llama_cpp.llama_memory_seq_rm(self.memory, seq, -1, -1)
        if int(llama_cpp.llama_state_seq_set_data(self.ctx, entry.data, entry.size, seq)) == 0:
            llama_cpp.llama_memory_seq_rm(self.memory, seq, -1, -1)
            return False
        return True

    def clear(self) -> None:
        self.entries.clear()
