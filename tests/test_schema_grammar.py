"""The grammar a JSON Schema becomes (app/engine/llama/schema_grammar.py), read by llama.cpp's own grammar
sampler over the demo model's vocabulary: every text it lets through validates against the schema, and
for bounded integers, exactly the integers in range get through. No model is run: the vocabulary alone."""

from __future__ import annotations

import ctypes
import json
import math
import random
from collections.abc import Iterator
from typing import Any

import llama_cpp
import pytest
from jsonschema import Draft202012Validator

from app.engine.llama.schema_grammar import to_gbnf
from app.schema_exact import format_checker
from app.schema_limits import CostlySchema, check_cost
from tests.engine_host import vocab_only


class Grammar:
    """One schema's grammar in llama.cpp's sampler: which texts it accepts, and random texts it writes."""

    def __init__(self, llm: Any, schema: dict[str, Any]) -> None:
        self.llm, self.gbnf = llm, to_gbnf(schema)
        self.valid = Draft202012Validator(schema, format_checker=format_checker()).is_valid
        self._one = (llama_cpp.llama_token_data * 1)()
        self._candidates = llama_cpp.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)

    def _sampler(self) -> Any:
        sampler = llama_cpp.llama_sampler_init_grammar(self.llm._model.vocab, self.gbnf.encode(), b"root")
        assert sampler, f"llama.cpp refused the grammar:\n{self.gbnf}"
        return sampler

    def _allows(self, sampler: Any, token: int) -> bool:
        self._one[0] = llama_cpp.llama_token_data(token, 0.0, 0.0)
        self._candidates.size, self._candidates.selected = 1, -1
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(self._candidates))
        return not math.isinf(self._one[0].logit)

    def token(self, char: str) -> int:
        tokens = self.llm.tokenize(char.encode(), add_bos=False, special=False)
        assert len(tokens) == 1, f"{char!r} is {len(tokens)} tokens"
        return int(tokens[0])

    def accepts(self, text: str) -> bool:
        """Whether the grammar lets `text` through whole, one character's token at a time, and then lets it end."""
        sampler = self._sampler()
        try:
            for char in text:
                if not self._allows(sampler, token := self.token(char)):
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return self._allows(sampler, self.llm.token_eos())
        finally:
            llama_cpp.llama_sampler_free(sampler)

    def walks(self, alphabet: str, count: int, seed: int = 0) -> Iterator[str]:
        """Texts written by choosing, at random, among the characters of `alphabet` the grammar allows
        next (or the end, where it allows that)."""
        chance = random.Random(seed)
        tokens = {char: self.token(char) for char in alphabet}
        for _ in range(count):
            sampler, text = self._sampler(), ""
            try:
                while len(text) < 40:
                    allowed = [c for c, t in tokens.items() if self._allows(sampler, t)]
                    if self._allows(sampler, self.llm.token_eos()) and (not allowed or chance.random() < 0.3):
                        break
                    assert allowed, f"the grammar is stuck after {text!r}"
                    char = chance.choice(allowed)
                    llama_cpp.llama_sampler_accept(sampler, tokens[char])
                    text += char
            finally:
                llama_cpp.llama_sampler_free(sampler)
            yield text


@pytest.fixture(scope="module")
def llm() -> Any:
    return vocab_only()  # closes an engine this process holds on the engine cards (tests/engine_host.py)


INTEGER_RANGES = [
    {"type": "integer", "minimum": 3, "maximum": 7},
    {"type": "integer", "minimum": 15, "maximum": 240},  # the issue's `minutes`
    {"type": "integer", "minimum": -123, "maximum": 4567},
    {"type": "integer", "exclusiveMinimum": 15.5, "exclusiveMaximum": 1000},
    {"type": "integer", "minimum": -5},
    {"type": "integer", "maximum": -17},
    {"type": "integer", "minimum": 0, "maximum": 0},
    {"type": "integer", "minimum": -1000, "maximum": -999},
]


@pytest.mark.parametrize("schema", INTEGER_RANGES, ids=lambda s: json.dumps(s)[20:-1])
def test_exactly_the_integers_in_range_are_accepted(llm: Any, schema: dict[str, Any]) -> None:
    grammar = Grammar(llm, schema)
    edges = [sign * (10**k + d) for k in range(1, 16) for d in (-1, 0, 1) for sign in (1, -1)]
    wrong = [i for i in [*range(-1100, 1101), 4566, 4567, 4568, *edges] if grammar.accepts(str(i)) != grammar.valid(i)]
    assert wrong == [], f"{schema}: accepted ≠ valid for {wrong[:20]}\n{grammar.gbnf}"
    assert not grammar.accepts("-0") and not grammar.accepts("007")  # one way to write each integer


