"""From scores to rows: merging touching records, ties, and each file's record order.

Owns the rows a ranking prints: the `limit` best, each merged from touching records of one file
whose scores stay within ALIKE of the run's best (merge_touching, pure; in a fused ranking by each
weighed plane's and facet's own scores too, so a fused row is never wider than the planes' own rows), its
score the line-weighted mean of its pieces, and the order of rows that score alike (path, start
line, root: never the storage slot; TIE_DECIMALS). Reads only the winners' records and their files' record order, kept in
the store's memo while the index is unchanged. Must not score (planes.py), filter or hydrate.
"""

from __future__ import annotations

from folio.errors import FolioError
from folio.memo import memo


def common_trail(group) -> tuple[str, ...]:
    trail = group[0].trail
    for r in group[1:]:
        n = 0
        while n < min(len(trail), len(r.trail)) and trail[n] == r.trail[n]:
            n += 1
        trail = trail[:n]
    return trail


ALIKE = 0.10  # pieces of one merged row score within this share of the run's best score of each other


def select(corpora: list, dense: list, limit: int, windowed=None, *, planes=None,
           floored: bool = False) -> list[tuple[int, float, list]]:
    """The `limit` best merged rows: (corpus index, score, records in file order).

    Winners come best first from a window (argpartition over every corpus's scores) that widens
    when used up; merge_touching turns them into rows. A row's score (the line-weighted mean of
    its pieces) is never above its seed's, so once `limit` rows exist and the next winner scores
    no more than the limit-th row, nothing later can place: stop there. Filters ran before
    (-inf), so neither merging nor filtering ever starves --limit.

    `windowed` (window.Windowed): `dense` holds only the records of a hybrid ranking's windows;
    a neighbour outside them is scored on demand, and a winner the windows cannot order (at or
    below its floor, or past the last of them) raises window.Inexact: the caller ranks in full.

    `planes` (a fused ranking): per plane it weighed, per corpus that plane's own scores by slot
    (-inf where it does not rank a record); touching winners merge only where each of them would
    merge them too, by ALIKE of its own best score (merge_touching).

    `floored` (a lexical ranking): a piece joins a row only on evidence of its own, not on what
    every record of its file scores alike (merge_touching's `floor`).
    """
    import heapq

    import numpy as np

    # With windows, only their records are looked through (their slots, in slot order).
    flat = windowed.values if windowed is not None else dense[0] if len(dense) == 1 else np.concatenate(dense)
    # Scores that print alike are alike: a BLAS product can give two identical rows scores an ulp
    # apart, so ranks compare scores at 6 decimals (what --json prints), and ties go by path, line.
    # Only the winners' scores are rounded (_top): rounding is monotonic, so the best at 6 decimals
    # are the best raw scores and those within a rounding of them.
    offsets = np.cumsum([0] + [len(d) for d in dense])
    n = int(np.count_nonzero(np.isfinite(flat)))
    if n == 0:
        return []
    files = _FileOrder(corpora, dense, windowed)
    ties = _TieKeys(corpora)
    rows: list[tuple[int, float, list[int]]] = []

    def winners():
        window, given = min(n, max(2 * limit, limit + 8)), set()
        while True:
            order, vals = _top(flat, window)
            if windowed is not None:
                order = windowed.slots[order]
            owner = np.searchsorted(offsets, order, side="right") - 1
            order, owner = ties.order(order, owner, vals, offsets)
            for g, c, v in zip(order, owner, vals, strict=True):  # v: float32, compared as it always was
                if g in given:  # a wider window repeats the narrower one (ties may reorder)
                    continue
                given.add(g)
                last = round(heapq.nlargest(limit, (r[1] for r in rows))[-1], TIE_DECIMALS) if len(
                    rows) >= limit else None
                if windowed is not None and v <= windowed.floor and not (
                        last is not None and v <= last and last >= windowed.floor):
                    raise _inexact()  # records outside the windows could come first or place
                if last is not None and v <= last:
                    return
                yield c, g - int(offsets[c])
            if window >= n:
                if windowed is not None and windowed.outside:
                    raise _inexact()
                return
            window = min(n, window * 2)

    tol = ALIKE * abs(float(_rounded(flat.max())))
    judges = [_judge(p) for p, _words in planes or ()]
    words = (floored, *(w for _p, w in planes or ()))
    floor = files.file_slots if any(words) else None
    for c, group in merge_touching(winners(), files.score, files.neighbours, tol, judges, floor=floor,
                                   floored=words):
        rows.append((c, files.mean(c, group), group))
    alike = [round(r[1], TIE_DECIMALS) for r in rows]
    if len(set(alike)) < len(alike):  # rows that score alike come in path and line order, however stored
        ties.fetch([(c, g[0]) for (c, _s, g), a in zip(rows, alike, strict=True) if alike.count(a) > 1])
    rows = [r for _a, r in sorted(zip(alike, rows, strict=True),
                                  key=lambda ar: (-ar[0], ties.key(ar[1][0], ar[1][2][0])))]
    rows = rows[:limit]
    records = [corpora[i].records([s for c, _, g in rows if c == i for s in g]) for i in range(len(corpora))]
    return [(c, score, [records[c][s] for s in g]) for c, score, g in rows]


