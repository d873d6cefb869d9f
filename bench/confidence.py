"""Calibrate the confidence floors on real corpora: answerable queries against queries that carry
made-up terms or whose real terms sit in unrelated sections.

    python bench/confidence.py [--corpus rust-book --corpus eips] [--n 150] [--seed 7]
                               [--endpoint URL --model NAME] [--json out.json]

Each corpus is copied under /tmp/folio-bench-confidence/<name> and indexed with the real `folio
index` (no server: lexical only; with --endpoint: semantic too). Queries are generated from the
index itself (seeded, so a run is reproducible):

- heading:  a section's heading words (target = that section)
- keywords: 3 distinctive words of a section's body (df <= 2% of records; target = that section)
- noisy:    the heading plus 2 frequent corpus words that the section does not contain
            (the filler of a real question: "how", "use", "example" ...)
- madeup:   keywords plus one made-up word (the corpus does not contain it)
- chimera:  3 distinctive words from 3 sections of 3 different files (every word real, no
            section holds the question)
- natural:  the hand-written questions of bench/labels/<corpus>_natural.yaml (typed the way a
            developer searches; target path + heading), when that file exists

Every query runs through folio's own search.run (mode lexical, or semantic with --endpoint) and
keeps the confidence block's numbers; the band is a pure function of those numbers, so every
floor pair is evaluated offline from one run. Printed: per query kind the share landing in each
band at the chosen floors, and a sweep of the separation floor (and doc_coverage floor) scoring
"grounded <=> the top row is the target" over heading/keywords/noisy and "never grounded" over
chimera. No timing assertion here: this measures the ladder, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpora  # noqa: E402

from folio import lexical  # noqa: E402

BASE = Path("/tmp/folio-bench-confidence")
KINDS = ("heading", "keywords", "noisy", "natural", "madeup", "chimera")
ANSWERABLE = ("heading", "keywords", "noisy", "natural")
LABELS = REPO / "bench" / "labels"
SEP_FLOORS = (0.0, 0.02, 0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3)
DOC_FLOORS = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
_WORD = re.compile(r"[^\W_]+")


def folio_bin() -> list[str]:
    exe = Path(sys.executable).parent / "folio"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "folio"]


def prepare(name: str, endpoint: str | None, model: str | None) -> Path:
    src = corpora.unpack(name)
    root = BASE / (name + ("-sem" if endpoint else ""))
    if not root.is_dir():
        shutil.copytree(src, root)
    env = dict(os.environ)
    env["FOLIO_ENDPOINT"] = endpoint or "http://127.0.0.1:9/v1/embeddings"  # nothing listens on 9
    if model:
        env["FOLIO_MODEL"] = model
    r = subprocess.run([*folio_bin(), "index", str(root)], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"folio index {root} failed: {r.stderr}")
    return root


def made_up_word(rng: random.Random, vocab: set[str]) -> str:
    cons, vows = "bdfgklmnprstvz", "aeiou"
    while True:
        w = "".join(rng.choice(cons) + rng.choice(vows) for _ in range(rng.randint(3, 4))) + rng.choice("kxqz")
        if lexical.stem(w) not in vocab:
            return w


def load_records(root: Path):
    """[(path, start, end, heading, body words)] for every record, and df per analysed term."""
    from folio.sections import decode
    from folio.store import Store

    store = Store.open(root)
    try:
        slots, _ = store.live(vectors_only=False)
        rows = store.records(slots.tolist())
        files = store.files({r.file_id for r in rows.values()})
    finally:
        store.close()
    texts: dict[str, list[str]] = {}
    out = []
    df: Counter = Counter()
    for r in sorted(rows.values(), key=lambda r: (files[r.file_id]["path"], r.start)):
        path = files[r.file_id]["path"]
        if path not in texts:
            texts[path] = decode((root / path).read_bytes())[0].split("\n")
        body = "\n".join(texts[path][r.start - 1:r.end])
        words = _WORD.findall(body)
        terms = {t for t in lexical.analyze(body)} | set(lexical.analyze(r.heading))
        df.update(terms)
        out.append((path, r.start, r.end, r.heading, words, terms))
    return out, df


def make_queries(recs, df, n: int, rng: random.Random):
    N = len(recs)
    vocab = set(df)
    rare_max = max(2, int(0.02 * N))
    common = [t for t, c in df.most_common(60)]
    surf_common: dict[str, str] = {}
    for _p, _s, _e, _h, words, _t in recs:
        for w in words:
            t = lexical.analyze(w)
            if t and t[0] in common and t[0] not in surf_common and w.isalpha() and w.islower():
                surf_common[t[0]] = w
    common_words = list(surf_common.items())

    def distinctive(words, terms_needed=3):
        cand = []
        seen = set()
        for w in words:
            if not w.isalpha() or len(w) < 4:
                continue
            t = lexical.analyze(w)
            if not t or t[0] in seen:
                continue
            if 1 <= df[t[0]] <= rare_max:
                seen.add(t[0])
                cand.append(w)
        if len(cand) < terms_needed:
            return None
        return rng.sample(cand, terms_needed)

    qs = []
    idx = list(range(N))
    rng.shuffle(idx)
    counts = Counter()
    for i in idx:
        path, s, e, heading, words, terms = recs[i]
        target = (path, s, e)
        htext = " ".join(_WORD.findall(heading))
        hterms = lexical.analyze(htext)
        if counts["heading"] < n and len(set(hterms)) >= 2:
            qs.append(("heading", htext, target))
            counts["heading"] += 1
            noise = [w for t, w in common_words if t not in terms]
            if counts["noisy"] < n and len(noise) >= 2:
                qs.append(("noisy", " ".join([*rng.sample(noise, 2), htext]), target))
                counts["noisy"] += 1
        kw = distinctive(words)
        if kw and counts["keywords"] < n:
            qs.append(("keywords", " ".join(kw), target))
            counts["keywords"] += 1
            if counts["madeup"] < n:
                q = kw[:2] + [made_up_word(rng, vocab)]
                rng.shuffle(q)
                qs.append(("madeup", " ".join(q), target))
                counts["madeup"] += 1
        if all(counts[k] >= n for k in ("heading", "keywords", "noisy", "madeup")):
            break
    by_file = defaultdict(list)
    for i, r in enumerate(recs):
        by_file[r[0]].append(i)
    files = list(by_file)
    tries = 0
    while counts["chimera"] < n and tries < 50 * n and len(files) >= 3:
        tries += 1
        picks = [recs[rng.choice(by_file[f])] for f in rng.sample(files, 3)]
        words = []
        for p in picks:
            d = distinctive(p[4], 1)
            if not d:
                break
            words.append(d[0])
        if len(words) < 3:
            continue
        qs.append(("chimera", " ".join(words), None))
        counts["chimera"] += 1
    return qs


def natural(name: str):
    """[("natural", question, [(path, heading or None), ...])] from bench/labels, if present."""
    import yaml

    f = LABELS / f"{name.replace('-', '_')}_natural.yaml"
    if not f.is_file():
        return []
    out = []
    for q in yaml.safe_load(f.read_text(encoding="utf-8"))["questions"]:
        ok = [(q["path"], q.get("heading"))] + [(a["path"], a.get("heading")) for a in q.get("alternates", [])]
        out.append(("natural", q["q"], ok))
    return out


def matches(target, path: str, start: int, end: int, heading: str) -> bool:
    """Does a result row hit the target: (path, start, end) by overlap, or [(path, heading|None)]."""
    if isinstance(target, tuple):
        return path == target[0] and not (end < target[1] or start > target[2])
    return any(path == p and (h is None or h == heading) for p, h in target)


def run_queries(root: Path, qs, mode: str):
    from folio import config, search

    settings = config.resolve(root, {})
    rows = []
    for kind, text, target in qs:
        req = search.Request(text, limit=5, refresh=False, mode=mode, want_confidence=True)
        ans = search.run(root, req, settings)
        c = ans.confidence
        top_ok = None
        if target is not None:
            h = ans.hits[0] if ans.hits else None
            top_ok = h is not None and matches(target, h.path, h.start, h.end, h.trail[-1] if h.trail else "")
        sc = [h.score for h in ans.hits]
        score_sep = (sc[0] - sc[1]) / sc[0] if len(sc) >= 2 and sc[0] > 0 else (1.0 if len(sc) == 1 else 0.0)
        rows.append({"kind": kind, "q": text, "mode": ans.mode, "top_ok": top_ok, "support": c["support"],
                     "score_separation": round(score_sep, 4),
                     "missing": c["missing"], "separation": c["separation"], "doc_coverage": c["doc_coverage"],
                     "coverage": c["coverage"], "band": c["band"]})
    return rows


def band(r, sep_floor: float, doc_floor: float) -> str:
    if r["support"] == 0:
        return "none"
    if r["missing"] or r["doc_coverage"] < doc_floor:
        return "partial"
    if r["separation"] < sep_floor:
        return "weak"
    return "grounded"


def evaluate(rows, sep_floor: float, doc_floor: float) -> dict:
    """Share grounded per group; `score` = balanced accuracy of "grounded <=> answerable and top-1 right"."""
    g = defaultdict(lambda: [0, 0])
    for r in rows:
        b = band(r, sep_floor, doc_floor) == "grounded"
        if r["kind"] in ANSWERABLE:
            key = "right" if r["top_ok"] else "wrong"
        else:
            key = r["kind"]
        g[key][0] += b
        g[key][1] += 1
    share = {k: v[0] / v[1] for k, v in g.items() if v[1]}
    tpr = share.get("right", 0.0)
    neg = [1 - share[k] for k in ("wrong", "chimera", "madeup") if k in share]
    tnr = sum(neg) / len(neg) if neg else 0.0
    return {"grounded": share, "n": {k: v[1] for k, v in g.items()}, "score": (tpr + tnr) / 2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", action="append", default=None)
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--endpoint")
    ap.add_argument("--model")
    ap.add_argument("--json")
    a = ap.parse_args()
    names = a.corpus or ["rust-book", "eips"]
    mode = "semantic" if a.endpoint else "lexical"
    all_rows = []
    for name in names:
        root = prepare(name, a.endpoint, a.model)
        recs, df = load_records(root)
        qs = make_queries(recs, df, a.n, random.Random(a.seed)) + natural(name)
        rows = run_queries(root, qs, mode)
        for r in rows:
            r["corpus"] = name
        all_rows += rows
        print(f"\n## {name}: {len(recs)} records, {len(qs)} queries ({mode})")
        report(rows)
    if len(names) > 1:
        print("\n## all corpora")
        report(all_rows)
    if a.json:
        Path(a.json).write_text(json.dumps(all_rows, indent=1))


def report(rows) -> None:
    seps = lexical.DEFAULT_SEPARATION_FLOOR
    docs = lexical.DEFAULT_DOC_COVERAGE_FLOOR
    print(f"\nbands at the defaults (separation_floor {seps}, doc_coverage_floor {docs}):")
    print(f"{'kind':<10} {'n':>4} {'top1':>6} {'none':>6} {'partial':>8} {'weak':>6} {'grounded':>9}")
    for kind in KINDS:
        rs = [r for r in rows if r["kind"] == kind]
        if not rs:
            continue
        c = Counter(band(r, seps, docs) for r in rs)
        top = [r["top_ok"] for r in rs if r["top_ok"] is not None]
        top_s = f"{sum(top) / len(top):.2f}" if top else "-"
        print(f"{kind:<10} {len(rs):>4} {top_s:>6} " + " ".join(
            f"{c[b] / len(rs):>{w}.2f}" for b, w in (("none", 6), ("partial", 8), ("weak", 6), ("grounded", 9))))
    for kind in (*ANSWERABLE, "chimera"):
        rs = [r for r in rows if r["kind"] == kind and not r["missing"] and r["support"]]
        if not rs:
            continue
        sep = sorted(r["separation"] for r in rs)
        dc = sorted(r["doc_coverage"] for r in rs)
        q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
        extra = ""
        if kind != "chimera":
            ok = sorted(r["separation"] for r in rs if r["top_ok"])
            bad = sorted(r["separation"] for r in rs if not r["top_ok"])
            if ok and bad:
                extra = f"  separation median when top-1 right {q(ok, .5):.3f}, wrong {q(bad, .5):.3f}"
        print(f"  {kind:<9} separation p10/p50/p90 {q(sep, .1):.3f}/{q(sep, .5):.3f}/{q(sep, .9):.3f}  "
              f"doc_coverage p10/p50/p90 {q(dc, .1):.3f}/{q(dc, .5):.3f}/{q(dc, .9):.3f}{extra}")
    print("\nsweep: share grounded (right = answerable with the target first; want high; the rest want low)")
    print(f"{'sep':>5} {'doc':>5} {'right':>6} {'wrong':>6} {'chimera':>8} {'madeup':>7} {'score':>6}")
    for d in DOC_FLOORS:
        for s in SEP_FLOORS:
            ev = evaluate(rows, s, d)
            g = ev["grounded"]
            print(f"{s:>5.2f} {d:>5.2f} {g.get('right', 0):>6.2f} {g.get('wrong', 0):>6.2f} "
                  f"{g.get('chimera', 0):>8.2f} {g.get('madeup', 0):>7.2f} {ev['score']:>6.3f}")


if __name__ == "__main__":
    main()
