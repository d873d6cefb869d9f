"""Pseudo-relevance feedback on the semantic plane: vector Rocchio from the first pass's best records.

After the first ranking, the question's vector moves toward the mean of the vectors of the TOP best
records (by the fused score in hybrid mode, by cosine in semantic mode): q' = q + WEIGHT x mean,
renormalised to unit length. No second request to the server: the vectors are the index's own
rows. The semantic plane then ranks again with q', over the first pass's candidate pool (every
record either plane put in its best POOL) or, with POOL 0, over every candidate (a second scan of
the matrix); hybrid fuses that ranking with the unchanged lexical one.

Owns whether feedback applies to a question and with what knobs (the `feedback` setting; the
FOLIO_FEEDBACK_TOP, FOLIO_FEEDBACK_WEIGHT and FOLIO_FEEDBACK_POOL variables are for evaluation,
bench/ranking_eval.py), the moved vector and the second semantic ranking. Must not embed, make
rows or print; numpy is imported inside the functions that rank.
"""

from __future__ import annotations

import os
from typing import NamedTuple

TOP = 3  # records whose vectors the question moves toward
WEIGHT = 1.0  # how far: q + WEIGHT x their mean
POOL = 1000  # the second pass rescores the records either plane ranked in its best POOL (0: every candidate)


class Knobs(NamedTuple):
    top: int = TOP
    weight: float = WEIGHT
    pool: int = POOL
    keep: bool = False  # evaluation: fuse the first semantic ranking too (three rankings), not replace it
    source: str = "fused"  # evaluation: the best records by the fused ranking, or by the semantic one


def knobs(value: str, mode: str) -> Knobs | None:
    """The feedback a question ranked in `mode` gets under the `feedback` setting's value, or None.

    auto (the default): hybrid ranking only; on: hybrid and semantic; off: never. Lexical ranking
    has no vectors to move."""
    if mode == "lexical" or value == "off" or (value == "auto" and mode != "hybrid"):
        return None
    return Knobs(env_knob("FOLIO_FEEDBACK_TOP", int, TOP), env_knob("FOLIO_FEEDBACK_WEIGHT", float, WEIGHT),
                 env_knob("FOLIO_FEEDBACK_POOL", int, POOL), env_knob("FOLIO_FEEDBACK_KEEP", int, 0) == 1,
                 env_knob("FOLIO_FEEDBACK_SOURCE", str, "fused"))


def env_knob(name: str, kind, default):
    """An evaluation knob from the environment (bench/ranking_eval.py --env), or its default."""
    raw = os.environ.get(name)
    try:
        return default if raw is None else kind(raw)
    except ValueError:
        return default


def hybrid(corpora: list, qvecs: list, semantic: list, fused: list, comp: list, rest, k: Knobs,
           weights=None) -> tuple[list, list]:
    """The second pass of a hybrid ranking: (fused scores per corpus, component ranks per corpus),
    shaped as fusion.fuse returns them, the semantic ranks now those of the moved vector.
    `semantic`: the first pass's cosines per corpus (-inf where a record has no vector or is no
    candidate): only records with a vector are ranked again. `rest`: fusion.fuse's joined sum of
    every list's share but the question's semantic one. `weights`: one per rank list of `comp`
    (fusion.all_weights: the question's two planes, then any facets), if any. The pool is every record
    with a vector that some list ranks in its best POOL; only the question's semantic ranks move."""
    import numpy as np

    lengths = [len(f) for f in fused]
    offsets = np.cumsum([0, *lengths])
    both = np.concatenate(comp, axis=1)
    flat = np.concatenate(fused)
    vec = np.concatenate([np.isfinite(s[:n]) if len(s) >= n else np.concatenate(
        [np.isfinite(s), np.zeros(n - len(s), dtype=bool)]) for s, n in zip(semantic, lengths, strict=True)])
    rs = np.where(vec, both[0], 0).astype(np.int32)
    # Ties in the fused score (a record at semantic #1 and lexical #5 scores as one at #5 and #1)
    # go to the better semantic rank, then the lower slot.
    unranked = np.iinfo(np.int32).max
    if k.source == "semantic":
        top = _best(np.where(rs > 0, -rs.astype(np.float32), -np.inf), k.top, None)
    else:
        top = _best(np.where(vec, flat, -np.inf), k.top, np.where(rs > 0, rs, unranked))
    if not len(top):
        return fused, comp
    moved = _moved(corpora, qvecs, top, offsets, k.weight)
    pairs = list(zip(offsets[:-1], offsets[1:], strict=True))
    # Only the pool is ranked again: records outside it (below both planes' best POOL; every
    # record with a vector when POOL is 0) keep their first-pass score and ranks, which no pool
    # record's top rows can fall to, and so do records without a vector (their fused score is
    # fusion.fuse's, stand-ins and all). No pass over every slot but the pool's selection: this is
    # what keeps feedback cheap at scale.
    if k.pool > 0:
        below = np.uint32(k.pool)
        near = (rs - 1).view(np.uint32) < below
        for r in both[1:]:
            near |= (r - 1).view(np.uint32) < below
        pool = np.flatnonzero((rs > 0) & near)
    else:
        pool = np.flatnonzero(rs > 0)
    out = flat.copy()
    out[pool], both[0, pool] = second(_rescore(corpora, moved, pool, offsets, len(flat))[pool], rest[pool],
                                      (weights or (1.0,))[0], semantic_shares(semantic, lengths, pool) if k.keep else None)
    return [out[a:b] for a, b in pairs], [both[:, a:b] for a, b in pairs]


