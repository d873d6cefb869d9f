"""Hybrid ranking: the semantic and the lexical ranking fused by how far each stands a record out of
its own best, and any further named rank list with them (an agent's facets: facets.py).

Pure numpy over score arrays (one float per slot, -inf where a list does not rank the record):
no store, no network, no printing.

Each list's scores are read in its own units (`Unit`): z = (score - mean) / spread over the list's
best N scores (a BM25 list's best N count the candidates it does not rank, at 0). A record's share
from the list is softplus(z), SOFT x log(1 + exp(z / SOFT)): about z above the mean, bending to 0
below it, never negative; 0 where the list ranks nothing. The fused score is the weighted sum of
the shares. A list that is sure of a record (a lexical #1 far above the rest: a rare phrase, an
identifier, the corpus's own words) gives it many spreads; a list whose best scores sit close
together (meaning that finds nothing in particular, words that half match) gives each little, so
the fusion follows the list that stands a record out. Reciprocal-rank fusion (RRF, k = 60), used
until then, gave every list's #1 the same 1/61 whatever its margin; on the labeled sets' held-out
halves the shares lift MRR@10 0.702 -> 0.732 (docs/ranking.md, "Fused by each plane's spreads").

Scores are read at 6 decimals, as `ranks` compares them, and every path sums the shares in one
order (combine, total), so the windowed path at scale (window.py) and feedback's second pass give
the same bits. Each list's full ranking is still one argsort over its finite scores (the ranks a
row shows), and its unit one partition of its best N: never a Python loop over records.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

N = 1000  # a list's best N scores set its mean and spread (window.SIZE: the windows hold them)
SOFT = 0.5  # how sharply a share bends to 0 below the mean (chosen on the tuning halves: docs/ranking.md)
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


class Unit(NamedTuple):
    """A list's unit: a score's standing is z = (score - mean) / spread over the list's best N, and
    its share softplus: SOFT x log(1 + exp(z / SOFT)), about z above the mean, near 0 below it and
    never negative; 0 where the list ranks nothing."""
    mean: float
    spread: float

    @classmethod
    def of(cls, best: np.ndarray, room: int | None = None, n: int = N) -> Unit:
        """From the list's best min(n, its count) scores at 6 decimals, ascending (`best`) and, for a
        BM25 list, how many candidates it could rank (`room`: a candidate sharing no word with it
        scores 0 there, so the best n count those zeros too: a word found in one section of
        thousands stands it far out). Both paths pass the same array: the shares are bit for bit
        alike."""
        zeros = max(0, min(n, room) - len(best)) if room is not None else 0
        values = np.concatenate([np.zeros(zeros), best.astype(np.float64)]) if zeros else best.astype(np.float64)
        if not len(values):
            return cls(0.0, 1.0)
        spread = float(values.std())
        return cls(float(values.mean()), spread if spread > 0 else 1.0)  # one score, or all alike: one unit

    def shares(self, rounded: np.ndarray) -> np.ndarray:
        """float64 share per score (scores at 6 decimals; -inf: unranked)."""
        x = rounded.astype(np.float64)
        ranked = np.isfinite(x)
        z = (np.where(ranked, x, self.mean) - self.mean) / self.spread
        return np.where(ranked, SOFT * np.logaddexp(0.0, z / SOFT), 0.0)


def unit(rounded: np.ndarray, room: int | None = None, n: int = N) -> Unit:
    """A list's Unit from all its scores at 6 decimals (-inf: unranked); `room` as Unit.of."""
    finite = rounded[np.isfinite(rounded)]
    best = np.sort(np.partition(finite, len(finite) - n)[len(finite) - n:]) if len(finite) > n else np.sort(finite)
    return Unit.of(best, room, n)


