"""One running answer and the slot (a llama.cpp sequence) that holds it.

An answer owns everything that is per answer: its prompt tokens, its sampler chain (temperature,
top_p, seed, grammar), its text decoding and stop strings, its budget and its timings. A slot owns a
sequence id and the tokens whose KV that sequence holds, which outlive the answer so that the next
turn of the same conversation reuses them.
"""

from __future__ import annotations

import codecs
import time
from dataclasses import dataclass, field
from typing import Any

import llama_cpp
from llama_cpp.llama_grammar import LlamaGrammar

from app.engine.events import Done, Event, GenerationRequest, Stats, Token, TokenLogprob
from app.engine.llama.checkpoints import Checkpoint
from app.engine.llama.drafts import DraftConfig, Ngrams, Pace
from app.engine.llama.grammar import GrammarFirstChecked
from app.engine.llama.stops import StopScanner


@dataclass(frozen=True)
class Prepared:
    """A request as the model reads it: its prompt tokens, its stop strings and its grammar (if constrained)."""

    prompt: list[int]
    stops: list[str]
    grammar: LlamaGrammar | None


class Sampler:
    """One answer's sampler chain; a constrained answer checks the picked token against its grammar."""

    def __init__(self, llm: Any, request: GenerationRequest, grammar: LlamaGrammar | None, *, check_picked: bool):
        # the chain's random source takes the seed when it is made; no seed = a fresh random one
        llm.set_seed(request.seed if request.seed is not None else llama_cpp.LLAMA_DEFAULT_SEED)
        self.checked: GrammarFirstChecked | None = None
        self.chain: Any = None
        if grammar is not None and check_picked:
            self.checked = GrammarFirstChecked(llm, grammar, temperature=request.temperature, top_p=request.top_p)
        else:
            self.chain = llm._init_sampler(temp=request.temperature, top_p=request.top_p, grammar=grammar)

    def sample(self, ctx: Any, index: int) -> int:
        """The token picked from the logits at `index` of the last batch (and accepted by the chain)."""
        if self.checked is not None:
            return self.checked.sample(ctx, index)
        return int(llama_cpp.llama_sampler_sample(self.chain.sampler, ctx, index))

    @property
    def refused(self) -> int:
        return self.checked.refused if self.checked is not None else 0

    def close(self) -> None:
        if self.checked is not None:
            self.checked.close()
        if self.chain is not None:
            self.chain.close()


