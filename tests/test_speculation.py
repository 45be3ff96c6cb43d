"""Speculative decoding from the answer's context (app/engine/llama/drafts.py, batcher.py) on the demo model
split across two real card agents: the same tokens with and without it, fewer steps where the answer quotes.

Each request runs twice on one loaded engine, drafts off then on. The prompts are ones the demo model
continues with a wide margin (a copied passage, counted sequences, values standing in a document): batched
kernels round differently from one-token steps, and only near ties could flip (docs/development.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.api.tools import plan
from app.engine.events import Done, GenerationRequest, Message, Token, TokenLogprob
from app.engine.llama.drafts import DraftConfig
from tests.engine_host import EngineHost
from tests.harness import COUNTED

PASSAGE = (
    "The cards throttle at 85 degrees Celsius and shut down at 95 degrees Celsius. Each card holds sixteen "
    "gigabytes of memory, and the host reads the temperature of every card once a second."
)
INVOICE = (
    "INVOICE 2024-117\nSeller: Northwind Traders Ltd, 12 Harbour Road, Bristol\nBuyer: Contoso Pharma GmbH, "
    "Berlin\nDate: 14 March 2024\nTotal due: 1,250.00 EUR\nPayment terms: 30 days\n"
)
FIELDS = {
    "type": "object",
    "properties": {"seller": {"type": "string"}, "buyer": {"type": "string"}, "date": {"type": "string"}},
    "required": ["seller", "buyer", "date"],
    "additionalProperties": False,
}
ON = DraftConfig(ngram=4, max_tokens=16)
# In quotes, the demo model copies the passage with a margin (0.4 or more over its first tokens); bare, it is
# torn between the passage and a story of its own, and a batch shape's rounding decides which.
QUOTE = f'Repeat this passage exactly, word for word:\n\n"{PASSAGE}"'


@pytest.fixture(scope="module")
def engine(engine_host: EngineHost) -> Any:
    return engine_host.engine(n_ctx=2048)


def ask(text: str, **options: Any) -> GenerationRequest:
    return GenerationRequest(messages=(Message("user", text),), **{"temperature": 0.0, **options})


def run(engine: Any, request: GenerationRequest, drafts: DraftConfig | None) -> tuple[str, Done, list[TokenLogprob]]:
    """The answer, its end and its tokens' log-probabilities, its prompt read afresh (a prompt found cached is
    read in another batch shape, whose rounding alone moves a log-probability by up to 0.2)."""
    engine.batcher.forget()
    engine.batcher.drafts = drafts
    text, done, logprobs = "", None, list[TokenLogprob]()
    for event in engine.generate(request, cancelled=lambda: False):
        if isinstance(event, Token):
            text += event.text
            logprobs += event.logprobs
        elif isinstance(event, Done):
            done = event
    assert done is not None
    return text, done, logprobs


def both(engine: Any, request: GenerationRequest) -> tuple[str, str, Done]:
    """The answer without drafts and with them, and the drafted answer's end."""
    plain, plain_done, _ = run(engine, request, None)
    drafted, done, _ = run(engine, request, ON)
    assert plain_done.stats.drafted_tokens == 0
    assert done.stats.generated_tokens == plain_done.stats.generated_tokens
    return plain, drafted, done


def test_a_quoting_answer_is_the_same_in_fewer_steps(engine: Any) -> None:
    request = ask(QUOTE, max_tokens=44)  # the echoed instruction and the passage; after it, near ties
    plain, drafted, done = both(engine, request)
    stats = done.stats
    assert drafted == plain
    assert PASSAGE[:40] in drafted, drafted  # it does quote: the drafts had something to copy
    assert stats.drafted_tokens > 0
    assert stats.accepted_tokens / stats.drafted_tokens > 0.5, stats
    assert stats.steps < stats.generated_tokens * 0.6, stats  # several tokens a step


@pytest.mark.parametrize("sequence", COUNTED)
def test_counted_sequences_are_unchanged(engine: Any, sequence: str) -> None:
    request = ask(sequence, max_tokens=48)
    plain, drafted, _ = both(engine, request)
    assert drafted == plain


def test_a_schema_answer_copying_values_is_the_same(engine: Any) -> None:
    request = ask(
        f"Extract the seller, the buyer and the date from this invoice.\n\n{INVOICE}",
        max_tokens=80,
        json_schema=json.dumps(FIELDS),
    )
    plain, drafted, done = both(engine, request)
    assert drafted == plain
    assert json.loads(drafted)["seller"]  # it is the schema's JSON
    assert done.stats.accepted_tokens > 0, done.stats


def test_a_tool_call_is_the_same(engine: Any) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
    from app.api.tools import Tool

    tool_plan = plan([Tool.model_validate(t) for t in tools], "required", parallel=False)
    assert tool_plan is not None
    request = GenerationRequest(
        messages=(Message("system", tool_plan.instruction), Message("user", "What is the weather in Hamburg?")),
        temperature=0.0,
        max_tokens=60,
        json_schema=json.dumps(tool_plan.schema),
    )
    plain, drafted, _ = both(engine, request)
    assert drafted == plain
    assert "get_weather" in drafted


def test_a_document_question_is_the_same(engine: Any) -> None:
    sources = f"[1] handbook.pdf, page 3: {PASSAGE}\n[2] handbook.pdf, page 4: Fans start at 60 degrees Celsius."
    request = ask(
        f"Answer from the sources, quoting them and citing [n].\n\n{sources}\n\nAt what temperature do the "
        "cards throttle?",
        max_tokens=60,
    )
    plain, drafted, _ = both(engine, request)
    assert drafted == plain


def test_logprobs_stay_those_of_each_token(engine: Any) -> None:
    request = ask(QUOTE, max_tokens=30, logprobs=2)
    plain, _, plain_lp = run(engine, request, None)
    drafted, done, drafted_lp = run(engine, request, ON)
    assert drafted == plain and done.stats.accepted_tokens > 0
    assert [lp.token for lp in drafted_lp] == [lp.token for lp in plain_lp]
    for a, b in zip(plain_lp, drafted_lp, strict=True):  # a drafted position's logits come from a wider batch
        assert abs(a.logprob - b.logprob) < 0.15, (a, b)  # 0.10 seen with the windowed cache
        assert a.top[0][0] == b.top[0][0] == a.token  # the likeliest; the runner-up may be a near tie


def test_sampling_with_a_seed_draws_the_same_tokens(engine: Any) -> None:
    """At temperature > 0 each token is still drawn once, from the model's own distribution, in order: with the
    same seed, the same answer (a draft only decides how many of the draws one step serves). Kept short: where
    the model babbles, a draw near a boundary may meet the wider batch's rounding."""
    request = ask(f"Repeat this passage:\n\n{PASSAGE}", max_tokens=30, temperature=0.7, seed=1234)
    plain, _, _ = run(engine, request, None)
    drafted, done, _ = run(engine, request, ON)
    assert drafted == plain
    assert done.stats.accepted_tokens > 0
