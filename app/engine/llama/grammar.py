"""JSON-schema constrained answers: the schema becomes a llama.cpp grammar, checked before use."""

from __future__ import annotations

import ctypes
import json
import math
from typing import Any

import jsonschema
import llama_cpp
from llama_cpp.llama_grammar import LlamaGrammar

from app.engine.events import EngineError
from app.engine.llama.schema_grammar import to_gbnf
from app.schema_limits import check_cost
from app.valid_text import valid_text


def grammar_for(json_schema: str | None, vocab: object) -> LlamaGrammar | None:
    """llama.cpp's grammar for a JSON schema, checked before it reaches the sampler chain (a grammar
    llama cannot parse gives a NULL sampler there, and a segfault instead of an error)."""
    if json_schema is None:
        return None
    try:
        jsonschema.validators.validator_for(schema := json.loads(valid_text(json_schema))).check_schema(schema)
        check_cost(schema)  # the front doors check it first (naming the request's field); this is the last line
        grammar = LlamaGrammar.from_string(to_gbnf(schema), verbose=False)  # bounds too (schema_grammar.py)
    except (ValueError, jsonschema.SchemaError) as err:
        raise EngineError(_unusable(_first_line(err)), kind="request") from err
    except Exception as err:  # the GBNF converter raises bare exceptions for unsupported parts
        raise EngineError(_unusable(str(err)), kind="request") from err
    probe = llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode(), grammar._root.encode())
    if not probe:
        raise EngineError(_unusable("llama.cpp rejected its grammar"), kind="request")
    llama_cpp.llama_sampler_free(probe)
    return grammar


def _unusable(why: str) -> str:
    return f"the JSON schema cannot be used to constrain the answer: {why}"


def _first_line(err: Exception) -> str:
    return str(getattr(err, "message", err)).splitlines()[0]


class GrammarFirstChecked:
    """Constrained sampling that checks only the token it picks, as llama.cpp's own sampler does.

    llama-cpp-python's chain runs the grammar over the whole vocabulary for every token: with
    Gemma's 262,144 tokens that costs ~65 ms of host CPU per token, as long as a free token
    (bench/extraction.py). Here the free chain picks a token, the grammar checks that one token, and
    only when it is refused does the full chain (grammar first) pick again. At temperature 0 the
    result is the same token the full chain would pick."""

    def __init__(self, llm: Any, grammar: LlamaGrammar, *, temperature: float, top_p: float) -> None:
        self._free = llm._init_sampler(temp=temperature, top_p=top_p)
        self._full = llm._init_sampler(temp=temperature, top_p=top_p, grammar=grammar)
        self._check = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar._grammar.encode(), grammar._root.encode()
        )
        self._one = (llama_cpp.llama_token_data * 1)()
        self._candidates = llama_cpp.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self.refused = 0  # tokens the free chain picked that the grammar refused

    def sample(self, ctx: Any, index: int = -1) -> int:
        """The token picked from the logits at `index` of the last batch (-1: its last logits)."""
        token = int(llama_cpp.llama_sampler_sample(self._free.sampler, ctx, index))
        self._one[0] = llama_cpp.llama_token_data(token, 0.0, 0.0)
        self._candidates.size, self._candidates.selected = 1, -1
        llama_cpp.llama_sampler_apply(self._check, ctypes.byref(self._candidates))
        if math.isinf(self._one[0].logit):
            self.refused += 1
            token = int(llama_cpp.llama_sampler_sample(self._full.sampler, ctx, index))  # accepts it too
        else:
            llama_cpp.llama_sampler_accept(self._full.sampler, token)
        llama_cpp.llama_sampler_accept(self._check, token)
        return token

    def close(self) -> None:
        if self._check:
            llama_cpp.llama_sampler_free(self._check)
            self._check = None
        self._free.close()
        self._full.close()