def merge_touching(seeds, score, neighbours, tol: float, planes=(), floor=None, floored=()):
    """Group winners into merged rows; pure, so the rule can be read (and tested) in one place.

    seeds: (corpus, slot) keys, best first (any iterable; read lazily). neighbours(key) ->
    (slot before, slot after) among the same file's records (None at either end); score(corpus,
    slot) -> float, or None for a record that is no candidate. Each seed not yet taken starts a
    row and grows over its touching neighbours, the better-scoring side first, while every piece
    of the row stays within `tol` of every other; a neighbour already in a row, or no candidate,
    stops the growth on that side. A neighbour may lie past the window: a row is then the same
    whatever --limit asked for. Yields (corpus, [slots in file order]) per row, in seed order.

    planes: more (score, tol) pairs, one per plane a fused ranking weighed, each scoring as that
    plane ranks alone (None where it does not rank the record). A neighbour then also joins only
    where each of them would merge it in its own ranking (within its own `tol` of every piece), or
    ranks none of the row's pieces nor the neighbour (no say). A fused score sums the planes'
    shares, so two pieces can fuse alike where each plane sets them apart (reciprocal ranks, fused
    until issue 39, sat within a few percent of each other all down a ranking): a fused row is never
    wider than the rows of the planes that earned it.

    floor: key -> the slots of that record's file; floored: per judge (`score`, then `planes`),
    whether it is a lexical ranking's. A neighbour then also joins only where it scores more than
    that judge's `tol` above the least any record of its file scores under each floored judge (0
    where some record of the file is no candidate): BM25F scores a file's path and title
    for each of its records alike, so a question in a document's title words scored all 85 sections
    of one file within ALIKE of each other and they came back as one row of 1,921 lines.
    """
    judges = [(score, tol), *planes]
    taken: set = set()
    for c, slot in seeds:
        if (c, slot) in taken:
            continue
        taken.add((c, slot))
        spans = [_span(None, judge(c, slot)) for judge, _t in judges]  # per judge (lo, hi), or None: no say
        left, right = neighbours((c, slot))
        floors = None  # a record alone in its file has no neighbour to weigh against its floor
        if floor is not None and (left is not None or right is not None):
            floors = _floors(judges, floored, c, floor((c, slot)))
        group = [slot]
        while True:
            options = []
            for side, nb in ((0, left), (1, right)):
                if nb is None or (c, nb) in taken:
                    continue
                vals = [judge(c, nb) for judge, _t in judges]
                if vals[0] is not None and all(_joins(span, v, t) for span, v, (_j, t) in zip(
                        spans, vals, judges, strict=True)) and (floors is None or all(
                        v is None or f is None or v - f > t for v, f, (_j, t) in zip(vals, floors, judges,
                                                                                     strict=True))):
                    options.append((vals[0], side, nb, vals))
            if not options:
                break
            _s, side, nb, vals = max(options, key=lambda o: o[:3])
            taken.add((c, nb))
            spans = [_span(span, v) for span, v in zip(spans, vals, strict=True)]
            if side == 0:
                group.insert(0, nb)
                left = neighbours((c, nb))[0]
            else:
                group.append(nb)
                right = neighbours((c, nb))[1]
        yield c, group


