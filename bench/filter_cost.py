"""What a frontmatter filter adds to a query, at ~119k records (target: filtered <= 1.3x unfiltered).

Indexes the first N files of md-history (default 8000: ~118.5k records) with the fake server at
dim 768 (kept between runs under --work; an unchanged corpus re-indexes in a second), then times
whole `folio query` processes, unfiltered and with each filter, alternating, and reports medians,
ratios and the in-process cost of filters.apply alone.

    python bench/filter_cost.py [--files 8000] [--runs 9] [--work /tmp/folio-filter-cost] [--no-record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import common  # noqa: E402
import corpora  # noqa: E402

FILTERS = [
    ("--where status!=Withdrawn", ["--where", "status!=Withdrawn"]),
    ("--where 'status=Final|status=Last Call' --where '!superseded-by'",
     ["--where", "status=Final|status=Last Call", "--where", "!superseded-by"]),
    ("--exclude-pointed-by superseded-by --identity eip", ["--exclude-pointed-by", "superseded-by", "--identity", "eip"]),
    ("--exclude-pointed-by replaces --identity @path", ["--exclude-pointed-by", "replaces", "--identity", "@path"]),
]
QUERY = "how is the base fee adjusted between blocks"


def timed(args, cwd: Path, env: dict) -> float:
    return common.run(["query", QUERY, "--no-refresh", "-l", "10", *args], cwd, env)[0]


def in_process(root: Path, runs: int) -> list[tuple[str, float, int, int]]:
    from folio import filters
    from folio.store import Store

    out = []
    store = Store.open(root)
    try:
        with store.snapshot():
            slots, file_ids = store.live()
            for label, args in FILTERS:
                where = tuple(args[i + 1] for i, a in enumerate(args) if a == "--where")
                pointers = tuple(args[i + 1] for i, a in enumerate(args) if a == "--exclude-pointed-by")
                identity = next((args[i + 1] for i, a in enumerate(args) if a == "--identity"), "id")
                best = float("inf")
                for _ in range(runs):
                    t = time.perf_counter()
                    keep, dropped, _ = filters.apply(store, slots, file_ids, where, pointers, identity)
                    best = min(best, time.perf_counter() - t)
                out.append((label, best, int(keep.sum()), dropped))
    finally:
        store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=8000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--work", type=Path, default=Path("/tmp/folio-filter-cost"))
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()

    root = args.work / f"md-history-{args.files}"
    if not root.is_dir():
        corpora.subset(corpora.unpack("md-history"), args.files, root)
    env = {"XDG_CONFIG_HOME": str(args.work / "xdg")}
    srv = common.fake_server(dim=768)
    try:
        t = time.perf_counter()
        _, out, _ = common.run(["index", "--endpoint", srv.url, "--jobs", "2"], root, env)
        print(f"{out.strip()} ({time.perf_counter() - t:.1f} s)")
        timed([], root, env)  # warm the page cache
        base: list[float] = []
        each: dict[str, list[float]] = {label: [] for label, _ in FILTERS}
        for _ in range(args.runs):  # alternate, so a slow spell on a shared machine hits every variant
            base.append(timed([], root, env))
            for label, flags in FILTERS:
                each[label].append(timed(flags, root, env))
    finally:
        srv.stop()
    b = statistics.median(base)
    rows = [("corpus", f"md-history, first {args.files} files; fake server dim 768; query -l 10 --no-refresh"),
            ("unfiltered, whole process", common.fmt(common.stats(base), "ms", 1000))]
    for label, ts in each.items():
        m = statistics.median(ts)
        rows.append((label, f"{common.fmt(common.stats(ts), 'ms', 1000)}: {m / b:.2f}x, {1000 * (m - b):+.0f} ms"))
    for label, best, kept, dropped in in_process(root, args.runs):
        rows.append((f"filters.apply alone, {label}", f"{1000 * best:.1f} ms best ({kept} records kept, "
                                                      f"{dropped} dropped)"))
    for k, v in rows:
        print(f"{k:<70} {v}")
    if not args.no_record:
        common.record("filters: filtered vs unfiltered query", rows)


if __name__ == "__main__":
    main()
