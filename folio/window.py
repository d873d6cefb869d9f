"""Hybrid ranking at scale: fusion.fuse's and feedback.hybrid's scores for the records that can
reach a result, bit for bit, without ranking every record.

A record's fused score needs its share of each list (fusion.Unit: the list's mean and spread over
its best N) and its rank there only where the record can print or be looked at. Each rank list's
window (the two planes', and any facet's: fusion.fuse's `more`) is its records of rank <= SIZE
(every tie with the SIZE-th included, at 6 decimals as fusion.ranks compares); the window holds
the list's best N (SIZE >= N), so each list's unit comes from one sort of its rounded scores. A
record outside every window scores below each window's cut in each list, so it fuses to at most
`floor` (the shares of the cuts). The records in any window (S) get their exact ranks in every list
(values only: a rank is 1 + the count of strictly better scores, one searchsorted), their fused
score with fusion's arithmetic (fusion.combine, fusion.total), and feedback's second pass as
feedback.hybrid gives it (its pool, the records with a vector in any list's best POOL, lies inside
S when SIZE >= POOL). Records outside S stay -inf in the returned arrays; rows.select asks
`Windowed.score` for any it looks at (a winner's neighbour) and raises Inexact when it would need
the order among them (a winner at or below `floor`, or S used up): the caller then ranks with the
full path. Feedback's three best records must also lie above `floor`, or the same.

Owns when the windowed path applies (WINDOW_MIN candidates and up; FOLIO_WINDOW_MIN and
FOLIO_WINDOW_SIZE are private, for tests and bench/hybrid_exact.py) and the windowed scores.
Must not read records, make rows or print; numpy is imported inside the functions.
"""

from __future__ import annotations

import os

WINDOW_MIN = 50_000  # slots below which the full path (fusion.fuse, feedback.hybrid) is cheap anyway
SIZE = 1000  # each plane's window: its best SIZE records (at least feedback's POOL)


class Inexact(Exception):
    """The windows cannot decide this ranking exactly: rank with the full path."""


def wanted(lengths: list[int], knobs) -> int:
    """The window size to rank a hybrid question with, or 0 for the full path: small corpora, and
    feedback's evaluation knobs (every candidate in the pool, the first ranking kept, the best
    records by the semantic ranking), which the windows do not reproduce."""
    if sum(lengths) < _env("FOLIO_WINDOW_MIN", WINDOW_MIN):
        return 0
    size = _env("FOLIO_WINDOW_SIZE", SIZE)
    if knobs is None:
        return max(size, 1)
    if knobs.pool <= 0 or knobs.keep or knobs.source != "fused":
        return 0
    return max(size, knobs.pool)


