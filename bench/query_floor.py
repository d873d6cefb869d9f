"""`folio query` against the bare query baseline at all of md-history, with another checkout's folio
in the same rounds.

    python bench/query_floor.py [--before CHECKOUT] [--queries 40] [--dim 768] [--port 18792]
                                [--files N] [--dest DIR] [--mode semantic|hybrid|lexical] [--record]

The floor is bench/baseline_query.py: numpy and httpx imported, one request for the question, the
same matrix mapped, one `M @ q` and one argpartition (whole process). Target: folio's whole-process
query <= 1.5x the floor. Each question runs the bare script, folio, and (with --before) the other
checkout's folio (PYTHONPATH, started through the console entry point its pyproject.toml names)
back to back, so the ratios compare runs that met the same load; medians over the questions, and
the median of the per-question ratios beside them.

Corpus: the index bench/reindex_floor.py builds (all of md-history, 526k records at the default
budget, or its first --files N files, against tests/fakeserver.py --cheap at --dim; DEST default
/tmp/folio-bench/floor-md-history): run that first, or this script builds it the same way. Questions are the corpus's own headings (run_all.query_texts).

`--facets` (issue 40) adds a variant in every round: this checkout's folio asked the same question
with both agent facets (`--words`: the heading's words and one of them quoted as a phrase;
`--passage`: a 50-word passage built around the heading), timed against the same floor and
printed beside the plain query. Target: within 1.5x the floor too (one request, one product over
the matrix for both vectors, one more lexical scoring pass).
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


FACETS = "facets"  # the variant asked with both facets


def facets_of(text: str) -> list[str]:
    """Both facets for a heading (common.facets_for) as `folio query` flags."""
    words, passage = common.facets_for(text)
    return ["--words", words, "--passage", passage]


def query(root: Path, text: str, env: dict, mode: str | None = None, extra: list[str] = ()) -> common.Measured:
    """`folio query TEXT [--mode MODE]`; another checkout's (env PYTHONPATH) through its own console
    entry point. FOLIO_TIMINGS=cpu in env: the stages' CPU times come back in .stages."""
    args = ["query", text, *(["--mode", mode] if mode else []), *extra]
    other = env.get("PYTHONPATH")
    if not other:
        return common.folio(args, root, env)
    code = reindex_floor.entry_code(Path(other))
    return common.measure([sys.executable, "-c", code, *args], root, env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    reindex_floor.shared_options(ap, 18792)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--mode", help="--mode for every folio query (default: none given, folio's default)")
    ap.add_argument("--facets", action="store_true", help="also ask each question with both agent facets")
    a = ap.parse_args()
    variants = reindex_floor.variants_of(a, {**ENV, "FOLIO_TIMINGS": "cpu"})
    if a.facets:
        variants[FACETS] = variants["folio"]
    srv = reindex_floor.cheap_server(a)
    try:
        load_before = common.load()
        root = reindex_floor.prepare(a)
        m = run_all.meta(root)
        bare = run_all.bare_query_cmd(root, m)
        texts = run_all.query_texts(root, a.queries)
        for t in texts[:3]:  # the page cache and every code path warm
            common.measure([*bare, t], root, ENV)
            for v, env in variants.items():
                query(root, t, env, a.mode, facets_of(t) if v == FACETS else [])
        base: list = []
        runs: dict[str, list] = {v: [] for v in variants}
        for t in texts:
            base.append(common.measure([*bare, t], root, ENV))
            for v, env in variants.items():
                runs[v].append(query(root, t, env, a.mode, facets_of(t) if v == FACETS else []))
        load_after = common.load()
    finally:
        srv.stop()
    bw = [r.wall for r in base]
    rows = [("corpus", f"{root.name}: {m['rows']} rows, dim {m['dim']}, zero-cost fake server (--cheap), "
                       f"{len(texts)} questions (its headings), `--mode {a.mode or '(default)'}`"),
            ("bare baseline, whole process: wall", reindex_floor.spread(bw, 1000, "ms", 1)),
            ("bare baseline: CPU", reindex_floor.spread([r.cpu for r in base], 1000, "ms", 1))]
    for v in variants:
        tag = "" if v == "folio" else " [both facets]" if v == FACETS else f" [{v}]"
        fw = [r.wall for r in runs[v]]
        per = statistics.median(f / b for f, b in zip(fw, bw, strict=True))
        rows += [(f"`folio query`{tag}: wall", reindex_floor.spread(fw, 1000, "ms", 1)),
                 (f"`folio query`{tag}: CPU", reindex_floor.spread([r.cpu for r in runs[v]], 1000, "ms", 1)),
                 (f"folio / bare{tag}", f"**{statistics.median(fw) / statistics.median(bw):.2f}x** wall medians; "
                                        f"{per:.2f}x median of per-question ratios (target <= 1.5x); CPU "
                                        f"{statistics.median(r.cpu for r in runs[v]) / statistics.median(r.cpu for r in base):.2f}x"),
                 (f"stages{tag}: CPU ms (FOLIO_TIMINGS=cpu, medians)", reindex_floor.stage_medians(runs[v]))]
    note = (f"Under {load_before} at the start, {load_after} at the end (2 cores shared: ratios within a "
            f"question's round are the verdict).")
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    print(note)
    if a.record:
        common.record("bench/query_floor.py, md-history", rows, note=note)


if __name__ == "__main__":
    main()
