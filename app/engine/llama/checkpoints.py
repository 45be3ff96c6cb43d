"""Checkpoints of a sequence's sliding-window layers, so that a prompt cut back behind the window is not read whole.

With `swa_full` off the sliding-window layers (Gemma: five in six) hold only each sequence's last `n_swa`
positions. A prompt that shares a prefix with what a slot holds, but not up to its end — an agent re-sending its
conversation with a new last message, an answer asked again — needs those layers' window just before the prefix
ends, and the window has moved on: without a checkpoint the whole prompt is read again (`kv_host.usable`).

As llama-server does (`--ctx-checkpoints`), the batcher stops reading a prompt at a few marks and copies the
window layers' state there (`llama_state_seq_get_data_ext` with the partial flag: the window layers only, a few
MiB for the demo, ~440 MiB a checkpoint for Gemma 3 27B) into host memory. A later prompt that shares at least a
mark's tokens gets the window written back and keeps the full layers' KV up to the mark; only the rest is read.

Two checkpoints an answer: at the start of the prompt's last message (the previous place of the token that opens
the answer's turn: `<start_of_turn>` for Gemma, `<|im_start|>` for ChatML, so a new or changed last message keeps
everything before it), where reading the prompt stops for it; and at the prompt's end, taken before the first
generated token goes in (no stop): it serves the same prompt asked again after a long answer, cut back one token,
since the window at `n` holds the 512 positions before `n` and position `n - 1` needs exactly those.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import llama_cpp

WINDOW_ONLY = llama_cpp.LLAMA_STATE_SEQ_FLAGS_SWA_ONLY  # "partial only" in llama.cpp's newer name
OPENER_SEARCH = 16  # the answer's turn opener is among a prompt's last tokens


@dataclass
class Checkpoint:
    n_tokens: int  # the sequence held the prompt's first `n_tokens` when it was taken
    data: Any  # a ctypes uint8 array: the window layers' state as llama.cpp wrote it

    @property
    def size(self) -> int:
        return len(self.data)


def marks(prompt: list[int], *, held: int, is_control: Any) -> list[int]:
    """Where reading `prompt` (of which the slot holds `held` tokens already) stops for a checkpoint: the start of
    its last message, if that lies past `held` and before the end."""
    opener = _last_control(prompt, is_control)
    if opener is None:
        return []
    token = prompt[opener]
    previous = next((i for i in range(opener - 1, -1, -1) if prompt[i] == token), None)
    return [previous] if previous is not None and held < previous < len(prompt) else []


def _last_control(prompt: list[int], is_control: Any) -> int | None:
    """The index of the last control token among the prompt's last `OPENER_SEARCH` tokens."""
    for i in range(len(prompt) - 1, max(-1, len(prompt) - 1 - OPENER_SEARCH), -1):
        if is_control(prompt[i]):
            return i
    return None


def take(ctx: Any, seq: int, n_tokens: int) -> Checkpoint | None:
    """Copy sequence `seq`'s window layers out (it holds `n_tokens` prompt tokens); None when llama.cpp gave none."""
    size = int(llama_cpp.llama_state_seq_get_size_ext(ctx, seq, WINDOW_ONLY))
    if size <= 0:
        return None
    data = (ctypes.c_uint8 * size)()
    if int(llama_cpp.llama_state_seq_get_data_ext(ctx, data, size, seq, WINDOW_ONLY)) != size:
        return None
    return Checkpoint(n_tokens, data)


def restore(ctx: Any, seq: int, checkpoint: Checkpoint) -> bool:
    """Write a checkpoint's window layers back into `seq` (llama.cpp empties them first); the caller has cut
    the sequence back to the checkpoint's tokens. False when llama.cpp refused it."""
    return int(llama_cpp.llama_state_seq_set_data_ext(ctx, checkpoint.data, checkpoint.size, seq, WINDOW_ONLY)) > 0


def best(checkpoints: list[Checkpoint], common: int) -> tuple[Checkpoint | None, int]:
    """The checkpoint that keeps most of a `common`-token shared prefix, and how many tokens it keeps: its own,
    or `common` for one taken a token later (its window holds what position `common` needs)."""
    fitting = [c for c in checkpoints if 0 < c.n_tokens <= common + 1]
    if not fitting:
        return None, 0
    found = max(fitting, key=lambda c: c.n_tokens)
    return found, min(found.n_tokens, common)
