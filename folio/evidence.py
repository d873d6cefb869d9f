"""How sure the lexical plane is of one question: the fusion's per-question weights, and feedback's say.

A hybrid ranking fuses two planes; which of them knows differs by question. The lexical plane says
how sure it is with the same numbers as the confidence band (lexical/scoring.confidence, calibrated
in docs/confidence.md), read over its own ranking: the share of the question's words the corpus
holds (missing words), the share of their idf mass its best record holds (doc_coverage) and how far
that record stands ahead of the next (separation). The semantic plane has no such number: its
cosine gap was measured not to tell a right first row from a wrong one (docs/confidence.md).

- decisive (every word known, one of them in at most RARE of the corpus's records, the best
  record holding at least 0.7 of their mass and standing SURE ahead of the next): a rare phrase,
  an identifier, the corpus's own words. The fused ranking follows the lexical plane: the
  semantic plane weighs STEP_BACK (0), and feedback (a second semantic pass moved toward the
  first pass's best) steps aside (ASIDE). On a corpus of fewer than 1/RARE records no word is
  rare: the band's floors call most questions grounded there, and following it would drop the
  semantic plane where word statistics cannot single a record out (docs/ranking.md).
- quoted (not decisive, but the best record holds at least half of the question's adjacent word
  pairs in their order, three at least, and twice as many as the next record: quoted.py): a
  sentence or phrase in the corpus's own words, where BM25F's separation is small because it
  counts words, not their order. The semantic plane weighs QUOTED_BACK (0.25) and feedback steps
  aside as for decisive (docs/ranking.md, "A question that quotes the corpus").
- unsure (a word the corpus lacks, or a best record holding under 0.7 of the mass, or no record
  at all): meaning may lead, the lexical plane weighing UNSURE.
- between: both planes at their weights (1 each).

Chosen on the labeled sets' `tune` halves and kept because the `held` halves gained too
(docs/ranking.md, "Per-question weights"); the unsure weight was not kept (it lost on `held`).

The identifier share (planes._weights) multiplies the semantic weight as before. Owns that rule and
its evaluation knobs (FOLIO_FUSION_SURE, FOLIO_FUSION_STEP_BACK, FOLIO_FUSION_UNSURE,
FOLIO_FUSION_ASIDE, FOLIO_FUSION_QUOTED, FOLIO_FUSION_QUOTED_BACK; bench/ranking_eval.py --env).
Must not rank, fuse, make rows, read files (quoted.py does) or print.
"""

from __future__ import annotations

from typing import NamedTuple

from folio.feedback import env_knob

# Measured on seven labeled sets, tune / held (docs/ranking.md, "Per-question weights"): following a
# decisive lexical plane outright (STEP_BACK 0, feedback aside) gained on both halves; RARE keeps
# a small corpus's rankings plain fusion. An unsure lexical plane keeps its weight (UNSURE 0.5 lost on held).
SURE = 0.2  # separation (S0 - S1) / S0 of the lexical plane's best two records that makes it decisive
STEP_BACK = 0.0  # the semantic plane's weight when the lexical plane is decisive
UNSURE = 1.0  # the lexical plane's weight when it is unsure
ASIDE = 1  # 1: feedback steps aside when the lexical plane is decisive
RARE = 0.02  # decisive only with a word in at most this share of the records (0: no such condition)
QUOTED = 0.5  # quoted: the best record holds this share of the question's word pairs in order (quoted.py; 0: never)
QUOTED_BACK = 0.25  # the semantic plane's weight when the question quotes the best lexical record


class Evidence(NamedTuple):
    weights: tuple | None  # (semantic, lexical) for fusion.fuse; None: 1 each
    decisive: bool  # the lexical plane is decisive: feedback steps aside
    state: str  # "decisive", "quoted", "unsure" or "between" ("" when not read)


