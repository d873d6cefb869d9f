"""The lexical plane's scoring: BM25F over the live documents of the segments, and the confidence
block's statistics.

Pure functions over numpy arrays: no file I/O, no network, no printing. Owns the weights and the
BM25F parameters (tuned in docs/lexical.md), the collection statistics over live documents (N,
average field lengths, idf: computed at query time, so incremental segments score as a clean build
does), scoring a question's terms, and the confidence block (coverage, missing words, support and
separation, the band and its floors, calibrated in docs/confidence.md). Must not analyse text
(analysis.py) or build segments (segments.py).
"""

from __future__ import annotations

import math

import numpy as np

from folio.lexical.analysis import FIELDS, query_terms, term_hash
from folio.lexical.segments import alive_masks

WEIGHTS = (1.0, 3.0, 2.0, 1.5, 1.0)  # seed engine defaults, in FIELDS order
K1 = 1.2
B = 0.5  # seed 0.15; 0.5 measured better on both corpora (docs/lexical.md)
# Confidence floors, calibrated in docs/confidence.md (bench/confidence.py): answerable queries
# against made-up-term and chimera queries on rust-book and eips.
DEFAULT_SEPARATION_FLOOR = 0.05  # BM25F score gap (S0 - S1) / S0; the seed engine used 0.1
DEFAULT_DOC_COVERAGE_FLOOR = 0.7  # the seed engine left it off (0.0)
SEMANTIC_SEPARATION_FLOOR = 0.0  # cosine gap: measured not to tell right from wrong (off)

_NF = len(FIELDS)


class Collection:
    """Query-time statistics over live docs: alive masks, N, average field lengths.

    Depends only on the segments and the live mask, not on the question: a caller that knows
    neither changed (search.Session, between questions to an unchanged index) builds it once and
    passes it to ``score`` and ``confidence``."""

    def __init__(self, segments: list[dict], live: np.ndarray):
        self.segments = segments
        self.n_slots = len(live)
        self.masks = alive_masks(segments, live)
        self._by_slot: list = [None] * len(segments)  # per segment, (doc indices in slot order, their slots)
        n = 0
        tot = np.zeros(_NF, dtype=np.float64)
        for seg, m in zip(segments, self.masks, strict=True):
            k = int(np.count_nonzero(m))
            if k:
                n += k
                # per field, an integer sum over the live rows in place (no masked copy of the
                # table): exact, so the same float64 total as summing their copy
                lens = np.asarray(seg["doc_len"])
                tot += [int(np.sum(lens[:, f], where=m, dtype=np.uint64)) for f in range(_NF)]
        self.N = n
        avg = tot / n if n else np.ones(_NF)
        self.avglen = np.where(avg > 0, avg, 1.0)

    def _postings(self, term: str):
        h = np.uint64(term_hash(term))
        for i, (seg, m) in enumerate(zip(self.segments, self.masks, strict=True)):
            terms = seg["terms"]
            j = int(np.searchsorted(terms, h))
            if j >= len(terms) or terms[j] != h:
                continue
            lo, hi = int(seg["offsets"][j]), int(seg["offsets"][j + 1])
            pd = np.asarray(seg["post_doc"][lo:hi])
            am = m[pd]
            if am.all():  # every posting live: the mapped rows as they are, no masked copy
                yield i, seg, pd, np.asarray(seg["post_tf"][lo:hi])
            elif am.any():
                yield i, seg, pd[am], np.asarray(seg["post_tf"][lo:hi])[am]

    def postings(self, term: str):
        """[(segment, alive doc indices, tf rows)] for the live postings of ``term``."""
        return [(seg, pd, tf) for _i, seg, pd, tf in self._postings(term)]

    def docs_of(self, i: int, slots: np.ndarray) -> np.ndarray:
        """Doc index in segment ``i`` of each slot (-1 where the segment holds none)."""
        if self._by_slot[i] is None:
            ds = np.asarray(self.segments[i]["doc_slots"])
            order = np.argsort(ds, kind="stable")
            self._by_slot[i] = (order, ds[order])
        order, sorted_slots = self._by_slot[i]
        if len(sorted_slots) == 0:
            return np.full(len(slots), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(sorted_slots, slots), len(sorted_slots) - 1)
        return np.where(sorted_slots[pos] == slots, order[pos], -1)

    def df(self, term: str) -> int:
        """How many live records hold ``term``."""
        return sum(len(p[2]) for p in self._postings(term))

    def idf(self, df: int) -> float:
        return math.log((self.N - df + 0.5) / (df + 0.5) + 1.0)


