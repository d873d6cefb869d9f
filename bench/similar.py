"""`folio similar PATH:START-END` against a bare one-scan numpy script, at all of md-history (issue 43).

    python bench/similar.py [--sources 30] [--files N] [--dest DIR] [--dim 768] [--port 18793] [--record]
    python bench/similar.py --root DIR [--sources 10]     # any corpus indexed against a fake server

The floor (BARE below): numpy imported, the same matrix mapped, the source's row read, one `M @ v`
and one argpartition, whole process; no request to the server (neither sends one). Target: folio's
whole process <= 1.5x the floor, and no request to the embeddings server (the fake server's
counters, read before and after, must not move). Each source runs the bare script and folio back
to back, so both meet the same load; medians over the sources and the median of per-source
ratios. Sources: sections with a vector spread over the index (one per file, files in slot order).

Corpus: the index bench/reindex_floor.py builds (all of md-history, against tests/fakeserver.py
--cheap at --dim; DEST default /tmp/folio-bench/floor-md-history), built here the same way when
missing; --root: a corpus you indexed yourself (its recorded endpoint must be this run's server,
or give --port of the server it names).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import common  # noqa: E402
import reindex_floor  # noqa: E402
import run_all  # noqa: E402

ENV = reindex_floor.ENV

BARE = """\
import sys
import numpy as np
path, rows, dim, slot, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
m = np.memmap(path, dtype="<f4", mode="r", shape=(rows, dim))
s = m @ np.array(m[slot])
s[slot] = -np.inf
top = np.argpartition(-s, k - 1)[:k]
top = top[np.argsort(-s[top])]
print("\\n".join(f"{i} {s[i]:.3f}" for i in top.tolist()))
"""


def sources(root: Path, n: int) -> list[tuple[int, str, int, int]]:
    """(slot, path, start, end) of n sections holding a vector, one per file, spread over the index."""
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        rows = c.execute("SELECT MIN(r.slot), f.path FROM records r JOIN files f ON f.id = r.file_id WHERE r.vec = 1 "
                         "GROUP BY r.file_id ORDER BY MIN(r.slot)").fetchall()
        step = max(1, len(rows) // n)
        picked = rows[::step][:n]
        out = []
        for slot, path in picked:
            start, end = c.execute('SELECT start, "end" FROM records WHERE slot = ?', (slot,)).fetchone()
            out.append((slot, path, start, end))
    return out


def requests(base: str) -> int:
    with urllib.request.urlopen(base.removesuffix("/v1/embeddings") + "/stats", timeout=10) as r:
        return int(json.loads(r.read())["requests"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    reindex_floor.shared_options(ap, 18793)
    ap.add_argument("--sources", type=int, default=30)
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--root", type=Path, help="an indexed corpus instead of md-history (see above)")
    a = ap.parse_args()
    srv = reindex_floor.cheap_server(a)
    try:
        load0 = common.load()
        root = a.root.resolve() if a.root else reindex_floor.prepare(a)
        if a.root:
            common.folio(["index", "--endpoint", srv.url], root, ENV, timeout=7200)
        m = run_all.meta(root)
        matrix = str(run_all.matrix_path(root, m))
        picked = sources(root, a.sources)
        print(f"{len(picked)} sources over {root}: {m['rows']} matrix rows, dim {m['dim']} ({load0})", flush=True)
        spec = [f"{p}:{s}-{e}" for _slot, p, s, e in picked]
        common.folio(["similar", spec[0]], root, ENV)  # both paths warm (page cache)
        common.measure([sys.executable, "-c", BARE, matrix, m["rows"], m["dim"], str(picked[0][0]), str(a.limit)])
        before = requests(srv.url)
        bare, folio, ratios = [], [], []
        for (slot, *_rest), sp in zip(picked, spec, strict=True):
            b = common.measure([sys.executable, "-c", BARE, matrix, m["rows"], m["dim"], str(slot), str(a.limit)],
                               root, ENV)
            f = common.folio(["similar", sp, "-l", str(a.limit)], root, ENV)
            bare.append(b.wall)
            folio.append(f.wall)
            ratios.append(f.wall / b.wall)
        sent = requests(srv.url) - before
        load1 = common.load()
    finally:
        srv.stop()
    rows = [
        ("corpus", f"{root.name}: {m['rows']} matrix rows, dim {m['dim']}; fake server --cheap"),
        ("bare one-scan script, whole process", reindex_floor.spread(bare, 1000, "ms", 1)),
        ("`folio similar PATH:START-END`, whole process", reindex_floor.spread(folio, 1000, "ms", 1)),
        ("folio / bare", f"**{statistics.median(folio) / statistics.median(bare):.2f}x** wall medians; "
                         f"{statistics.median(ratios):.2f}x median per-source ratio (target <= 1.5x)"),
        ("requests to the embeddings server", f"{sent} (target 0)"),
    ]
    common.show(rows, 46)
    if a.record:
        common.record(f"folio similar vs a bare one-scan script: {root.name}", rows,
                      note=f"bench/similar.py, {len(picked)} sources, each timed as a bare script then "
                           f"`folio similar`, back to back. {load0} at the start, {load1} at the end.")


if __name__ == "__main__":
    main()
