"""JSON-schema constrained answers: the schema becomes a llama.cpp grammar, checked before use."""

from __future__ import annotations

import json

import jsonschema
import llama_cpp
from llama_cpp.llama_grammar import LlamaGrammar

from app.engine.events import EngineError


def grammar_for(json_schema: str | None, vocab: object) -> LlamaGrammar | None:
    """llama.cpp's grammar for a JSON schema, checked before it reaches the sampler chain (a grammar
    llama cannot parse gives a NULL sampler there, and a segfault instead of an error)."""
    if json_schema is None:
        return None
    try:
        jsonschema.validators.validator_for(schema := json.loads(json_schema)).check_schema(schema)
        grammar = LlamaGrammar.from_json_schema(json_schema, verbose=False)
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
