"""What a frontmatter filter adds to a query, at ~119k records (target: filtered <= 1.3x unfiltered).

Indexes the first N files of md-history (default 8000: ~118.5k records) with the fake server at
dim 768 (kept between runs under --work; an unchanged corpus re-indexes in a second), then times
whole `folio query` processes, unfiltered and with each filter, alternating, and reports medians,
ratios and the in-process cost of filters.apply alone.

    python bench/filter_cost.py [--files 8000] [--runs 9] [--work /tmp/folio-filter-cost]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpora  # noqa: E402

FILTERS = [
    ("--where status!=Withdrawn", ["--where", "status!=Withdrawn"]),
    ("--where 'status=Final|status=Last Call' --where '!superseded-by'",
     ["--where", "status=Final|status=Last Call", "--where", "!superseded-by"]),
    ("--exclude-pointed-by superseded-by --identity eip", ["--exclude-pointed-by", "superseded-by", "--identity", "eip"]),
    ("--exclude-pointed-by replaces --identity @path", ["--exclude-pointed-by", "replaces", "--identity", "@path"]),
]
QUERY = "how is the base fee adjusted between blocks"


def folio(*args, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "folio"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "folio"]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, check=True)


def timed(args, cwd: Path) -> float:
    t = time.perf_counter()
    folio("query", QUERY, "--no-refresh", "-l", "10", *args, cwd=cwd)
    return time.perf_counter() - t


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
    args = ap.parse_args()

    root = args.work / f"md-history-{args.files}"
    if not root.is_dir():
        corpora.subset(corpora.unpack("md-history"), args.files, root)
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "fakeserver.py"), "--port", "0", "--dim", "768"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = proc.stdout.readline().strip() + "/v1/embeddings"
        t = time.perf_counter()
        rep = folio("index", "--endpoint", url, "--jobs", "2", cwd=root)
        print(f"{rep.stdout.strip()} ({time.perf_counter() - t:.1f} s)")
        timed([], root)  # warm the page cache
        base: list[float] = []
        each: dict[str, list[float]] = {label: [] for label, _ in FILTERS}
        for _ in range(args.runs):
            base.append(timed([], root))
            for label, flags in FILTERS:
                each[label].append(timed(flags, root))
    finally:
        proc.terminate()
        proc.wait()
    b = statistics.median(base)
    print(f"whole process, median of {args.runs}: unfiltered {1000 * b:.0f} ms")
    for label, ts in each.items():
        m = statistics.median(ts)
        print(f"  {label}: {1000 * m:.0f} ms  ({m / b:.2f}x, +{1000 * (m - b):.0f} ms)")
    print("filters.apply alone, best of runs (records kept, dropped by the join):")
    for label, best, kept, dropped in in_process(root, args.runs):
        print(f"  {label}: {1000 * best:.1f} ms  ({kept} kept, {dropped} dropped)")


if __name__ == "__main__":
    main()