def _env(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class _Plane:
    """One plane's scores over the joined slots: its window and the exact rank of any slot."""

    def __init__(self, scores, size: int, room: int | None):
        import numpy as np

        from folio import fusion

        self.scores = scores
        finite = np.isfinite(scores)
        vals = np.round(scores[finite], 6)  # as fusion.ranks rounds: float32, element by element
        vals.sort()
        self.sorted, self.n = vals, len(vals)
        self.unit = fusion.Unit.of(vals[-fusion.N:], room)  # the best N ascending: fusion.unit's array
        self.bound = 0.0  # the share no record outside the window reaches (none is outside it)
        if self.n <= size:
            self.window = np.flatnonzero(finite)
        else:
            cut = vals[self.n - size]  # the size-th best rounded score: the window is every score >= it
            margin = 1e-5 * max(1.0, abs(float(cut)))  # far wider than a rounding step at any magnitude
            part = np.flatnonzero(scores >= cut - margin)
            self.window = part[np.round(scores[part], 6) >= cut]
            self.bound = float(self.unit.shares(np.array([cut]))[0])  # outside: a score below the cut

    def shares(self, idx):
        """float64 shares (fusion.Unit) of the slots `idx`."""
        import numpy as np

        return self.unit.shares(np.round(self.scores[idx], 6))

    def ranks(self, idx):
        """int32 1-based ranks of the slots `idx` (ties share the best), 0 where not ranked."""
        import numpy as np

        v = self.scores[idx]
        ok = np.isfinite(v)
        better = self.n - np.searchsorted(self.sorted, np.round(v, 6), side="right")
        return np.where(ok, 1 + better, 0).astype(np.int32)


def _fused(lists: list, semantic: tuple, u, idx, weights):
    """(fusion.fuse's float32 fused scores, the float64 rest, the int32 ranks per list) of the slots
    `idx`, with its arithmetic: in a semantic list, a record with no vector yet (`u`, joined) takes
    its lexical share, and a record no list ranks is -inf."""
    from folio import fusion

    r = [plane.ranks(idx) for plane in lists]
    fused, rest = fusion.fused_of([plane.shares(idx) for plane in lists], r, semantic,
                                  None if u is None else u[idx], weights)
    return fused, rest, r


class Windowed:
    """What rows.select needs beyond the windowed scores: `floor` (no record outside S scores above
    it at 6 decimals), whether any ranked record lies outside S, and the exact score of one."""

    def __init__(self, lists: list, semantic: tuple, unjudged, weights, offsets, both, floor, outside: bool,
                 slots, values):
        self.lists, self.semantic, self.unjudged, self.weights = lists, semantic, unjudged, weights
        self.slots, self.values = slots, values  # S (joined slots, ascending) and their fused scores
        self.offsets, self.both, self.floor, self.outside = offsets, both, floor, outside
        self.known: dict[tuple[int, int], float | None] = {}

    def score(self, c: int, slot: int) -> float | None:
        """The fused score of a record outside S (its first-pass score: feedback's pool lies in S),
        None where no list ranks it; its component ranks go into the returned rank arrays."""
        import numpy as np

        key = (c, slot)
        if key not in self.known:
            if not 0 <= slot < int(self.offsets[c + 1] - self.offsets[c]):
                return None
            g = int(self.offsets[c]) + slot
            fused, _rest, r = _fused(self.lists, self.semantic, self.unjudged, np.array([g]), self.weights)
            v = fused[0]
            self.both[:, g] = [x[0] for x in r]
            self.known[key] = None if v == -np.inf else float(v)
        return self.known[key]


def rank(corpora: list, qvecs: list, semantic: list, lexical: list, unjudged: list, weights, knobs,
         size: int, more=(), candidates: int = 0) -> tuple[list, list, Windowed]:
    """(fused scores per corpus, component ranks per corpus, the Windowed) as fusion.fuse and then
    (with feedback `knobs`) feedback.hybrid return them, for the records in any list's window;
    -inf elsewhere. `more`: fusion.fuse's further rank lists (facets). Raises Inexact when
    feedback's best records are not decided inside the windows. The inputs are not changed: the
    full path may rank them after."""
    import numpy as np

    from folio import fusion

    scores = [semantic, lexical, *(f.scores for f in more)]
    kinds = (True, False, *(f.semantic for f in more))
    w = fusion.all_weights(weights, more)
    lengths = [max(len(x[c]) for x in scores) for c in range(len(semantic))]
    offsets = np.cumsum([0, *lengths])
    lists = [_Plane(fusion._joined([fusion._pad(x, n) for x, n in zip(xs, lengths, strict=True)]), size,
                    None if sem else candidates) for xs, sem in zip(scores, kinds, strict=True)]
    u = None
    if unjudged and any(len(m) and m.any() for m in unjudged):
        u = fusion._joined([fusion._pad(m, n, False) for m, n in zip(unjudged, lengths, strict=True)])
    s = lists[0].window
    for plane in lists[1:]:
        s = np.union1d(s, plane.window)  # sorted: slot order, as the full path's arrays
    first, rest, r = _fused(lists, kinds, u, s, w)
    # Outside S a list's score is below its window's cut (or unranked); a stand-in is a lexical share.
    bounds = [np.array([max(p.bound, lists[1].bound) if sem and u is not None else p.bound])
              for p, sem in zip(lists, kinds, strict=True)]
    floor = np.round(fusion.total(bounds[0], w[0], fusion.combine(bounds[1:], w[1:])), 6)[0]
    outside = any(plane.n > len(plane.window) for plane in lists)
    n = int(offsets[-1])
    flat = np.full(n, -np.inf, dtype=np.float32)
    flat[s] = first
    both = np.zeros((len(lists), n), dtype=np.int32)
    for i, x in enumerate(r):
        both[i, s] = x
    if knobs is not None:
        _second_pass(corpora, qvecs, knobs, w, offsets, lists[0], s, r, first, rest, floor, flat, both)
    pairs = list(zip(offsets[:-1], offsets[1:], strict=True))
    return ([flat[a:b] for a, b in pairs], [both[:, a:b] for a, b in pairs],
            Windowed(lists, kinds, u, w, offsets, both, floor, outside, s, flat[s]))


def _second_pass(corpora, qvecs, knobs, weights, offsets, ps, s, r, first, rest, floor, flat, both) -> None:
    """feedback.hybrid over S: its best records by the first fused score (ties by semantic rank,
    then slot), the moved vector, the pool ranked again; written into `flat` and `both`."""
    import numpy as np

    from folio import feedback

    if knobs.top <= 0:  # no best records to move toward: the first ranking stands (feedback.hybrid)
        return
    rs = r[0]
    vec = rs > 0
    unranked = np.iinfo(np.int32).max
    top = feedback._best(np.where(vec, first, -np.inf), knobs.top, np.where(vec, rs, unranked))
    held = int(np.count_nonzero(vec))
    if held < ps.n and (len(top) < knobs.top or not np.round(first[top], 6).min() > floor):
        raise Inexact("feedback's best records are not decided inside the windows")
    if not len(top):
        return
    moved = feedback._moved(corpora, qvecs, s[top], offsets, knobs.weight)
    below = knobs.pool
    near = rs <= below
    for x in r[1:]:
        near |= (x > 0) & (x <= below)
    picked = vec & near
    pool = s[picked]
    flat[pool], both[0, pool] = feedback.second(feedback._rescore(corpora, moved, pool, offsets, len(flat))[pool],
                                                rest[picked], weights[0])
