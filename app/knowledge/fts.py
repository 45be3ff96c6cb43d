"""Full-text side of search: a question into an FTS5 query over the trigram index.

The trigram tokenizer finds any substring of three or more characters, which is what Chinese needs
(no spaces between words). A question is cut into terms: words of three or more letters (common
English and German function words dropped) and the 3-, 4- and 5-character windows of each run of
Chinese characters (question words such as 什么 removed first). The rarest terms, within a budget of
chunks they can match, are OR-ed and ranked by BM25, so a query costs a few milliseconds however
large the index. Questions with no term that long (一两个字, "AI") fall back to a LIKE scan.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable

from app.knowledge.script import CJK_RANGES, is_cjk
from app.knowledge.store import KnowledgeStore

_WORD = rf"[^\W_{CJK_RANGES}]"
_TERM = re.compile(rf"[{CJK_RANGES}]+|{_WORD}(?:[._\-]?{_WORD})*")  # keeps Q4_K_M, llama.cpp, rpc-server whole
_CJK_WINDOWS = (3, 4, 5)
_QUESTION_WORDS = re.compile(r"是什么|是多少|为什么|什么|怎么样|怎么|多少|哪些|哪个|哪里|如何|是否|有没有|请问|吗|呢")
_FUNCTION_WORDS = (
    "the and for are was were what which who whom how does did with that this from have has had not but you your "
    "into about there their when where why can could will would its his her they them than then also such any all "
    "one our out use used using between much many most more some other been being is it of in on to a an "
    "der die das und ist ein eine einer den dem des mit von für auf wie was wer welche welcher sich nicht auch als "
    "bei aus zum zur im wird werden sind"
)
_STOPWORDS = frozenset(_FUNCTION_WORDS.split())
_MAX_TERMS = 96
_SCORED_TERMS = 32
_MATCH_BUDGET = 5_000
_IN_DOCUMENTS = "document_id IN (SELECT value FROM json_each(?))"


def terms(question: str) -> tuple[list[str], list[str]]:
    """(terms for the trigram index, short terms for a LIKE scan).

    A run of Chinese characters gives its 3-, 4- and 5-character windows: a chunk that shares a
    longer stretch of the question matches more terms, which BM25 rewards like a phrase match.
    """
    long_terms: list[str] = []
    short_terms: list[str] = []
    question = unicodedata.normalize("NFKC", question)
    for run in _TERM.findall(_QUESTION_WORDS.sub(" ", question)):
        if is_cjk(run[0]):
            if len(run) < 3:
                short_terms.append(run)
            for size in _CJK_WINDOWS:
                long_terms.extend(run[i : i + size] for i in range(len(run) - size + 1))
        elif run.lower() not in _STOPWORDS:
            (long_terms if len(run) >= 3 else short_terms).append(run)
    unique = list(dict.fromkeys(t.lower() for t in long_terms))
    return unique[:_MAX_TERMS], list(dict.fromkeys(short_terms))


def text_search(store: KnowledgeStore, question: str, *, limit: int, documents: set[int] | None) -> list[int]:
    """Chunk ids that match `question`, best first."""
    long_terms, short_terms = terms(question)
    if long_terms:
        selected = _selective(store, long_terms)
        if not selected:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in selected)
        if documents is None:
            sql = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts) LIMIT ?"
            return [row[0] for row in store.query(sql, [match, limit])]
        sql = (
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN "
            f"(SELECT id FROM chunks WHERE {_IN_DOCUMENTS}) ORDER BY bm25(chunks_fts) LIMIT ?"
        )
        return [row[0] for row in store.query(sql, [match, _json(documents), limit])]
    if not short_terms:
        return []
    likes = [f"%{_escape(t)}%" for t in short_terms]
    matched = " + ".join("(text LIKE ? ESCAPE '\\')" for _ in likes)
    scope, scope_args = (f" AND {_IN_DOCUMENTS}", [_json(documents)]) if documents is not None else ("", [])
    sql = f"SELECT id FROM chunks WHERE ({matched}) > 0{scope} ORDER BY ({matched}) DESC, id LIMIT ?"
    return [row[0] for row in store.query(sql, [*likes, *scope_args, *likes, limit])]


def _selective(store: KnowledgeStore, long_terms: list[str]) -> list[str]:
    """The terms worth scoring: the rarest first, as long as the chunks they can match stay within a
    budget (BM25 costs about a microsecond per matching chunk). Terms no chunk holds are dropped. This
    bounds a query's cost however large the index grows; the terms left out are the most common ones,
    which BM25 weighs least (a question made only of them is left to the vector side)."""
    grams = {t: [t[i : i + 3] for i in range(len(t) - 2)] for t in long_terms}
    counts = store.trigram_counts(sorted({g for gs in grams.values() for g in gs}))
    held = {t: min(counts.get(g, 0) for g in gs) for t, gs in grams.items()}  # at most this many chunks
    selected: list[str] = []
    matched = 0
    for term in sorted((t for t in long_terms if held[t] > 0), key=lambda t: held[t]):
        if len(selected) == _SCORED_TERMS:
            break
        if matched + held[term] <= _MATCH_BUDGET:
            selected.append(term)
            matched += held[term]
    return selected


def _json(values: Iterable[object]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _escape(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