class Answer:
    """One answer's progress: prompt fed so far, tokens generated, text held back by stop strings."""

    def __init__(
        self,
        *,
        job_id: int,
        prompt: list[int],
        stops: list[str],
        budget: int,
        sampler: Sampler,
        cached: int,
        want_logprobs: int | None = None,
        drafts: DraftConfig | None = None,
    ) -> None:
        self.job_id = job_id
        self.prompt = prompt
        self.fed = cached  # prompt tokens whose KV the slot holds
        self.marks: list[int] = []  # prompt positions where the batcher stops to take a checkpoint
        self.cached = cached
        self.budget = budget
        self.sampler = sampler
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.scanner = StopScanner(stops)
        self.generated = 0
        self.next_token: int | None = None  # sampled, not yet decoded into the KV
        self.logits_at = -1  # where this answer's logits are in the current batch
        self.cancelled = False
        self.started = time.monotonic()
        self.first_at: float | None = None
        self.prompt_done: float | None = None
        self.want_logprobs = want_logprobs  # None: none; else each token's, with this many alternatives
        self.logprobs: list[TokenLogprob] = []  # of tokens taken whose text has not gone out yet
        # speculative decoding (drafts.py): the context drafts come from, and how long the next one may be
        self.ngrams = Ngrams(prompt, n=drafts.ngram) if drafts is not None and drafts.on else None
        self.pace = Pace(drafts) if drafts is not None else None
        self.draft: list[int] = []  # drafted tokens fed after next_token in the current step
        self.drafted = 0
        self.accepted = 0
        self.steps = 0

    def next_draft(self, room: int) -> list[int]:
        """The tokens to feed after next_token this step (none without speculation or a match)."""
        if self.ngrams is None or self.pace is None:
            return []
        draft = self.ngrams.draft(min(room, self.pace.next(), self.budget - self.generated - 1))
        return draft if len(draft) >= self.pace.config.min_tokens else []

    def verified(self, drafted: int, kept: int) -> None:
        """A step's draft was checked: `kept` of its `drafted` tokens were the model's own picks."""
        self.steps += 1
        self.drafted += drafted
        self.accepted += kept
        if self.pace is not None:
            self.pace.after(drafted, kept)

    @property
    def prefilling(self) -> bool:
        return self.fed < len(self.prompt)

    def take(
        self, token: int, *, piece: bytes, end: bool, logprob: TokenLogprob | None = None
    ) -> tuple[list[Event], bool]:
        """Take a sampled token: the events it gives and whether the answer is over."""
        if self.prompt_done is None:
            self.prompt_done = time.monotonic()
        if end:
            return self.finish("stop"), True
        self.generated += 1
        if self.ngrams is not None:
            self.ngrams.extend((token,))
        self.first_at = self.first_at or time.monotonic()
        if logprob is not None:
            self.logprobs.append(logprob)
        text, hit = self.scanner.feed(self.decoder.decode(piece))
        events: list[Event] = [self._token(text)] if text else []
        if hit:
            return [*events, *self.finish("stop")], True
        if self.generated >= self.budget:
            return [*events, *self.finish("length")], True
        self.next_token = token
        return events, False

    def finish(self, reason: str) -> list[Event]:
        """The end of the answer; unless a stop string ended it, the text held back comes first."""
        tail = self.scanner.flush() if reason != "stop" else ""
        done = Done(self.stats(reason))
        return [self._token(tail), done] if tail else [done]

    def _token(self, text: str) -> Token:
        """Text going out, with the log-probabilities of the tokens it came from (when asked)."""
        logprobs, self.logprobs = tuple(self.logprobs), []
        return Token(text, logprobs)

    def stats(self, reason: str) -> Stats:
        finished = time.monotonic()
        prompt_s = (self.prompt_done or finished) - self.started
        decode_s = finished - self.first_at if self.first_at else 0.0
        n = self.generated
        return Stats(
            prompt_tokens=len(self.prompt),
            cached_tokens=self.cached,
            generated_tokens=n,
            ttft_s=round((self.first_at - self.started) if self.first_at else 0.0, 4),
            prompt_tps=round((len(self.prompt) - self.cached) / prompt_s, 1) if prompt_s > 0 else 0.0,
            decode_tps=round((n - 1) / decode_s, 1) if n > 1 and decode_s > 0 else 0.0,
            total_s=round(finished - self.started, 4),
            finish_reason=reason,  # type: ignore[arg-type]
            drafted_tokens=self.drafted,
            accepted_tokens=self.accepted,
            steps=self.steps,
        )


@dataclass
class Slot:
    seq: int
    cache: list[int] = field(default_factory=list)  # the tokens whose KV this sequence holds
    answer: Answer | None = None
    last_used: float = 0.0
    read: int = 0  # the first `read` tokens of `cache` were read as a prompt (not generated)
    checkpoints: list[Checkpoint] = field(default_factory=list)  # its window layers at earlier prompt marks
    runs: int = 1  # runs of KV cells `cache` takes, at most (a step shared with other answers starts one)


class Batch:
    """A llama_batch filled token by token: one sequence id per token, logits where asked."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.raw = llama_cpp.llama_batch_init(capacity, 0, 1)

    def clear(self) -> None:
        self.raw.n_tokens = 0

    @property
    def size(self) -> int:
        return int(self.raw.n_tokens)

    def add(self, token: int, *, pos: int, seq: int, logits: bool) -> int:
        i = self.raw.n_tokens
        self.raw.token[i] = token
        self.raw.pos[i] = pos
        self.raw.n_seq_id[i] = 1
        self.raw.seq_id[i][0] = seq
        self.raw.logits[i] = logits
        self.raw.n_tokens = i + 1
        return int(i)

    def close(self) -> None:
        if self.raw is not None:
            llama_cpp.llama_batch_free(self.raw)
            self.raw = None