def combine(shares: list[np.ndarray], weights) -> np.ndarray:
    """float64 weighted sum of aligned shares, in list order: the `rest` of a fused score, every
    list's share but the question's semantic one (fused = total(semantic share, its weight, rest))."""
    out = np.zeros(len(shares[0]) if shares else 0, dtype=np.float64)
    for x, w in zip(shares, weights, strict=True):
        out += w * x
    return out


def fused_of(shares: list, r: list, kinds: tuple, waiting, weights) -> tuple[np.ndarray, np.ndarray]:
    """(float32 fused scores, float64 rest) of aligned records from each list's shares and ranks
    (`r`, 0 = unranked): in a semantic list (`kinds`), a record with no vector yet (`waiting`, or
    None) takes its lexical share; a record no list ranks is -inf. The full path (fuse) and the
    windows (window.py) both fuse here, so their scores agree bit for bit."""
    if waiting is not None:
        shares = [np.where(waiting & (x == 0), shares[1], s) if sem else s  # 0 where words miss it too
                  for s, x, sem in zip(shares, r, kinds, strict=True)]
    rest = combine(shares[1:], weights[1:])
    fused = total(shares[0], weights[0], rest)
    np.putmask(fused, ~np.logical_or.reduce([x > 0 for x in r]), np.float32(-np.inf))
    return fused, rest


def total(semantic_share, weight: float, rest) -> np.ndarray:
    """The fused score, float32: every path (fuse, feedback's second pass, the windows) adds the
    question's semantic share to the rest this way, so their scores agree bit for bit."""
    return (weight * semantic_share + rest).astype(np.float32)


class Facet(NamedTuple):
    """A further rank list fused with the question's two (an agent's facet, facets.py): its name (the
    key of a row's rank in --json), its scores per corpus as the planes give them, its weight, and
    whether it is a semantic list (a record with no vector yet takes the question's lexical share
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


def fuse(semantic: list[np.ndarray], lexical: list[np.ndarray], *,
         unjudged: list | None = None, weights=None, more=(), candidates: int = 0) -> tuple[list, list, np.ndarray]:
    """One fused ranking over every queried corpus.

    semantic, lexical: per corpus, a score per slot (-inf = not ranked by that plane; the arrays
    of a corpus may differ in length). The planes rank all corpora together, as the other
    modes do. unjudged: per corpus, a bool per slot for the candidates the semantic plane cannot
    judge (no vector yet): their lexical share stands in for the semantic one (in every semantic
    list), so a half-built index ranks them by the plane that can (one share where every embedded
    section gets two would bury them). weights: (semantic, lexical), default 1 each. more:
    further rank lists (Facet), fused with the same arithmetic at their own weights. candidates:
    how many records the lists rank among (a BM25 list's best N count the candidates sharing no
    word with it, at 0: Unit.of). Returns
    (fused scores per corpus, float32, -inf where no list ranks a record; per corpus an (N, n)
    int32 array of component ranks in names(more) order, 0 = not ranked: each list's own ranks,
    never the stand-ins; the joined float64 sum of every list's weighted share but the question's
    semantic one, for feedback's second pass).
    """
    lists = [semantic, lexical, *(f.scores for f in more)]
    lengths = [max(len(s[c]) for s in lists) for c in range(len(semantic))]
    joined = [np.round(_joined([_pad(s, n) for s, n in zip(scores, lengths, strict=True)]), 6) for scores in lists]
    r = [ranks(x) for x in joined]
    kinds = (True, False, *(f.semantic for f in more))
    shares = [unit(x, None if sem else candidates).shares(x) for x, sem in zip(joined, kinds, strict=True)]
    u = None if unjudged is None else _joined([_pad(m, n, False) for m, n in zip(unjudged, lengths, strict=True)])
    u = u if u is not None and u.any() else None  # an index with every vector: no stand-ins to place
    fused, rest = fused_of(shares, r, kinds, u, all_weights(weights, more))
    both = np.stack(r)
    cuts = np.cumsum([0] + lengths)
    return ([fused[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)],
            [both[:, a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)], rest)


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
