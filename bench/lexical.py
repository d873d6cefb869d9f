"""The lexical plane's two costs at scale: query latency beside the semantic query, and index time.

    python bench/lexical.py [--records 119000] [--dim 768] [--reps 7] [--skip-index-cost]

1. Corpus: the first N files of md-history (sorted paths) until they hold >= --records records,
   copied once to /tmp/folio-bench-lexical/md<k>k (nothing under /tmp/folio-bench is written).
2. Query latency: the corpus indexed against tests/fakeserver.py at --dim (zero delay), then
   `folio query TEXT --json --no-refresh` whole-process, semantic vs `--lexical`, warm cache,
   median of --reps runs per query; and in-process (search.run) split into stages, which is where
   a ratio is not drowned by interpreter start-up. Target: lexical within 1.5x of semantic.
3. Index-time cost: folio's own work with no endpoint (walk, stat, read, hash, parse, SQLite
   write) timed in-process, with the lexical plane built and with build_segment/merge replaced
   by functions returning an empty segment, alternating arms, median of 3; and the time spent inside the plane's own functions
   (analyse+build, write, merge) measured directly. Target: at most +25%.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import corpora  # noqa: E402

BASE = Path("/tmp/folio-bench-lexical")
QUERIES = (
    "withdrawal credentials of validators",
    "graduation criteria for beta",
    "gas cost of SSTORE",
    "pod scheduling readiness gates",
    "how does the base fee change between blocks",
    "feature gate rollout and rollback plan",
)


def folio_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "folio"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "folio"]


def build_corpus(records: int) -> Path:
    """First files of md-history (sorted) until they hold >= `records` records."""
    from folio import sections

    src = corpora.unpack("md-history")
    dest = BASE / f"md{records // 1000}k"
    if (dest / ".complete").is_file():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    total = 0
    for p in corpora.markdown_files(src):
        text, _ = sections.decode(p.read_bytes())
        total += len(sections.parse_document(text, sections_budget()).records)
        target = dest / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)
        if total >= records:
            break
    (dest / ".complete").write_text(f"{total}\n")
    return dest


def sections_budget() -> int:
    from folio.config import DEFAULT_BUDGET

    return DEFAULT_BUDGET


def timed(cmd, cwd, env) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
    return dt


def query_latency(root: Path, dim: int, reps: int) -> None:
    from helpers import FakeServer

    srv = FakeServer(dim=dim)
    try:
        env = dict(os.environ, FOLIO_ENDPOINT=srv.url)
        n_files = sum(1 for _ in root.rglob("*.md"))
        if not (root / ".folio").is_dir():
            print(f"indexing {n_files} files against the fake server at dim {dim} ...", flush=True)
            t = timed([*folio_cmd(), "index"], root, env)
            print(f"  folio index: {t:.1f} s")
        else:  # bring it up to date (and make sure the fake server's space is the recorded one)
            timed([*folio_cmd(), "index"], root, env)
        import sqlite3

        db = sqlite3.connect(root / ".folio" / "index.db")
        n_rec, n_vec = db.execute("SELECT COUNT(*), SUM(vec) FROM records").fetchone()
        db.close()
        print(f"\n## query latency: {n_files} files, {n_rec} records ({n_vec} with vectors), dim {dim}")
        print("whole process, median of", reps, "runs (ms):")
        print(f"  {'query':<46} {'semantic':>9} {'lexical':>9} {'ratio':>6}")
        ratios, sem_all, lex_all = [], [], []
        for q in QUERIES:
            base = [*folio_cmd(), "query", q, "--json", "--no-refresh"]
            timed(base, root, env)  # warm
            timed([*base, "--lexical"], root, env)
            sem = statistics.median(timed(base, root, env) for _ in range(reps))
            lex = statistics.median(timed([*base, "--lexical"], root, env) for _ in range(reps))
            ratios.append(lex / sem)
            sem_all.append(sem)
            lex_all.append(lex)
            print(f"  {q:<46} {sem * 1e3:>9.0f} {lex * 1e3:>9.0f} {lex / sem:>6.2f}")
        print(f"  {'median':<46} {statistics.median(sem_all) * 1e3:>9.0f} "
              f"{statistics.median(lex_all) * 1e3:>9.0f} {statistics.median(ratios):>6.2f}")
        in_process(root, srv.url, reps)
    finally:
        srv.stop()


def staged(call) -> tuple[float, dict[str, float]]:
    """(seconds the call took, seconds per stage as folio.timing charged them)."""
    from folio import timing

    timing.start()
    t = time.perf_counter()
    call()
    return time.perf_counter() - t, timing.spent()


def in_process(root: Path, url: str, reps: int) -> None:
    from folio import config, search

    os.environ["FOLIO_ENDPOINT"] = url
    settings = config.resolve(root, {})
    print("\nin-process search.run, median of", reps, "(ms; scan = rank incl. scoring, conf = confidence block):")
    print(f"  {'query':<46} {'sem total':>9} {'sem scan':>9} {'lex total':>9} {'lex scan':>9} {'lex conf':>9}")
    rows = []
    for q in QUERIES:
        out = {}
        for mode in ("semantic", "lexical"):
            totals, scans, confs = [], [], []
            for i in range(reps + 1):
                req = search.Request(q, limit=5, refresh=False, mode=mode, want_confidence=True)
                total, stages = staged(lambda: search.run(root, req, settings))  # noqa: B023 - called at once
                if i:
                    totals.append(total)
                    scans.append(stages.get("records", 0.0) + stages.get("scan", 0.0))
                    confs.append(stages.get("confidence", 0.0))
            out[mode] = (statistics.median(totals), statistics.median(scans), statistics.median(confs))
        rows.append(out)
        print(f"  {q:<46} {out['semantic'][0] * 1e3:>9.1f} {out['semantic'][1] * 1e3:>9.1f} "
              f"{out['lexical'][0] * 1e3:>9.1f} {out['lexical'][1] * 1e3:>9.1f} {out['lexical'][2] * 1e3:>9.1f}")
    med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    print(f"  {'median':<46} {med([r['semantic'][0] for r in rows]):>9.1f} "
          f"{med([r['semantic'][1] for r in rows]):>9.1f} {med([r['lexical'][0] for r in rows]):>9.1f} "
          f"{med([r['lexical'][1] for r in rows]):>9.1f} {med([r['lexical'][2] for r in rows]):>9.1f}")


def index_cost(root: Path, rounds: int = 3) -> None:
    """In-process: folio's no-endpoint index run with and without the lexical plane."""
    from folio import indexer
    from folio import store as storemod
    from folio.config import resolve
    from folio.lexical import analysis
    from folio.lexical import segments as lexical
    from folio.walk import walk

    work = BASE / "index-cost"
    if not work.is_dir():
        shutil.copytree(root, work, ignore=shutil.ignore_patterns(".folio", ".complete"))
    settings = resolve(work, {})
    real_build, real_merge, real_write = lexical.build_segment, lexical.merge_segments, storemod.Store._write_segment
    spent = {"build": 0.0, "write": 0.0, "merge": 0.0}

    def build(docs):
        t = time.perf_counter()
        try:
            return real_build(docs)
        finally:
            spent["build"] += time.perf_counter() - t

    def write(self, seg):
        t = time.perf_counter()
        try:
            return real_write(self, seg)
        finally:
            spent["write"] += time.perf_counter() - t

    def merge(*a, **k):
        t = time.perf_counter()
        try:
            return real_merge(*a, **k)
        finally:
            spent["merge"] += time.perf_counter() - t

    def cpu() -> float:
        # this process and its reaped children: the parse workers, joined at the end of each run
        import resource

        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    cpu_of: dict[bool, list[float]] = {True: [], False: []}

    def one(with_plane: bool) -> float:
        storemod.discard(work)
        c0 = cpu()
        empty = lexical._empty_segment  # without the plane: every segment is empty (a few bytes to write)
        lexical.build_segment = build if with_plane else (lambda docs: empty())
        lexical.merge_segments = merge if with_plane else (lambda *a, **k: empty())
        storemod.Store._write_segment = write
        for cache in ("_RAW_CACHE", "_HASH_CACHE"):  # each arm starts cold
            getattr(analysis, cache, {}).clear()
        t0 = time.perf_counter()
        lock = storemod.acquire_lock(work)
        st = storemod.Store.open(work, write=True)
        st.hold(lock)
        try:
            entries, _ = walk(work, settings["extensions"], settings["exclude"])
            before = st.segment_names()
            rep = indexer.update(st, work, None, budget=settings["max_chars"], entries=entries)
            indexer._finish(st, before, rep)
        finally:
            st.close()
        cpu_of[with_plane].append(cpu() - c0)
        return time.perf_counter() - t0

    with_t, without_t, parts = [], [], []
    for _ in range(rounds):
        without_t.append(one(False))
        for k in spent:
            spent[k] = 0.0
        with_t.append(one(True))
        parts.append(dict(spent))
    lexical.build_segment, lexical.merge_segments, storemod.Store._write_segment = real_build, real_merge, real_write
    w, wo = statistics.median(with_t), statistics.median(without_t)
    p = {k: statistics.median(x[k] for x in parts) for k in spent}
    plane = sum(p.values())
    n_files = sum(1 for _ in work.rglob("*.md"))
    print(f"\n## index-time cost of the lexical plane: {n_files} files, no endpoint, median of {rounds}")
    print(f"  index run without the plane  {wo:7.2f} s   (walk, read, hash, parse, SQLite)")
    print(f"  index run with the plane     {w:7.2f} s   (+{(w - wo) / wo * 100:.1f}% by difference)")
    print(f"  inside the plane's functions {plane:7.2f} s   (+{plane / wo * 100:.1f}% of the run without it): "
          f"analyse+build {p['build']:.2f} s, write {p['write']:.2f} s, merge {p['merge']:.2f} s")
    cw, cwo = statistics.median(cpu_of[True]), statistics.median(cpu_of[False])
    print(f"  CPU (this process + parse workers): without {cwo:.2f} s, with {cw:.2f} s "
          f"(+{(cw - cwo) / cwo * 100:.1f}%; the plane's functions are +{plane / cwo * 100:.1f}% of it)")
    segments_vs_one(work)