def weigh(corpora: list, collections: list, question, lexical: list, identifiers=None) -> Evidence:
    """The question's fusion weights from the lexical plane's scores (per corpus, -inf where it
    ranks no record; `collections`: each corpus's (lexical Collection, live mask), planes.collection)
    and the identifier weights (planes._weights: (semantic, lexical) or None)."""
    ws, wl = identifiers or (1.0, 1.0)
    aside = env_knob("FOLIO_FUSION_ASIDE", int, ASIDE) == 1
    back, unsure = env_knob("FOLIO_FUSION_STEP_BACK", float, STEP_BACK), env_knob("FOLIO_FUSION_UNSURE", float, UNSURE)
    if not aside and back == 1.0 and unsure == 1.0:
        return Evidence(identifiers, False, "")  # nothing would follow from the evidence: not read
    state = _state(corpora, collections, question, lexical)
    if state == "decisive":
        ws *= back
    elif state == "quoted":
        ws *= env_knob("FOLIO_FUSION_QUOTED_BACK", float, QUOTED_BACK)
    elif state == "unsure":
        wl *= unsure
    weights = None if (ws, wl) == (1.0, 1.0) else (ws, wl)
    return Evidence(weights, state in ("decisive", "quoted") and aside, state)


def _state(corpora: list, collections: list, question, lexical: list) -> str:
    import numpy as np

    from folio.lexical import scoring

    best = []  # (score, corpus, slot) of each corpus's best two records
    for c, d in enumerate(lexical):
        best += [(float(d[s]), c, s) for s in _best_two(d) if np.isfinite(d[s])]
    best.sort(reverse=True)
    if not best:
        return "unsure"
    c, slot = best[0][1], best[0][2]
    col, live = collections[c]
    block = scoring.confidence(question.text, [slot], np.array([s for s, _c, _s in best[:2]]), col.segments, live,
                               separation_floor=env_knob("FOLIO_FUSION_SURE", float, SURE),
                               doc_coverage_floor=scoring.DEFAULT_DOC_COVERAGE_FLOOR, col=col,
                               terms=question.distinct)  # the question as analysed once
    state = {"grounded": "decisive", "weak": "between"}.get(block["band"], "unsure")
    if state == "decisive" and not _rare(col, question.distinct, env_knob("FOLIO_FUSION_RARE", float, RARE)):
        state = "between"  # every word common in this corpus (a small corpus: every word is)
    if state != "decisive" and _quotes(corpora, question, [(c, s) for _score, c, s in best[:2]]):
        return "quoted"
    return state


def _quotes(corpora: list, question, best: list) -> bool:
    """Whether the lexical plane's best record holds the question's words in their order: at
    least quoted.MIN_PAIRS of its adjacent word pairs and QUOTED of them, and twice as many as
    the next record holds (quoted.py)."""
    from folio import quoted

    share = env_knob("FOLIO_FUSION_QUOTED", float, QUOTED)
    wanted = quoted.pairs(question.terms)
    if share <= 0 or len(wanted) < quoted.MIN_PAIRS:
        return False
    counts = quoted.held(corpora, best, wanted) + [0]
    return counts[0] >= max(quoted.MIN_PAIRS, share * len(wanted)) and counts[0] >= 2 * counts[1]


def _best_two(d) -> list[int]:
    """The slots of `d`'s two highest scores, the lower slot first among equal ones: argmax over
    the array and over the two views beside the best (an argpartition of a 525k-slot array cost
    ~16 ms of a warm query; these passes, ~1 ms)."""
    if len(d) <= 2:
        return list(range(len(d)))
    i = int(d.argmax())
    beside = ([int(d[:i].argmax())] if i else []) + ([i + 1 + int(d[i + 1:].argmax())] if i + 1 < len(d) else [])
    return [i, max(beside, key=lambda s: (d[s], -s))]


def _rare(col, terms, share: float) -> bool:
    """Whether one of the question's words is in at most `share` of the corpus's records (and in
    one at least): on a corpus of fewer than 1/share records none is."""
    if share <= 0:
        return True
    return any(0 < col.df(term) <= share * col.N for _surface, term in terms)
