"""The query's array stages at a corpus size, this checkout against another's, on synthetic scores.

    python bench/query_arrays.py --before CHECKOUT [--slots 1912120] [--live 1305736] [--runs 7] [--record]

No index, no server: the stages that work on one float per slot (the scan's masking of the
product, hybrid fusion's ranks and shares, the rows' top window) on arrays the size of a corpus
(default: issue 31's 2M corpus, 1,912,120 slots of which 1,305,736 hold a vector), each function
imported from both checkouts and run on the same arrays, with its answers compared. CPU time
(process_time), the minimum of --runs (the machine is shared). The scan's product itself is the
floor's (`M @ q`) and is not timed here; the masking around it is.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def load(checkout: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"{checkout.name}_{name}", checkout / "folio" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def best(f, runs: int) -> float:
    out = []
    for _ in range(runs):
        t = time.process_time()
        f()
        out.append(time.process_time() - t)
    return min(out) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--slots", type=int, default=1_912_120)
    ap.add_argument("--live", type=int, default=1_305_736)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--record", action="store_true", help="append the lines to docs/benchmarks.md")
    a = ap.parse_args()
    lines: list[str] = []

    def say(line: str) -> None:
        print(line)
        lines.append(line)

    rng = np.random.default_rng(0)
    n = a.slots
    slots = np.sort(rng.choice(n, a.live, replace=False))
    full = rng.standard_normal(n).astype(np.float32) / 4
    outside = np.ones(n, dtype=bool)
    outside[slots] = False
    lex = np.full(n, -np.inf, dtype=np.float32)
    hit = slots[rng.random(len(slots)) < 0.05]
    lex[hit] = rng.random(len(hit)).astype(np.float32) * 20

    def mask_old():
        d = np.full(len(full), -np.inf, dtype=np.float32)
        d[slots] = full[slots]
        return d, np.isnan(d).any()

    def mask_new():
        d = full.copy()  # the product's own array (a copy here, so every run starts alike; not timed apart)
        np.putmask(d, outside, np.float32(-np.inf))
        return d, np.isnan(d.min())

    sem = mask_new()[0]
    say(f"{n:,} slots, {a.live:,} candidates, {len(hit):,} with a lexical score; CPU ms, min of {a.runs}")
    say(f"  scan masking: before {best(mask_old, a.runs):.1f}, after {best(mask_new, a.runs):.1f} "
          f"(after includes a copy of the product the query does not make)")
    fb, fa = load(a.before, "fusion"), load(REPO, "fusion")
    assert all(np.array_equal(x, y) for x, y in zip(fb.fuse([sem], [lex])[0], fa.fuse([sem], [lex])[0], strict=True))
    say(f"  fusion.fuse: before {best(lambda: fb.fuse([sem], [lex]), a.runs):.1f}, "
          f"after {best(lambda: fa.fuse([sem], [lex]), a.runs):.1f}")
    fused = fa.fuse([sem], [lex])[0][0]
    rb, ra = load(a.before, "rows"), load(REPO, "rows")
    for name, arr in (("semantic", sem), ("hybrid", fused)):
        old = rb._top(np.round(arr, ra.TIE_DECIMALS), 18)
        new, _vals = ra._top(arr, 18)
        assert set(old.tolist()) == set(new.tolist())
        say(f"  rows' top window ({name}): before {best(lambda arr=arr: rb._top(np.round(arr, 6), 18), a.runs):.1f} "
              f"(with its rounded copy), after {best(lambda arr=arr: ra._top(arr, 18), a.runs):.1f}")
    if a.record:
        import sys

        sys.path.insert(0, str(REPO / "bench"))
        import common

        common.record(f"bench/query_arrays.py, {n:,} slots (before: {a.before.name})",
                      [(line.strip().split(":")[0], line.strip().split(":", 1)[1].strip()) for line in lines[1:]],
                      note=f"{lines[0]}. {common.load()}.")


if __name__ == "__main__":
    main()
