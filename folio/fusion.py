"""Hybrid ranking: reciprocal-rank fusion of the semantic and the lexical ranking.

Pure numpy over score arrays (one float per slot, -inf where a plane does not rank the record):
no store, no network, no printing. Each plane's full ranking is one argsort over its finite
scores, so fusion costs two sorts whatever the corpus size, and never a Python loop over records.

RRF (Cormack, Clarke and Buettcher, 2009): fused = sum over planes of 1 / (K + rank), rank
1-based within the plane; a plane that does not rank a record adds nothing. K = 60 is the paper's
constant. bench/hybrid.py also tries k = 10 / 200 and a weighted sum of min-max-normalised scores
as a diagnostic on its own question set (docs/benchmarks.md); a weighted sum looked better there,
but it was picked on the same questions, so RRF stays until a held-out set says otherwise.
"""

from __future__ import annotations

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
        order = np.argsort(neg, kind="stable")
        out[idx[order]] = 1 + np.searchsorted(neg[order], neg[order], side="left").astype(np.int32)
    return out


def rrf(rank_arrays: list[np.ndarray], k: int = K, weights=None) -> np.ndarray:
    """float32 fused scores from aligned rank arrays (0 = unranked); -inf where no plane ranked.
    `weights`: one per plane (default 1 each): a plane adds weight / (k + rank)."""
    fused = np.zeros(len(rank_arrays[0]), dtype=np.float64)
    seen = np.zeros(len(rank_arrays[0]), dtype=bool)
    for r, w in zip(rank_arrays, weights or [1.0] * len(rank_arrays), strict=True):
        hit = r > 0
        fused[hit] += w / (k + r[hit].astype(np.float64))
        seen |= hit
    out = fused.astype(np.float32)
    out[~seen] = -np.inf
    return out


def fuse(semantic: list[np.ndarray], lexical: list[np.ndarray], k: int = K, *,
         unjudged: list | None = None, weights=None) -> tuple[list, list]:
    """One fused ranking over every queried corpus.

    semantic, lexical: per corpus, a score per slot (-inf = not ranked by that plane; the two
    arrays of a corpus may differ in length). The planes rank all corpora together, as the other
    modes do. unjudged: per corpus, a bool per slot for the candidates the semantic plane cannot
    judge (no vector yet): their lexical rank stands in for the semantic one, so a half-built
    index ranks them by the plane that can (RRF would give them one term where every embedded
    section gets two). weights: (semantic, lexical), default 1 each. Returns (fused scores per
    corpus, per corpus a (2, n) int32 array of component ranks in PLANES order, 0 = not ranked:
    each plane's own ranks, never the stand-ins).
    """
    lengths = [max(len(s), len(x)) for s, x in zip(semantic, lexical, strict=True)]
    sem = np.concatenate([_pad(s, n) for s, n in zip(semantic, lengths, strict=True)])
    lex = np.concatenate([_pad(x, n) for x, n in zip(lexical, lengths, strict=True)])
    rs, rl = ranks(sem), ranks(lex)
    stand = rs
    if unjudged is not None:
        u = np.concatenate([_pad(m, n, False) for m, n in zip(unjudged, lengths, strict=True)]) & (rs == 0)
        if u.any():
            stand = np.where(u, rl, rs)
    fused = rrf([stand, rl], k, weights)
    both = np.stack([rs, rl])
    cuts = np.cumsum([0] + lengths)
    return ([fused[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)],
            [both[:, a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)])


def _pad(scores: np.ndarray, n: int, fill=-np.inf) -> np.ndarray:
    scores = np.asarray(scores, dtype=bool if fill is False else np.float32)
    if len(scores) == n:
        return scores
    out = np.full(n, fill, dtype=scores.dtype)
    out[:min(len(scores), n)] = scores[:n]
    return out
