"""How often retired documents crowd a result, and what filtering them out costs.

Draws queries with a fixed seed from the section headings of the EIPs corpus, ranks each one
without a filter and with `--where status!=Withdrawn` (the retired set and the filter are the same
set: documents whose frontmatter says `status: Withdrawn`), and prints

- the share of top-k hits that come from withdrawn documents, unfiltered and filtered (0.0% by
  construction: the point is that it stays so through every later change), and
- how many non-withdrawn hits the filter costs: hits of the unfiltered top-k that are not withdrawn
  and are missing from the filtered top-k although they outscore its k-th row (it should cost
  none; hits tied with the k-th score may trade places, and are counted apart).

Runs the same library call the CLI makes (folio.search.run) against the deterministic fake server,
which it starts itself unless --endpoint is given:

    python bench/contamination.py [--queries 240] [--seed 7] [--limit 10] [--work /tmp/folio-contamination]
        [--no-record]

The figures are printed and appended to docs/benchmarks.md (unless --no-record).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import common  # noqa: E402
import corpora  # noqa: E402

from folio import config, indexer, search  # noqa: E402
from folio.sections import split_sections  # noqa: E402

WITHDRAWN = "Withdrawn"


def headings(root: Path) -> list[str]:
    """Distinct section headings of the corpus, in a stable order."""
    seen = set()
    for path in corpora.markdown_files(root):
        for sec in split_sections(path.read_text(encoding="utf-8", errors="replace")):
            if sec.trail:
                seen.add(sec.trail[-1].strip())
    return sorted(h for h in seen if len(h) > 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=240)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--endpoint", help="an embeddings endpoint to use instead of the fake server")
    ap.add_argument("--work", type=Path, default=Path("/tmp/folio-contamination"),
                    help="where the private copy of the corpus and its index live")
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    os.environ["XDG_CONFIG_HOME"] = str(args.work / "xdg")  # never read the user's own config

    root = args.work / "eips"
    if not root.is_dir():
        args.work.mkdir(parents=True, exist_ok=True)
        shutil.copytree(corpora.unpack("eips"), root)
    srv = None
    endpoint = args.endpoint
    if endpoint is None:
        srv = common.fake_server(dim=args.dim)
        endpoint = srv.url
    try:
        settings = config.resolve(root, {"endpoint": endpoint})
        t = time.perf_counter()
        rep = indexer.run(root, settings)
        print(f"indexed {root} ({rep.embedded} sections embedded, {rep.reused} reused) in "
              f"{time.perf_counter() - t:.1f} s with {endpoint}")
        pool = headings(root)
        queries = random.Random(args.seed).sample(pool, min(args.queries, len(pool)))
        print(f"{len(queries)} queries drawn with seed {args.seed} from {len(pool)} distinct headings")

        hits_plain = hits_filtered = withdrawn_plain = withdrawn_filtered = 0
        cost = swaps = queries_touched = top1_withdrawn = short = 0
        t_plain, t_filtered = [], []
        for q in queries:
            t = time.perf_counter()
            plain = search.run(root, search.Request(q, args.limit, refresh=False), settings)
            t_plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            filtered = search.run(root, search.Request(q, args.limit, where=(f"status!={WITHDRAWN}",),
                                                       refresh=False), settings)
            t_filtered.append(time.perf_counter() - t)
            if plain.mode != "semantic" or filtered.mode != "semantic":
                raise SystemExit(f"the query ranked {plain.mode}ly: {plain.notices}")
            gone = [h for h in plain.hits if h.frontmatter.get("status") == WITHDRAWN]
            hits_plain += len(plain.hits)
            withdrawn_plain += len(gone)
            queries_touched += bool(gone)
            top1_withdrawn += bool(plain.hits) and plain.hits[0].frontmatter.get("status") == WITHDRAWN
            hits_filtered += len(filtered.hits)
            withdrawn_filtered += sum(h.frontmatter.get("status") == WITHDRAWN for h in filtered.hits)
            kept = {(h.path, h.start, h.end) for h in filtered.hits}
            floor = filtered.hits[-1].score if len(filtered.hits) == args.limit else float("-inf")
            for h in plain.hits:
                if h.frontmatter.get("status") != WITHDRAWN and (h.path, h.start, h.end) not in kept:
                    # a hit tied with the filtered k-th score is interchangeable with it (top-k
                    # breaks ties arbitrarily); only a hit that outscores the k-th is a real loss
                    if h.score > floor + 1e-6:
                        cost += 1
                    else:
                        swaps += 1
            short += len(filtered.hits) < args.limit
    finally:
        if srv is not None:
            srv.stop()

    def pct(a: int, b: int) -> str:
        return f"{100.0 * a / b:.1f}%" if b else "n/a"

    rows = [
        ("corpus", f"eips: {len(queries)} queries drawn with seed {args.seed} from {len(pool)} distinct "
                   f"section headings; top-{args.limit}; {'fake server dim ' + str(args.dim) if srv else endpoint}"),
        ("withdrawn share, unfiltered", f"{pct(withdrawn_plain, hits_plain)} ({withdrawn_plain} of {hits_plain} "
                                        f"hits; {queries_touched} queries have one, {top1_withdrawn} at #1)"),
        (f"withdrawn share, --where status!={WITHDRAWN}",
         f"{pct(withdrawn_filtered, hits_filtered)} ({withdrawn_filtered} of {hits_filtered} hits; "
         f"{short} queries short of {args.limit} rows)"),
        ("non-withdrawn hits the filter cost", f"{cost} (plus {swaps} traded for a hit of equal score at the "
                                               f"k-th place)"),
        ("query in-process, median", f"unfiltered {1000 * statistics.median(t_plain):.1f} ms, filtered "
                                     f"{1000 * statistics.median(t_filtered):.1f} ms"),
    ]
    for k, v in rows:
        print(f"{k:<44} {v}")
    if not args.no_record:
        common.record("contamination: withdrawn EIPs in top-10", rows)
    if withdrawn_filtered or cost:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
