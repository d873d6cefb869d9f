"""An agent's facets: the words the answer likely holds, and a passage written as the answer would be.

A coding agent is a language model: beside its question it can say which words the answer probably
contains (`words`) and what the answer would look like (`passage`, repeatable). Each facet is one
more rank list fused with the question's (fusion.Facet): the words rank in the lexical plane as one
BM25F query (a quoted phrase counts as its words: the index holds no positions); the passages are
embedded as documents in the question's one request and rank in the semantic plane by the mean of
their vectors (HyDE's way: one more column of the one scan). The weights are chosen on the labeled
sets' tune halves and kept only where the held halves agree (docs/ranking.md).

Owns the facets' checks (refused before any request, in one sentence naming the fix: an empty facet,
or words that analyse to no term), their
weights (FOLIO_FACET_WEIGHTS, `words=W,passage=W`, is for evaluation: bench/ranking_eval.py) and
which facets a mode ranks. Must not embed, scan, rank or print.
"""

from __future__ import annotations

import os

WORDS, PASSAGE = "words", "passage"
WEIGHTS = {WORDS: 1.0, PASSAGE: 1.0}  # each facet's weight in the fusion, the question's planes weighing 1


def problem(text: str, words: str | None, passages: tuple[str, ...], *, cli: bool) -> str | None:
    """Why a question and its facets cannot be asked (one sentence with the fix), or None: an empty
    question never is (it would rank every section alike and answer confidently). `cli`:
    the facets named as `folio query`'s options, else as the MCP query tool's arguments."""
    w, p = ("--words", "--passage") if cli else ("words", "passage")
    if not text.strip() and words is None and not passages:  # an unset variable, most likely
        example = 'folio query "how do retries back off?"' if cli else '{"query": "how do retries back off?"}'
        return f"the question is empty: say what you are looking for, e.g. {example}"
    if words is None and not passages:
        return None
    if not text.strip():
        example = ('folio query "how do retries back off?" --words "retry backoff"' if cli else
                   '{"query": "how do retries back off?", "words": "retry backoff"}')
        return (f"the question is empty: {w} and {p} rank beside a question, never alone; give the question too, "
                f"e.g. {example}")
    if words is not None and not words.strip():
        return f"{w} is empty: give the words the answer likely holds (e.g. {w} \"retry backoff\"), or leave it out"
    if words is not None:
        from folio.lexical.analysis import analyze

        if not analyze(words):  # as good as empty: no term to rank by (it would be named in `facets`, ranking nothing)
            return (f"{w} holds no word to rank by (only punctuation, or common words such as \"the\", which the "
                    f"word ranking leaves out): give the words the answer likely holds (e.g. {w} \"retry backoff\"), "
                    f"or leave it out")
    if any(not x.strip() for x in passages):
        return (f"a {p} is empty: give a few sentences written as the answering section would be, or leave "
                f"{p} out")
    return None


def in_force(mode: str, words: str | None, passages: tuple[str, ...]) -> tuple[bool, bool, list[str]]:
    """(whether the words rank, whether the passages rank, notices for a facet left out) in `mode`:
    the words need the lexical plane, the passages the semantic one."""
    use_words = words is not None and mode != "semantic"
    use_passages = bool(passages) and mode != "lexical"
    notices = []
    if words is not None and not use_words:
        notices.append("(the words were left out: this query ranks by meaning only, and words rank by the words "
                       "themselves; leave out --mode semantic to use them)")
    if passages and not use_passages:
        notices.append("(the passage was left out: this query ranks lexically, and a passage ranks by meaning)")
    return use_words, use_passages, notices


def weight(name: str) -> float:
    """A facet's fusion weight: WEIGHTS, or FOLIO_FACET_WEIGHTS's value for it (evaluation)."""
    for part in os.environ.get("FOLIO_FACET_WEIGHTS", "").split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip() == name:
            try:
                return float(value)
            except ValueError:
                break
    return WEIGHTS[name]


def mean_vector(vectors):
    """The passages' one query vector: the mean of their unit vectors, unit length."""
    import numpy as np

    v = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    norm = np.linalg.norm(v)
    return (v / norm if norm > 0 else np.asarray(vectors[0], dtype=np.float64)).astype(np.float32)