def segments_vs_one(work: Path, reps: int = 5) -> None:
    """Lexical query time on the segments a lexical-only run leaves, then on one merged segment."""
    import numpy as np

    from folio import config, search
    from folio import store as storemod
    from folio.lexical import segments as lexical

    settings = config.resolve(work, {})

    def med() -> float:
        out = []
        for q in QUERIES:
            req = search.Request(q, limit=5, refresh=False, mode="lexical", want_confidence=True)
            search.run(work, req, settings)
            out.append(statistics.median(staged(lambda: search.run(work, req, settings))[0]  # noqa: B023
                                         for _ in range(reps)))
        return statistics.median(out)

    st = storemod.Store.open(work)
    n = len(st.segment_names())
    st.close()
    t_many = med()
    lock = storemod.acquire_lock(work)
    st = storemod.Store.open(work, write=True)
    st.hold(lock)
    try:
        slots, _ = st.live(vectors_only=False)
        live = np.zeros(st.next_slot(), dtype=bool)
        live[slots] = True
        t0 = time.perf_counter()
        st.replace_segments(lexical.merge_segments(st.lex_segments(), live))
        t_merge = time.perf_counter() - t0
    finally:
        st.close()
    t_one = med()
    print(f"  lexical query (in-process, median): {t_many * 1e3:.0f} ms on the run's {n} segments, "
          f"{t_one * 1e3:.0f} ms on one merged segment (merging them took {t_merge:.2f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=119_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--skip-query", action="store_true")
    ap.add_argument("--skip-index-cost", action="store_true")
    a = ap.parse_args()
    root = build_corpus(a.records)
    print(f"corpus: {root} ({(root / '.complete').read_text().strip()} records by folio's parser)")
    if not a.skip_query:
        query_latency(root, a.dim, a.reps)
    if not a.skip_index_cost:
        index_cost(root)


if __name__ == "__main__":
    main()
