"""Hybrid ranking: reciprocal-rank fusion of the semantic and the lexical ranking, and of any
further named rank list (an agent's facets: facets.py).

Pure numpy over score arrays (one float per slot, -inf where a list does not rank the record):
no store, no network, no printing. Each list's full ranking is one argsort over its finite
scores, so fusion costs one sort per list whatever the corpus size, and never a Python loop over
records.

RRF (Cormack, Clarke and Buettcher, 2009): fused = sum over lists of weight / (K + rank), rank
1-based within the list; a list that does not rank a record adds nothing. K = 60 is the paper's
constant. bench/hybrid.py also tries k = 10 / 200 and a weighted sum of min-max-normalised scores
as a diagnostic on its own question set (docs/benchmarks.md); a weighted sum looked better there,
but it was picked on the same questions, so RRF stays until a held-out set says otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

K = 60
PLANES = ("semantic", "lexical")


def ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of every entry by descending score (int32); 0 where the score is -inf (unranked).

    Equal scores share the best rank among them (1, 2, 2, 4), so a tie stays a tie in the fused
    score whatever slots the records sit in, and search orders it by path and line.
    """
    scores = np.round(np.asarray(scores), 6)  # alike as printed: a BLAS product's ulp is no ranking
    out = np.zeros(len(scores), dtype=np.int32)
    idx = np.flatnonzero(np.isfinite(scores))
    if len(idx):
        neg = -scores[idx]
        order = np.argsort(neg)  # a rank counts the better entries: the order within a tie is moot
        v = neg[order]
        # each entry's rank is 1 + where its run of equal scores starts in the sorted order
        start = np.zeros(len(v), dtype=np.int32)
        start[1:] = np.where(v[1:] != v[:-1], np.arange(1, len(v), dtype=np.int32), 0)
        out[idx[order]] = 1 + np.maximum.accumulate(start)
    return out


def rrf(rank_arrays: list[np.ndarray], k: int = K, weights=None) -> np.ndarray:
    """float32 fused scores from aligned rank arrays (0 = unranked); -inf where no plane ranked.
    `weights`: one per plane (default 1 each): a plane adds weight / (k + rank)."""
    fused = np.zeros(len(rank_arrays[0]), dtype=np.float64)
    seen = np.zeros(len(rank_arrays[0]), dtype=bool)
    term = np.empty(len(rank_arrays[0]), dtype=np.float64)
    for r, w in zip(rank_arrays, weights or [1.0] * len(rank_arrays), strict=True):
        hit = r > 0
        # in place where ranked (no gathered copies): the same sum, term by term, in float64
        np.add(r, k, out=term, dtype=np.float64)
        np.divide(w, term, out=term)
        np.add(fused, term, out=fused, where=hit)
        seen |= hit
    out = fused.astype(np.float32)
    np.putmask(out, ~seen, np.float32(-np.inf))
    return out


class Facet(NamedTuple):
    """A further rank list fused with the question's two (an agent's facet, facets.py): its name (the
    key of a row's rank in --json), its scores per corpus as the planes give them, its weight, and
    whether it is a semantic list (a record with no vector yet takes the question's lexical rank
    there, as it does in the question's semantic list)."""
    name: str
    scores: list
    weight: float = 1.0
    semantic: bool = False


def names(more=()) -> tuple[str, ...]:
    """The rank lists fuse returns, in order: the question's two planes, then each facet."""
    return PLANES + tuple(f.name for f in more)


def all_weights(weights, more=()) -> tuple[float, ...]:
    """One weight per rank list of `names(more)`: the (semantic, lexical) pair (default 1 each),
    then each facet's."""
    return (*(weights or (1.0, 1.0)), *(f.weight for f in more))


def fuse(semantic: list[np.ndarray], lexical: list[np.ndarray], k: int = K, *,
         unjudged: list | None = None, weights=None, more=()) -> tuple[list, list]:
    """One fused ranking over every queried corpus.

    semantic, lexical: per corpus, a score per slot (-inf = not ranked by that plane; the arrays
    of a corpus may differ in length). The planes rank all corpora together, as the other
    modes do. unjudged: per corpus, a bool per slot for the candidates the semantic plane cannot
    judge (no vector yet): their lexical rank stands in for the semantic one (in every semantic
    list), so a half-built index ranks them by the plane that can (RRF would give them one term
    where every embedded section gets two). weights: (semantic, lexical), default 1 each. more:
    further rank lists (Facet), fused with the same arithmetic at their own weights. Returns
    (fused scores per corpus, per corpus an (N, n) int32 array of component ranks in
    names(more) order, 0 = not ranked: each list's own ranks, never the stand-ins).
    """
    lists = [semantic, lexical, *(f.scores for f in more)]
    lengths = [max(len(s[c]) for s in lists) for c in range(len(semantic))]
    r = [ranks(_joined([_pad(s, n) for s, n in zip(scores, lengths, strict=True)])) for scores in lists]
    stood = list(r)
    if unjudged is not None:
        u = _joined([_pad(m, n, False) for m, n in zip(unjudged, lengths, strict=True)])
        for i, semantic_list in enumerate((True, False, *(f.semantic for f in more))):
            if semantic_list and (u & (r[i] == 0)).any():
                stood[i] = np.where(u & (r[i] == 0), r[1], r[i])
    fused = rrf(stood, k, list(all_weights(weights, more)))
    both = np.stack(r)
    cuts = np.cumsum([0] + lengths)
    return ([fused[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)],
            [both[:, a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)])


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """One array of every corpus's scores (one corpus: its own, read only here, not a copy)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _pad(scores: np.ndarray, n: int, fill=-np.inf) -> np.ndarray:
    scores = np.asarray(scores, dtype=bool if fill is False else np.float32)
    if len(scores) == n:
        return scores
    out = np.full(n, fill, dtype=scores.dtype)
    out[:min(len(scores), n)] = scores[:n]
    return out
