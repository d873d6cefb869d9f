"""Measure BM25F field weights, k1 and b on labelled queries generated from real corpora.

    python bench/lexical_tune.py [--corpus rust-book --corpus eips] [--n 200] [--seed 11] [--rounds 2]

The labelled set is built from each index (bench/confidence.py's generator: a section's heading
words, 3 distinctive words of its body, or the heading plus 2 frequent words the section lacks;
target = that section). Coordinate descent from the seed defaults over a small grid per
parameter, scoring mean reciprocal rank (top 10) averaged over the three query kinds. To see
whether a gain is real, every tuned setting is re-scored on the *other* corpus and on a fresh
query sample (another seed) of its own corpus. No change is worth making unless it holds there.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import confidence as conf  # noqa: E402

from folio import lexical  # noqa: E402

GRID = {
    "k1": (0.6, 0.9, 1.2, 1.5, 2.0),
    "b": (0.0, 0.15, 0.3, 0.5, 0.75),
    "heading": (1.0, 2.0, 3.0, 4.0, 6.0),
    "title": (0.5, 1.0, 2.0, 3.0),
    "path": (0.5, 1.0, 1.5, 3.0),
    "context": (0.25, 0.5, 1.0, 2.0),
}
SEED = {"k1": 1.2, "b": 0.15, "body": 1.0, "heading": 3.0, "title": 2.0, "path": 1.5, "context": 1.0}
DEFAULT = SEED  # tuning starts from the seed engine's published defaults
CURRENT = {**SEED, "k1": lexical.K1, "b": lexical.B,
           **dict(zip(("body", "heading", "title", "path", "context"), lexical.WEIGHTS, strict=True))}
KINDS = ("heading", "keywords", "noisy")
# natural questions (bench/labels) are scored, never tuned on


class Bench:
    def __init__(self, name: str, n: int, seed: int):
        from folio.store import Store

        self.root = conf.prepare(name, None, None)
        recs, df = conf.load_records(self.root)
        self.queries = [q for q in conf.make_queries(recs, df, n, random.Random(seed)) if q[0] in KINDS]
        self.natural = conf.natural(name)
        store = Store.open(self.root)
        try:
            slots, _ = store.live(vectors_only=False)
            self.segs = [{k: np.asarray(v) for k, v in s.items()} for s in store.lex_segments()]
            rows = store.records(slots.tolist())
            files = store.files({r.file_id for r in rows.values()})
            self.live = np.zeros(store.next_slot(), dtype=bool)
            self.live[slots] = True
        finally:
            store.close()
        self.loc = {s: (files[r.file_id]["path"], r.start, r.end, r.heading) for s, r in rows.items()}
        self.terms = [lexical.analyze(q[1]) for q in self.queries]
        self.nterms = [lexical.analyze(q[1]) for q in self.natural]

    def evaluate(self, p: dict, natural: bool = False) -> dict:
        w = (p["body"], p["heading"], p["title"], p["path"], p["context"])
        kinds = ("natural",) if natural else KINDS
        rr = {k: [] for k in kinds}
        at1 = {k: [] for k in kinds}
        qs, ts = (self.natural, self.nterms) if natural else (self.queries, self.terms)
        for (kind, _text, target), terms in zip(qs, ts, strict=True):
            sc = lexical.score(terms, self.segs, self.live, weights=w, k1=p["k1"], b=p["b"])
            top = np.argsort(-sc, kind="stable")[:10]
            r = 0.0
            for i, s in enumerate(top.tolist()):
                if sc[s] <= 0:
                    break
                if conf.matches(target, *self.loc[s]):
                    r = 1.0 / (i + 1)
                    break
            rr[kind].append(r)
            at1[kind].append(r == 1.0)
        out = {f"mrr_{k}": float(np.mean(v)) for k, v in rr.items()}
        out.update({f"r1_{k}": float(np.mean(v)) for k, v in at1.items()})
        out["mrr"] = float(np.mean([out[f"mrr_{k}"] for k in kinds]))
        return out


def tune(bench: Bench, rounds: int, keys=tuple(GRID)) -> tuple[dict, float]:
    best = dict(DEFAULT)
    best_s = bench.evaluate(best)["mrr"]
    for _ in range(rounds):
        changed = False
        for key in keys:
            values = GRID[key]
            for v in values:
                if v == best[key]:
                    continue
                cand = {**best, key: v}
                s = bench.evaluate(cand)["mrr"]
                if s > best_s + 1e-9:
                    best, best_s, changed = cand, s, True
        if not changed:
            break
    return best, best_s


def fmt(p: dict) -> str:
    return (f"k1 {p['k1']}, b {p['b']}, weights body {p['body']} heading {p['heading']} title {p['title']} "
            f"path {p['path']} context {p['context']}")


def line(name: str, ev: dict) -> str:
    return (f"{name:<34} MRR {ev['mrr']:.3f}  (heading {ev['mrr_heading']:.3f}, keywords {ev['mrr_keywords']:.3f}, "
            f"noisy {ev['mrr_noisy']:.3f}; R@1 {ev['r1_heading']:.2f}/{ev['r1_keywords']:.2f}/{ev['r1_noisy']:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", action="append", default=None)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    names = a.corpus or ["rust-book", "eips"]
    dev = {n: Bench(n, a.n, a.seed) for n in names}
    test = {n: Bench(n, a.n, a.seed + 1000) for n in names}
    tuned = {}
    for n in names:
        p, s = tune(dev[n], a.rounds)
        tuned[n] = p
        print(f"\n## tuned on {n} (seed {a.seed}): {fmt(p)}")
        p, s = tune(dev[n], a.rounds, ("k1", "b"))
        tuned[n + " (k1, b only)"] = p
        print(f"## tuned on {n}, k1 and b only: {fmt(p)}")
    print()
    for n in names:
        print(f"## scored on {n}, fresh queries (seed {a.seed + 1000}), {len(test[n].queries)} queries")
        arms = (("seed defaults", SEED), (f"folio now (b {lexical.B})", CURRENT),
                *((f"tuned on {m}", p) for m, p in tuned.items()))
        for label, p in arms:
            print(line(f"  {label}", test[n].evaluate(p)))
        if test[n].natural:
            print(f"## scored on {n}, {len(test[n].natural)} hand-written natural questions (never tuned on)")
            for label, p in arms:
                ev = test[n].evaluate(p, natural=True)
                print(f"  {label:<32} MRR {ev['mrr']:.3f}  R@1 {ev['r1_natural']:.2f}")


if __name__ == "__main__":
    main()