def second(new, rest, weight: float, kept=None) -> tuple:
    """(float32 fused scores, int32 semantic ranks) of the pool ranked again: the moved vector's
    cosines `new` (one per pool record) in their own units over the pool, plus `rest` (the other
    lists' shares, fusion.fuse's) and, with FOLIO_FEEDBACK_KEEP, the first pass's semantic shares."""
    import numpy as np

    from folio import fusion

    x = np.round(new, 6)
    share = fusion.unit(x).shares(x)
    if kept is not None:
        share = share + kept
    return fusion.total(share, weight, rest), fusion.ranks(x)


def semantic_shares(semantic: list, lengths: list, pool):
    """The first pass's semantic shares of the pool records (FOLIO_FEEDBACK_KEEP: three lists)."""
    import numpy as np

    from folio import fusion

    x = np.round(fusion._joined([fusion._pad(s, n) for s, n in zip(semantic, lengths, strict=True)]), 6)
    return fusion.unit(x).shares(x)[pool]


def semantic(corpora: list, qvecs: list, dense: list, k: Knobs) -> list:
    """The second pass of a semantic ranking: per corpus the cosine with the moved vector, -inf
    outside the pool (the first pass's best POOL; every candidate with POOL 0)."""
    import numpy as np

    lengths = [len(d) for d in dense]
    offsets = np.cumsum([0, *lengths])
    flat = np.concatenate(dense)
    top = _best(flat, k.top, None)
    if not len(top):
        return dense
    moved = _moved(corpora, qvecs, top, offsets, k.weight)
    finite = np.flatnonzero(np.isfinite(flat))
    pool = finite if k.pool <= 0 or len(finite) <= k.pool else _best(flat, k.pool, None)
    new = _rescore(corpora, moved, np.sort(pool), offsets, len(flat))
    return [new[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def _best(flat, n: int, then) -> object:
    """Indices of the n best finite scores (at 6 decimals, as ranks compare them), ties by `then`
    (lower first) and then by index."""
    import numpy as np

    finite = np.flatnonzero(np.isfinite(flat))
    if not len(finite) or n <= 0:
        return finite[:0]
    scores = np.round(flat[finite], 6)
    if len(finite) > n:
        cut = np.partition(scores, len(scores) - n)[len(scores) - n]
        keep = scores >= cut  # every record tied with the n-th best, ordered below
        finite, scores = finite[keep], scores[keep]
    keys = (finite,) if then is None else (finite, then[finite])
    order = np.lexsort((*keys, -scores))
    return finite[order[:n]]


def _moved(corpora: list, qvecs: list, top, offsets, weight: float) -> list:
    """Per corpus the moved query vector: q + weight x the mean of the top records' vectors, unit length."""
    import numpy as np

    owner = np.searchsorted(offsets, top, side="right") - 1
    rows = [np.asarray(corpora[c].matrix()[int(g - offsets[c])], dtype=np.float64) for g, c in zip(top, owner,
                                                                                              strict=True)]
    centroid = np.mean(rows, axis=0)
    out = []
    for q in qvecs:
        v = np.asarray(q, dtype=np.float64) + weight * centroid
        norm = np.linalg.norm(v)
        out.append((v / norm if norm > 0 else np.asarray(q, dtype=np.float64)).astype(np.float32))
    return out


def _rescore(corpora: list, moved: list, pool, offsets, n: int):
    """float32 scores over the concatenated slots: the moved vector's cosine for the pool, -inf elsewhere.
    A pool as large as a corpus's candidates is one product over the whole matrix."""
    import numpy as np

    new = np.full(n, -np.inf, dtype=np.float32)
    for c, store in enumerate(corpora):
        a, b = int(offsets[c]), int(offsets[c + 1])
        idx = pool[(pool >= a) & (pool < b)]
        if not len(idx):
            continue
        m = store.matrix()
        slots = idx - a
        if len(slots) * 4 >= len(m):  # most rows: a whole scan is cheaper than gathering them
            new[idx] = (m @ moved[c])[slots]
        else:
            new[idx] = m[slots] @ moved[c]
    return new