def _distinct(query: list[str]) -> list[str]:
    return list(dict.fromkeys(query))


def score(query: list[str], segments: list[dict], live: np.ndarray, *, weights=None, k1: float | None = None,
          b: float | None = None, col: Collection | None = None) -> np.ndarray:
    """BM25F scores per slot, float32[len(live)]; 0 for non-matching and dead slots.

    ``weights``/``k1``/``b`` default to WEIGHTS/K1/B (overridable for bench/lexical_tune.py).
    ``col``: the Collection of these segments and live mask, when the caller keeps one.
    """
    col = col or Collection(segments, live)
    slots, scores = score_touched(query, col, weights=weights, k1=k1, b=b)
    out = np.zeros(col.n_slots, dtype=np.float32)
    out[slots] = scores
    return out


def score_touched(query: list[str], col: Collection, *, weights=None, k1: float | None = None,
                  b: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(slots, float32 BM25F scores) of the live documents holding a query term, slots ascending:
    work in proportion to the question's postings (_term_scores), never an array of the corpus's
    length. Each document's terms add up in the question's order in float64, as ``score`` always
    summed them."""
    return _touched(_term_scores(query, col, weights, k1, b))


def _touched(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """score_touched's (slots, float32 scores) from _term_scores' parts."""
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    slots = np.sort(np.concatenate([p[0] for p in parts]).astype(np.int64))
    if len(parts) > 1:  # the distinct slots (np.unique costs several sorts' worth)
        slots = slots[np.concatenate(([True], slots[1:] != slots[:-1]))]
    acc = np.zeros(len(slots), dtype=np.float64)
    for at, add in parts:  # a slot is one live document: at most once per term
        acc[np.searchsorted(slots, at)] += add
    return slots, acc.astype(np.float32)


def score_slots(query: list[str], col: Collection, fill: float = -np.inf) -> np.ndarray:
    """float32[n_slots]: each live document's BM25F score where it is > 0 (as float32), `fill`
    elsewhere: score_touched's scores in place. When the postings outnumber an eighth of the slots
    (a question of common words at millions of sections) they add up in one float64 array of the
    corpus's length, in the same order (the same bits), instead of sorting millions of slots."""
    parts = _term_scores(query, col)
    if sum(len(p[0]) for p in parts) * 8 > col.n_slots:
        acc = np.zeros(col.n_slots, dtype=np.float64)
        for at, add in parts:
            acc[at] += add
        out = acc.astype(np.float32)
    else:
        slots, scores = _touched(parts)
        out = np.zeros(col.n_slots, dtype=np.float32)
        out[slots] = scores
    np.putmask(out, ~(out > 0), np.float32(fill))
    return out


def _term_scores(query: list[str], col: Collection, weights=None, k1: float | None = None,
                 b: float | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(slots, float64 BM25F scores)] per query term (distinct, in the question's order) and
    segment: each term's live postings scored field by field in place (_bm25f)."""
    w = np.asarray(WEIGHTS if weights is None else weights, dtype=np.float64)
    K1_, B_ = (K1 if k1 is None else k1), (B if b is None else b)
    parts = []
    for term in _distinct(query):
        plist = col.postings(term)
        if not plist:
            continue
        idf = col.idf(sum(len(p[1]) for p in plist))
        for seg, pd, tf in plist:
            parts.append((np.asarray(seg["doc_slots"])[pd], _bm25f(seg, pd, tf, col.avglen, w, K1_, B_, idf)))
    return parts


def _bm25f(seg: dict, pd: np.ndarray, tf: np.ndarray, avglen: np.ndarray, w: np.ndarray, k1: float, b: float,
           idf: float) -> np.ndarray:
    """float64 BM25F term scores of one segment's postings: idf * tft * (k1 + 1) / (tft + k1), tft
    the sum over fields of w * tf / ((1 - b) + b * len / avglen), field by field into one buffer (a
    field no posting has adds 0.0 to every sum: skipped, the same bits)."""
    lens = np.take(np.asarray(seg["doc_len"]), pd, axis=0)
    tft = np.zeros(len(pd), dtype=np.float64)
    x = np.empty(len(pd), dtype=np.float64)
    for f in range(len(w)):
        col = tf[:, f]
        if not col.any():
            continue
        np.divide(lens[:, f], avglen[f], out=x)
        np.multiply(x, b, out=x)
        np.add(x, 1.0 - b, out=x)
        np.divide(w[f], x, out=x)
        np.multiply(col, x, out=x)
        np.add(tft, x, out=tft)
    out = np.multiply(tft, idf)
    np.multiply(out, k1 + 1.0, out=out)
    np.add(tft, k1, out=tft)
    return np.divide(out, tft, out=out)


def _r4(x: float) -> float:
    return round(min(1.0, max(0.0, float(x))), 4)


def confidence(
    query_text: str,
    ranked_slots,
    ranked_scores: np.ndarray,
    segments: list[dict],
    live,
    *,
    separation_floor: float,
    doc_coverage_floor: float = 0.0,
    verified: str | None = None,
    col: Collection | None = None,
    terms: list[tuple[str, str]] | None = None,
) -> dict:
    """The confidence block for a ranked list (lexical or semantic).

    ``ranked_slots``: per ranked row, a slot, or a tuple of slots for a row merged from several
    records (the row holds a term when any of its records does); ``ranked_scores`` one per row.

    * coverage: idf mass of the query's distinct terms with df > 0 over the idf
      mass of all of them (0 if that is 0).
    * doc_coverage: idf mass of query terms present in the top-ranked row
      (``ranked_slots[0]``) over the query's idf mass; 1.0 when there are no results.
    * support: number of ranked rows that contain at least one query term (live
      postings). For lexical results this equals the count of scores > 0 (a BM25F
      score is > 0 exactly when a query term occurs); for semantic results
      (cosine scores) it counts rows that actually mention a query word.
    * separation: over S = the ranked scores > 0, sorted descending:
      (S0 - S1) / S0 if |S| >= 2, 1.0 if |S| == 1, 0.0 if |S| == 0.
    * missing: query words with df 0, in the user's spelling, in order.
    * ``terms``: query_terms(query_text) when the caller already has them (a query analyses
      its question once: lexical.analysis.query).
    * ``verified`` (optional, from the freshness check): "stale" lands in partial;
      included in the block only when given.

    Numbers are clamped to [0, 1] and rounded to 4 dp before the ladder runs:
    support == 0 -> none; missing or stale -> partial; doc_coverage <
    doc_coverage_floor -> partial; separation < separation_floor -> weak;
    else grounded. answerable = band != "none".
    """
    col = col or Collection(segments, live)
    rows = [np.atleast_1d(np.asarray(r, dtype=np.int64)) for r in ranked_slots]
    flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    n_rows = len(rows)
    scores = np.asarray(ranked_scores, dtype=np.float64).ravel()
    qt = query_terms(query_text) if terms is None else terms
    contains = np.zeros(n_rows, dtype=bool)
    top_has: list[bool] = []
    idfs: list[float] = []
    missing: list[str] = []
    present: list[bool] = []
    for surface, term in qt:
        plist = list(col._postings(term))
        df = sum(len(p[2]) for p in plist)
        idfs.append(col.idf(df))
        present.append(df > 0)
        if df == 0:
            missing.append(surface)
        hit = np.zeros(n_rows, dtype=bool)
        for i, _seg, pd, _tf in plist:  # a row's doc in this segment among the term's (ascending) postings
            docs = col.docs_of(i, flat)
            at = np.minimum(np.searchsorted(pd, docs), len(pd) - 1)
            hit[owner[(docs >= 0) & (pd[at] == docs)]] = True
        contains |= hit
        top_has.append(bool(n_rows) and bool(hit[0]))
    total = sum(idfs)
    coverage = sum(i for i, p in zip(idfs, present, strict=True) if p) / total if total > 0 else 0.0
    if n_rows == 0:
        doc_cov = 1.0
    else:
        doc_cov = (
            sum(i for i, h in zip(idfs, top_has, strict=True) if h) / total if total > 0 else 0.0
        )
    s = np.sort(scores[scores > 0])[::-1]
    if len(s) >= 2:
        separation = (s[0] - s[1]) / s[0]
    elif len(s) == 1:
        separation = 1.0
    else:
        separation = 0.0
    support = int(contains.sum())
    coverage, doc_cov, separation = _r4(coverage), _r4(doc_cov), _r4(separation)
    if support == 0:
        band = "none"
    elif missing or verified == "stale" or doc_cov < doc_coverage_floor:
        band = "partial"
    elif separation < separation_floor:
        band = "weak"
    else:
        band = "grounded"
    block = {
        "band": band,
        "answerable": band != "none",
        "coverage": coverage,
        "separation": separation,
        "separation_floor": float(separation_floor),
        "doc_coverage": doc_cov,
        "doc_coverage_floor": float(doc_coverage_floor),
        "support": support,
        "missing": missing,
    }
    if verified is not None:
        block["verified"] = verified
    return block