def _floors(judges, floored, c: int, slots: list[int]) -> list[float | None]:
    """Per judge, the least score of a file's records (0 where one is no candidate); None for a judge
    that is not floored (`floored`: one flag per judge)."""
    out = []
    for (judge, _t), on in zip(judges, floored, strict=True):
        vals = [judge(c, s) for s in slots] if on else [None]
        out.append(None if not on else 0.0 if None in vals else min(vals))
    return out


def _joins(span, v, tol: float) -> bool:
    """Whether a piece scoring `v` may join pieces spanning `span` under one judge: both unranked
    by it (no say), or both ranked and within `tol` of each other."""
    if span is None or v is None:
        return span is None and v is None
    return max(span[1], v) - min(span[0], v) <= tol


def _span(span, v):
    if v is None:
        return span
    return (v, v) if span is None else (min(span[0], v), max(span[1], v))


TIE_DECIMALS = 6


class _TieKeys:
    """Equal scores rank by (path, start line, root), never by storage slot: an index built file by
    file over time and a clean build of the same files give the same order. Keys are read only for
    the records that tie (and kept in the store's memo while the index is unchanged)."""

    def __init__(self, corpora: list):
        self.corpora = corpora
        self.keys: list[dict[int, tuple]] = [memo(s).setdefault("tie_keys", {}) for s in corpora]

    def fetch(self, pairs) -> None:
        need: dict[int, list[int]] = {}
        for c, slot in pairs:
            if slot not in self.keys[c]:
                need.setdefault(c, []).append(slot)
        for c, slots in need.items():
            store = self.corpora[c]
            recs = store.records(slots)
            paths = {fid: f["path"] for fid, f in store.files({r.file_id for r in recs.values()}).items()}
            for s in slots:
                r = recs.get(s)
                self.keys[c][s] = (paths.get(r.file_id, ""), r.start, str(store.root)) if r else ("", 0, "")

    def key(self, c: int, slot: int) -> tuple:
        return self.keys[c].get(slot, ())

    def order(self, order, owner, vals, offsets) -> tuple[list[int], list[int]]:
        """`order` (descending score; `vals` its scores) with each run of equal scores sorted by key."""
        order, owner = order.tolist(), owner.tolist()
        if len(vals) < 2 or not (vals[1:] == vals[:-1]).any():
            return order, owner
        runs, i = [], 0
        while i < len(order):
            j = i + 1
            while j < len(order) and vals[j] == vals[i]:
                j += 1
            if j - i > 1:
                runs.append((i, j))
            i = j
        self.fetch((owner[k], order[k] - int(offsets[owner[k]])) for a, b in runs for k in range(a, b))
        for a, b in runs:
            run = sorted(zip(order[a:b], owner[a:b], strict=True),
                         key=lambda go: self.key(go[1], go[0] - int(offsets[go[1]])))
            order[a:b], owner[a:b] = [g for g, _ in run], [c for _, c in run]
        return order, owner