@pytest.mark.parametrize("schema", INTEGER_RANGES[:6], ids=lambda s: json.dumps(s)[20:-1])
def test_what_an_integer_grammar_writes_at_random_validates(llm: Any, schema: dict[str, Any]) -> None:
    grammar = Grammar(llm, schema)
    written = list(grammar.walks("-0123456789", 150))
    assert [t for t in written if not grammar.valid(json.loads(t))] == [], grammar.gbnf
    assert len(set(written)) > 3, f"the walks wrote only {set(written)}"


@pytest.mark.parametrize(
    ("schema", "inside"),
    [
        ({"type": "number", "minimum": 0, "maximum": 1}, ["0", "1", "0.5", "0.999"]),
        ({"type": "number", "exclusiveMinimum": 0}, ["0.5", "12", "3.25"]),
        ({"type": "number", "minimum": -2.5, "maximum": 10}, ["-1.5", "-2", "9.75", "10"]),
        ({"type": "number", "exclusiveMaximum": 0}, ["-0.5", "-3"]),
    ],
)
def test_bounded_numbers_validate_and_leave_room(llm: Any, schema: dict[str, Any], inside: list[str]) -> None:
    grammar = Grammar(llm, schema)
    for text in inside:
        assert grammar.accepts(text), f"{text} refused by {schema}"
    for text in ["-0.5", "1.5", "2", "0", "-3", "10.5", "11", "-2.75"]:
        if grammar.accepts(text):
            assert grammar.valid(json.loads(text)), f"{text} accepted by {schema}"
    assert [t for t in grammar.walks("-0123456789.", 150, seed=1) if not grammar.valid(json.loads(t))] == []


def test_formats_are_real_dates_times_uuids_and_addresses(llm: Any) -> None:
    cases: dict[str, tuple[list[str], list[str]]] = {
        "date": (["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01"], ["2023-02-29", "1900-02-29", "2023-04-31"]),
        "time": (["23:59:59Z", "08:30:00.250+02:00"], ["24:00:00Z", "12:60:00Z", "12:00:00"]),
        "date-time": (["2024-02-29T12:00:00Z"], ["2023-02-29T12:00:00Z", "2024-01-01 12:00:00Z"]),
        "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
        "email": (["ada@example.org"], ["ada.example.org"]),
        "ipv4": (["255.255.255.255", "10.0.0.1"], ["256.1.1.1", "01.2.3.4", "1.2.3"]),
    }
    for name, (good, bad) in cases.items():
        grammar = Grammar(llm, {"type": "string", "format": name})
        for text in good:
            assert grammar.accepts(json.dumps(text)) and grammar.valid(text), f"{name}: {text} refused"
        for text in [*bad, "0000-01-01"]:
            assert not grammar.accepts(json.dumps(text)), f"{name}: {text} accepted"


def test_strings_keep_their_lengths_and_stay_valid_json(llm: Any) -> None:
    grammar = Grammar(llm, {"type": "string", "minLength": 2, "maxLength": 4})
    assert [n for n in range(7) if grammar.accepts(json.dumps("a" * n))] == [2, 3, 4]
    plain = Grammar(llm, {"type": "string"})
    assert plain.accepts('"a b"') and not plain.accepts('"a\nb"')  # a raw control character is not JSON
    assert plain.accepts('"\\u00e9"') and not plain.accepts('"\\ud800"')  # nor is a lone surrogate text


def test_enum_type_lists_and_arrays_keep_their_bounds(llm: Any) -> None:
    assert not Grammar(llm, {"type": "integer", "enum": [1, 5, 100], "maximum": 10}).accepts("100")
    nullable = Grammar(llm, {"type": ["integer", "null"], "minimum": 1, "maximum": 3})
    assert [t for t in ["null", "0", "1", "3", "4"] if nullable.accepts(t)] == ["null", "1", "3"]
    listed = Grammar(llm, {"type": "array", "minItems": 2, "maxItems": 3})
    assert [n for n in range(5) if listed.accepts(json.dumps([1] * n))] == [2, 3]
    required = Grammar(llm, {"type": "object", "properties": {}, "required": ["id"]})
    assert required.accepts('{"id": 1}') and not required.accepts("{}")


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "integer", "minimum": 8, "maximum": 7}, "/minimum"),
        ({"type": "integer", "exclusiveMinimum": 7, "exclusiveMaximum": 8}, "/exclusiveMinimum"),
        (
            {"type": "object", "properties": {"n": {"type": "number", "minimum": 2, "exclusiveMaximum": 2}}},
            "/properties/n/minimum",
        ),
        ({"type": "string", "minLength": 5, "maxLength": 4}, "/minLength"),
        ({"type": "array", "items": {"enum": [1, 2], "minimum": 3}}, "/items/enum"),
        ({"type": "object", "required": ["a"], "properties": {}, "additionalProperties": False}, "/required"),
    ],
)
def test_a_schema_no_answer_can_meet_is_refused_naming_the_keyword(schema: dict[str, Any], pointer: str) -> None:
    with pytest.raises(CostlySchema) as refused:
        check_cost(schema, where="response_format.json_schema.schema")
    assert refused.value.pointer == pointer and "no answer can meet it" in refused.value.message
