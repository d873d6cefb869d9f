"""Cost per query of each ranking mode, with and without feedback, at 119k and 478k sections (issue 28).

    python bench/mode_cost.py [--sizes 119k,all] [--queries 30] [--dim 768] [--port 18793]
                              [--dest DIR] [--record]

Sizes: `119k` is bench/run_all.py's md-119k (md-history's first files, in path order, up to 119,000
records); `all` is all of md-history (the corpus bench/query_floor.py times). Each is copied to
DEST/<size> (default /tmp/folio-bench/mode-cost) and indexed once against tests/fakeserver.py
--cheap at --dim, like bench/reindex_floor.py's copies; later runs reuse the index.

Per question (the corpus's own headings, run_all.query_texts), back to back so that the ratios
compare runs that met the same load: bench/baseline_query.py (the bare floor: numpy and httpx
imported, one request, one `M @ q`, one argpartition, whole process), then one whole-process
`folio query` per variant:

- semantic, lexical: `--mode semantic` / `--mode lexical` (feedback off, as they rank by default)
- hybrid: `--mode hybrid` with FOLIO_FEEDBACK=off (one scan, two rankings fused)
- hybrid+feedback: `--mode hybrid`, feedback on its defaults (the second semantic pass rescores
  the first pass's candidate pool, folio/feedback.py POOL)
- hybrid+feedback, whole scan: the same with FOLIO_FEEDBACK_POOL=0 (a second product over the
  whole matrix)

Medians over the questions; "x bare" is the ratio of the medians (bars/07: the default query
<= 1.5x the bare script).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import common  # noqa: E402
import reindex_floor  # noqa: E402
import run_all  # noqa: E402

ENV = reindex_floor.ENV
VARIANTS = {
    "semantic": (["--mode", "semantic"], {}),
    "lexical": (["--mode", "lexical"], {}),
    "hybrid": (["--mode", "hybrid"], {"FOLIO_FEEDBACK": "off"}),
    "hybrid+feedback": (["--mode", "hybrid"], {"FOLIO_FEEDBACK": "auto"}),
    "hybrid+feedback, whole scan": (["--mode", "hybrid"], {"FOLIO_FEEDBACK": "auto", "FOLIO_FEEDBACK_POOL": "0"}),
}


def measure_size(a, size: str) -> list[tuple[str, str]]:
    files = run_all.files_for_records(run_all.TARGET_119K) if size == "119k" else 0
    opts = argparse.Namespace(files=files, dest=a.dest / size, port=a.port)
    root = reindex_floor.prepare(opts)
    m = run_all.meta(root)
    bare = run_all.bare_query_cmd(root, m)
    texts = run_all.query_texts(root, a.queries)
    for t in texts[:3]:  # the page cache and every code path warm
        common.measure([*bare, t], root, ENV)
        for flags, env in VARIANTS.values():
            common.folio(["query", t, *flags], root, {**ENV, **env})
    base, runs = [], {v: [] for v in VARIANTS}
    for t in texts:
        base.append(common.measure([*bare, t], root, ENV))
        for v, (flags, env) in VARIANTS.items():
            runs[v].append(common.folio(["query", t, *flags], root, {**ENV, **env}))
    bw = statistics.median(r.wall for r in base)
    label = f"{size} ({m['rows']} rows, dim {m['dim']})"
    rows = [(f"{label}: bare one-scan script", f"{bw * 1000:.0f} ms wall, "
                                               f"{statistics.median(r.cpu for r in base) * 1000:.0f} ms CPU")]
    for v, got in runs.items():
        w = statistics.median(r.wall for r in got)
        rows.append((f"{label}: {v}", f"{w * 1000:.0f} ms wall (**{w / bw:.2f}x** bare), "
                                      f"{statistics.median(r.cpu for r in got) * 1000:.0f} ms CPU"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="119k,all")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--port", type=int, default=18793)
    ap.add_argument("--dest", type=Path, default=Path("/tmp/folio-bench/mode-cost"))
    ap.add_argument("--record", action="store_true", help="append the rows to docs/benchmarks.md")
    a = ap.parse_args()
    a.dest.mkdir(parents=True, exist_ok=True)
    run_all.BASE = a.dest  # where files_for_records keeps its count
    srv = reindex_floor.cheap_server(a)
    load_before = common.load()
    rows = []
    try:
        for size in a.sizes.split(","):
            rows += measure_size(a, size)
            for k, v in rows[-1 - len(VARIANTS):]:
                print(f"{k}  {v}", flush=True)
    finally:
        srv.stop()
    note = (f"{a.queries} questions per size (each corpus's own headings), whole-process `folio query`, "
            f"zero-cost fake server; under {load_before} at the start, {common.load()} at the end "
            f"(2 cores shared: compare within a size).")
    print(note)
    if a.record:
        common.record("bench/mode_cost.py: cost per query by mode", rows, note=note)


if __name__ == "__main__":
    main()