class _FileOrder:
    """The records of the winners' files in line order, read once per file, for merge_touching.

    Records of one file touch when no other record of that file lies between them: the sectioner
    gives every non-blank line after the frontmatter to exactly one record (ranges only drop
    blank lines at their ends), so what separates two neighbours in the store is blank lines only.
    A neighbour that is no candidate (no vector yet, filtered out) still sits between: no touch.
    """

    def __init__(self, corpora: list, dense: list, windowed=None):
        self.corpora, self.dense, self.windowed = corpora, dense, windowed
        memos = [memo(s) for s in corpora]  # kept while the index is unchanged
        self.lines: list[dict] = [m.setdefault("lines", {}) for m in memos]  # slot -> line count
        self.pos: list[dict] = [m.setdefault("file_order", {}) for m in memos]  # slot -> (file's slots, index)

    def _load(self, c: int, slot: int) -> None:
        rows = self.corpora[c].file_order(slot)
        if not rows:
            raise FolioError(f"the index at {self.corpora[c].root} changed under this query; run it again")
        order = [r[0] for r in rows]
        for i, (s, start, end) in enumerate(rows):
            self.lines[c][s] = end - start + 1
            self.pos[c][s] = (order, i)

    def score(self, c: int, slot: int) -> float | None:
        d = self.dense[c]
        v = float(d[slot]) if slot < len(d) else float("-inf")
        if v == float("-inf") and self.windowed is not None and slot < len(d):
            return self.windowed.score(c, slot)  # outside the windows: its exact score
        return v if v != float("-inf") else None

    def file_slots(self, key: tuple[int, int]) -> list[int]:
        """The slots of the records of the file holding `key`, in line order."""
        c, slot = key
        if slot not in self.pos[c]:
            self._load(c, slot)
        return self.pos[c][slot][0]

    def neighbours(self, key: tuple[int, int]) -> tuple[int | None, int | None]:
        c, slot = key
        if slot not in self.pos[c]:
            self._load(c, slot)
        order, i = self.pos[c][slot]
        return (order[i - 1] if i > 0 else None), (order[i + 1] if i + 1 < len(order) else None)

    def mean(self, c: int, group: list[int]) -> float:
        """The line-weighted mean score of a row's pieces."""
        total = weight = 0.0
        for s in group:
            lines = self.lines[c][s]
            total += self.score(c, s) * lines
            weight += lines
        return total / weight


def _judge(plane: list):
    """(score, tol) for merge_touching from one plane's scores per corpus: its own score of a
    record (None where it ranks none), and ALIKE of its best score over every corpus."""
    import numpy as np

    best = max((float(np.max(a)) for a in plane if len(a)), default=float("-inf"))
    tol = ALIKE * abs(float(_rounded(best))) if np.isfinite(best) else 0.0

    def score(c: int, slot: int) -> float | None:
        a = plane[c]
        v = float(a[slot]) if slot < len(a) else float("-inf")
        return v if v != float("-inf") else None

    return score, tol


def _inexact():
    from folio.window import Inexact

    return Inexact("the windows do not decide these rows")


def _rounded(x):
    """A score as the ranking compares it (TIE_DECIMALS), rounded as an array's element is."""
    import numpy as np

    return np.round(np.asarray([x]), TIE_DECIMALS)[0]


def _top(scores, k: int):
    """(indices, their scores rounded to TIE_DECIMALS): the `k` best by rounded score, best first,
    with every entry tied with the k-th (which of them made the cut is arbitrary); ties by index.

    Rounding is monotonic, so those are the entries whose raw score is at least the k-th best raw
    score less a rounding step: one partition of the raw scores and one comparison find them, and
    only they are rounded (not a rounded copy and an index partition of every score)."""
    import numpy as np

    if len(scores) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    k = min(k, len(scores))
    if k < len(scores):
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        margin = 1e-5 * max(1.0, abs(float(kth)))  # far wider than a rounding step at any magnitude
        part = np.flatnonzero(scores >= kth - margin)
        vals = np.round(scores[part], TIE_DECIMALS)
        keep = vals >= _rounded(kth)
        part, vals = part[keep], vals[keep]
    else:
        part = np.arange(len(scores))
        vals = np.round(scores, TIE_DECIMALS)
    o = np.argsort(-vals, kind="stable")
    return part[o], vals[o]
