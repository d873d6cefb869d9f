"""Semantic, lexical and hybrid ranking side by side on known-item questions, real MiniLM server.

The questions are bench/hybrid_questions.yaml (drawn by bench/hybrid_questions.py and committed
before any ranking run; see its header for the procedure) plus the hand-written rust-book smoke set
tests/quality/rust_book.yaml (written by another engineer before any ranking run), reported apart.
Every question runs through the real CLI: `folio query Q --mode M --json -l 10`, in the corpus
indexed through llama-server (all-MiniLM-L6-v2 f16, default flags) at a record budget of --budget
characters (MiniLM reads 512 tokens at most and was trained on 256: the default 8000-character
records are refused by the server and re-divided, which costs round trips and ends up smaller
anyway). --scope targets indexes only the files that hold a target (see `prepare`).

A question is answered at rank r when row r's file is the target's and its line range overlaps the
target section's (a merged row holding the section counts; a divided section counts by any piece).
Reported per corpus and overall: MRR@10, recall@1, @3 and @10, and the median whole-process query
time per mode.

Usage: python bench/hybrid.py [--budget 1000] [--scope full|targets] [--corpora rust-book,eips,keps] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import corpora  # noqa: E402
import hybrid_questions  # noqa: E402

from folio import sections  # noqa: E402

MODES = ("semantic", "lexical", "hybrid")
BASE = Path("/tmp/folio-bench/hybrid")
ENV = {"XDG_CONFIG_HOME": str(BASE / "xdg")}
LIMIT = 10


def prepare(name: str, scope: str, targets: set[str]) -> Path:
    """The bench copy of a corpus: every file the questions were drawn from (scope `full`), or
    only the files holding a target (scope `targets`: a smaller corpus for a loaded machine; every
    mode ranks the same records, so the comparison stays fair, but it is an easier task)."""
    src = corpora.unpack(name)
    dest = BASE / f"{name}-{scope}"
    if not dest.is_dir():
        tmp = BASE / f".{name}-{scope}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        files = hybrid_questions.corpus_files(name, src)
        if scope == "targets":
            files = [p for p in files if p.relative_to(src).as_posix() in targets]
        for p in files:
            t = tmp / p.relative_to(src)
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, t)
        tmp.rename(dest)
    return dest


def hand_written() -> list[dict]:
    """tests/quality/rust_book.yaml as targets with line ranges (heading text -> section)."""
    root = corpora.unpack("rust-book")
    data = yaml.safe_load((common.REPO / "tests/quality/rust_book.yaml").read_text())
    out = []
    for q in data["questions"]:
        targets = []
        for t in [{"path": q["path"], "heading": q["heading"]}, *q.get("alternates", [])]:
            text, _ = sections.decode((root / t["path"]).read_bytes())
            s = next(s for s in sections.split_sections(text) if s.heading == t["heading"])
            targets.append((t["path"], s.start, s.end))
        out.append({"q": q["q"], "corpus": "rust-book", "targets": targets})
    return out


def rank_of(results: list[dict], targets: list[tuple[str, int, int]]) -> int | None:
    for r in results:
        for path, start, end in targets:
            if r["path"] == path and r["start"] <= end and r["end"] >= start:
                return r["rank"]
    return None


def metrics(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {"n": n,
            "mrr": sum(1 / r for r in ranks if r) / n,
            "r1": sum(1 for r in ranks if r and r <= 1) / n,
            "r3": sum(1 for r in ranks if r and r <= 3) / n,
            "r10": sum(1 for r in ranks if r and r <= 10) / n}


def run_set(questions: list[dict], roots: dict[str, Path]) -> tuple[dict, dict]:
    """(ranks[mode] per question, query seconds[mode])."""
    ranks: dict[str, list] = {m: [] for m in MODES}
    times: dict[str, list] = {m: [] for m in MODES}
    for i, q in enumerate(questions, 1):
        for mode in MODES:
            dt, out, err = common.run(["query", q["q"], "--mode", mode, "--json", "-l", str(LIMIT), "--no-refresh"],
                                      roots[q["corpus"]], ENV)
            data = json.loads(out)
            if data["mode"] != mode:
                raise RuntimeError(f"asked for {mode}, ranked {data['mode']}: {err.strip()}")
            ranks[mode].append(rank_of(data["results"], q["targets"]))
            times[mode].append(dt)
        print(f"  {i}/{len(questions)} {q['corpus']}: " + ", ".join(f"{m} {ranks[m][-1]}" for m in MODES),
              file=sys.stderr)
    return ranks, times


def _rrf(rank_arrays: list, k: int):
    """Reciprocal-rank fusion: the sum over lists of 1 / (k + rank), -inf where no list ranks a record."""
    import numpy as np

    fused = np.zeros(len(rank_arrays[0]), dtype=np.float64)
    for r in rank_arrays:
        fused += np.where(r > 0, 1.0 / (k + r.astype(np.float64)), 0.0)
    out = fused.astype(np.float32)
    out[~np.logical_or.reduce([r > 0 for r in rank_arrays])] = -np.inf
    return out


def variants(questions: list[dict], roots: dict[str, Path]) -> dict[str, list]:
    """A diagnostic, in-process and per record (no merging): the record rank of the target under
    folio's fusion (fusion.fuse: each plane's shares, one pass), reciprocal-rank fusion (RRF) at
    several k, which folio used until the labeled sets' held-out halves chose the shares
    (docs/ranking.md), and a weighted sum of min-max-normalised scores. On this same set it can only
    say whether another fusion looks worth a separate, held-out measurement."""
    import os

    import numpy as np

    from folio import config, fusion, planes, rows, search
    from folio.lexical.analysis import analyze
    from folio.store import Store

    os.environ.update(ENV)
    names = ["semantic", "lexical", "shares", "rrf k=60", "rrf k=10", "rrf k=200",
             *[f"weighted a={a}" for a in (0.3, 0.5, 0.7)]]
    out: dict[str, list] = {n: [] for n in names}
    stores = {name: Store.open(root) for name, root in roots.items()}
    sessions = {name: search.Session(root, config.resolve(root)) for name, root in roots.items()}  # embeds
    try:
        for q in questions:
            store = stores[q["corpus"]]
            vecs, why, _transient, _cut = planes.embed_query(store, q["q"], sessions[q["corpus"]])
            if vecs is None:
                raise RuntimeError(why)
            qvec = vecs[0]
            slots, _ = store.live(vectors_only=True)
            full = store.matrix() @ qvec.astype(np.float32)
            sem = np.full(len(full), -np.inf, dtype=np.float32)
            sem[slots] = full[slots]
            lex = planes.lexical_dense(store, analyze(q["q"]), slots)
            rs, rl = fusion.ranks(sem), fusion.ranks(fusion._pad(lex, len(sem)))
            shares, _ranks, _rest = fusion.fuse([sem], [fusion._pad(lex, len(sem))], candidates=len(slots))
            fused = {"semantic": sem, "lexical": fusion._pad(lex, len(sem)), "shares": shares[0],
                     **{f"rrf k={k}": _rrf([rs, rl], k) for k in (60, 10, 200)}}
            ns, nl = _minmax(sem), _minmax(fusion._pad(lex, len(sem)))
            for a in (0.3, 0.5, 0.7):
                w = (a * ns + (1 - a) * nl).astype(np.float32)
                w[~np.isfinite(sem)] = -np.inf
                fused[f"weighted a={a}"] = w
            for name, scores in fused.items():
                top = rows._top(scores, LIMIT)
                recs = store.records(top.tolist())
                files = store.files({r.file_id for r in recs.values()})
                results = [{"rank": i, "path": files[recs[s].file_id]["path"], "start": recs[s].start,
                            "end": recs[s].end} for i, s in enumerate(top.tolist(), 1)]
                out[name].append(rank_of(results, q["targets"]))
    finally:
        for store in stores.values():
            store.close()
        for session in sessions.values():
            session.close()
    return out


def _minmax(scores):
    import numpy as np

    ok = np.isfinite(scores)
    out = np.zeros(len(scores), dtype=np.float64)
    if ok.any():
        lo, hi = float(scores[ok].min()), float(scores[ok].max())
        out[ok] = (scores[ok] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def table(title: str, groups: dict[str, dict[str, list]]) -> list[str]:
    lines = [f"**{title}**", "", "| set | n | mode | MRR@10 | recall@1 | recall@3 | recall@10 |",
             "|---|---|---|---|---|---|---|"]
    for name, ranks in groups.items():
        ms = {m: metrics(ranks[m]) for m in MODES}
        best = max(ms[m]["mrr"] for m in MODES)
        for m in MODES:
            x = ms[m]
            mrr = f"**{x['mrr']:.3f}**" if x["mrr"] == best else f"{x['mrr']:.3f}"
            lines.append(f"| {name} | {x['n']} | {m} | {mrr} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--scope", choices=("full", "targets"), default="full")
    ap.add_argument("--index-only", metavar="URL", help="Only index the bench copies through this server, then stop.")
    ap.add_argument("--corpora", default="rust-book,eips,keps")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    names = a.corpora.split(",")
    drawn = yaml.safe_load((common.REPO / "bench/hybrid_questions.yaml").read_text())["questions"]
    drawn = [{**q, "targets": [(q["path"], q["start"], q["end"])]} for q in drawn if q["corpus"] in names]
    roots = {name: prepare(name, a.scope, {q["path"] for q in drawn if q["corpus"] == name} |
                           ({t[0] for q in hand_written() for t in q["targets"]} if name == "rust-book" else set()))
             for name in names}
    if a.index_only:
        for name, root in roots.items():
            dt, out, _ = common.run(["index", str(root), "--endpoint", a.index_only, "--max-chars", str(a.budget)],
                                    root, ENV)
            print(f"indexed {name} in {dt:.0f} s: {out.strip()}", file=sys.stderr)
        return
    srv = common.llama_server()
    try:
        sizes = {}
        for name, root in roots.items():
            dt, out, _ = common.run(["index", str(root), "--endpoint", srv.url, "--max-chars", str(a.budget),
                                     "--json"], root, ENV)
            st = json.loads(common.run(["status", "--json"], root, ENV)[1])
            sizes[name] = f"{st['files']} files, {st['sections']} records at budget {st['budget']}"
            print(f"indexed {name}: {sizes[name]} ({dt:.0f} s)", file=sys.stderr)
        ranks, times = run_set(drawn, roots)
        hand = hand_written() if "rust-book" in names else []
        hranks, htimes = run_set(hand, roots) if hand else ({}, {})
        diag = variants(drawn + hand, roots)
    finally:
        srv.stop()
    by_corpus = {}
    for name in names:
        idx = [i for i, q in enumerate(drawn) if q["corpus"] == name]
        by_corpus[name] = {m: [ranks[m][i] for i in idx] for m in MODES}
    by_corpus["all drawn"] = ranks
    lines = table("Drawn known-item questions (bench/hybrid_questions.yaml)", by_corpus)
    if hand:
        lines += ["", *table("Hand-written rust-book questions (tests/quality/rust_book.yaml)",
                            {"rust-book, hand-written": hranks})]
    lines += ["", "**Diagnostic: other fusions, per record (no merging), all questions above; chosen on the same "
              "set, so not a basis to switch**", "", "| fusion | MRR@10 | recall@1 | recall@3 | recall@10 |",
              "|---|---|---|---|---|"]
    for name, rs in diag.items():
        x = metrics(rs)
        lines.append(f"| {name} | {x['mrr']:.3f} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} |")
    print("\n".join(lines))
    rows = [("server", "llama-server b11434, all-MiniLM-L6-v2 f16, default flags; 2 cores shared"),
            ("corpora", "; ".join(f"{k}: {v}" for k, v in sizes.items()) + f" (scope {a.scope}; asked budget {a.budget} chars, lowered by folio where the server refused a record)"),
            ("limit", f"{LIMIT} rows per query (merged rows; a row answers when it overlaps the target section)")]
    for m in MODES:
        ts = times[m] + (htimes.get(m) or [])
        rows.append((f"query, whole process, {m}", f"median {statistics.median(ts) * 1000:.0f} ms "
                                                   f"(n={len(ts)}, max {max(ts) * 1000:.0f} ms)"))
    for k, v in rows:
        print(f"{k:<32} {v}")
    if not a.no_record:
        common.record("hybrid vs semantic vs lexical, real llama-server", rows, extra=lines)


if __name__ == "__main__":
    main()
