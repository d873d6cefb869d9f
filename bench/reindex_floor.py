"""No-op and one-edit re-index against the floor of listing the tree (issue 20).

    python bench/reindex_floor.py [--corpus md-history | --files 15000] [--runs 9] [--dim 768]
                                  [--port 18791] [--dest DIR] [--record]

The floor is a bare Python script that lists the same tree with os.scandir and stats each .md
file (whole process, start-up included: the same interpreter, the same site packages). Each round
runs, back to back, the bare listing, a no-op `folio index` and a `folio index` after one file
was edited, so the ratios compare runs that met the same load; the medians over the rounds are
printed with the median of the per-round ratios beside them.

Targets: no-op <= 1.2x the bare listing; one changed file <= the bare listing + 0.25 s.
A full run that sends nothing still asks a listening server for the fingerprint (one request, see
folio/fingerprint.py), so after the rounds the server is stopped and a few more no-op rounds show
the run without that request. --before CHECKOUT adds another checkout's folio (PYTHONPATH) to
every round: a before/after under the same load. (An older checkout's one-file run drops the
index's cleanset row without writing it back, so folio's own one-file run in the same round pays
for rewriting it whole: run without --before for the one-file cost as a user sees it.)

Corpus: all of md-history (16,013 files; unpacked with bench/corpora.py to DEST, default
/tmp/folio-bench/floor-md-history) or, with --files N, its first N files (freshness.py's copy:
DEST default /tmp/folio-bench/floor-md<N/1000>k). The first run indexes it once against
tests/fakeserver.py --cheap (the zero-cost server) at --dim (about 2 minutes on all of md-history
on a quiet machine, much longer on a loaded one); later runs reuse that index. The edited file
gets an mtime 5 s in the past, so the next no-op run does not read it again under the racy-stamp
rule (a stamp taken within 2 s of a file's mtime is re-checked by content).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import common  # noqa: E402
import corpora  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("FOLIO_")}
TIMED = {**ENV, "FOLIO_TIMINGS": "1"}

LISTING = """\
import os
stack = [os.path.realpath('.')]
n = 0
while stack:
    d = stack.pop()
    with os.scandir(d) as it:
        for e in it:
            if e.name[0] == '.':
                continue
            if e.is_dir():
                stack.append(e.path)
            elif e.name.endswith('.md'):
                e.stat()
                n += 1
print(n)
"""


def prepare(a) -> Path:
    if a.files:
        dest = a.dest or Path(f"/tmp/folio-bench/floor-md{a.files // 1000}k")
        if not dest.is_dir():
            tmp = dest.with_name(dest.name + ".tmp")
            corpora.subset(corpora.unpack("md-history"), a.files, tmp)
            os.rename(tmp, dest)
    else:
        dest = corpora.unpack("md-history", a.dest or Path("/tmp/folio-bench/floor-md-history"))
    (dest / "folio.yaml").write_text(f"endpoint: http://127.0.0.1:{a.port}/v1/embeddings\nmodel: fake\n")
    if not (dest / ".folio" / "index.db").is_file():
        print(f"indexing {dest} once (a few minutes) ...", file=sys.stderr)
    common.folio(["index", "--jobs", "2"], dest, ENV)  # also settles anything touched since
    return dest


def pick_file(root: Path) -> Path:
    """A mid-sized file with a few sections, away from the first directory listed."""
    paths = sorted(p for p in root.rglob("*.md") if ".folio" not in p.parts)
    for p in paths[len(paths) // 2:]:
        if 2000 < p.stat().st_size < 20000 and p.read_text(encoding="utf-8", errors="replace").count("\n#") >= 3:
            return p
    raise SystemExit("no suitable file to edit")


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def spread(xs: list[float], scale: float = 1.0, unit: str = "s", digits: int = 3) -> str:
    return f"{med(xs) * scale:.{digits}f} {unit} ({min(xs) * scale:.{digits}f}-{max(xs) * scale:.{digits}f}, n={len(xs)})"


def stage_medians(runs: list) -> str:
    keys = list(dict.fromkeys(k for r in runs for k in r.stages))
    return ", ".join(f"{k} {med([r.stages.get(k, 0.0) for r in runs]) * 1000:.1f}" for k in keys)


def entry_code(checkout: Path) -> str:
    """`python -c` code that starts another checkout's folio (on PYTHONPATH) through the console entry
    point its own pyproject.toml names, as its installed `folio` script would start it."""
    m = re.search(r'^folio = "([\w.]+):(\w+)"', (checkout / "pyproject.toml").read_text(), re.M)
    return f"import sys\nfrom {m[1]} import {m[2]}\nsys.argv[0] = 'folio'\nsys.exit({m[2]}())"


def run_index(root: Path, env: dict) -> common.Measured:
    """`folio index --json`; another checkout's (env PYTHONPATH) through its own entry point."""
    other = env.get("PYTHONPATH")
    if not other:
        return common.folio(["index", "--json"], root, env)
    return common.measure([sys.executable, "-c", entry_code(Path(other)), "index", "--json"], root, env)


def rounds(root: Path, runs: int, variants: dict[str, dict]) -> dict:
    victim = pick_file(root)
    original = victim.read_bytes()
    st = victim.stat()
    bare: list = []
    noop: dict[str, list] = {v: [] for v in variants}
    one: dict[str, list] = {v: [] for v in variants}
    try:
        for i in range(runs):
            bare.append(common.measure([sys.executable, "-c", LISTING], root, ENV))
            for name, env in variants.items():
                r = run_index(root, env)
                rep = json.loads(r.stdout)
                assert rep["read"] == 0 and rep["embedded"] == 0, rep
                noop[name].append(r)
            # folio's own one-file run last: the next round's no-op then follows the run that wrote
            # the index's cleanset row (another checkout's writes drop it: Store.save_clean)
            for name, env in reversed(variants.items()):
                victim.write_bytes(original + f"\nA sentence added by the benchmark, {time.time_ns()}.\n".encode())
                past = time.time() - 5 - i * 0.001  # an mtime no earlier run stamped, and not racy
                os.utime(victim, (past, past))
                r = run_index(root, env)
                rep = json.loads(r.stdout)
                assert rep["changed"] == 1 and rep["read"] == 1, rep
                one[name].append(r)
    finally:
        victim.write_bytes(original)
        os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
        common.folio(["index"], root, ENV)
    return {"file": victim.relative_to(root).as_posix(), "files": int(bare[0].stdout), "bare": bare, "noop": noop,
            "one": one}


def shared_options(ap: argparse.ArgumentParser, port: int) -> None:
    """The options this bench shares with bench/query_floor.py (which times queries on its index)."""
    ap.add_argument("--files", type=int, default=0, help="the first N files of md-history (default: all of it)")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--port", type=int, default=port)
    ap.add_argument("--dest", type=Path)
    ap.add_argument("--record", action="store_true", help="append the rows to docs/benchmarks.md")
    ap.add_argument("--before", type=Path, metavar="CHECKOUT",
                    help="also time the folio package of another checkout (PYTHONPATH) in every round")


def variants_of(a: argparse.Namespace, env: dict) -> dict[str, dict]:
    """This checkout's folio, and --before's (its package first on PYTHONPATH), by name."""
    variants = {"folio": env}
    if a.before:
        variants[f"checkout {a.before.name}"] = {**env, "PYTHONPATH": str(a.before.resolve())}
    return variants


def cheap_server(a: argparse.Namespace) -> common.Server:
    """The zero-cost fake server at --port and --dim."""
    return common.Server([sys.executable, str(common.FAKESERVER), "--port", str(a.port), "--dim", str(a.dim),
                          "--cheap"], f"http://127.0.0.1:{a.port}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    shared_options(ap, 18791)
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    variants = variants_of(a, TIMED)
    srv = cheap_server(a)
    try:
        load_before = common.load()
        root = prepare(a)
        res = rounds(root, a.runs, variants)
        srv.stop()
        # A full run that sends nothing still asks a listening server for the fingerprint (one
        # request): the no-op again with no server listening shows what that request costs.
        quiet = {v: [] for v in variants}
        quiet_bare = []
        for _ in range(max(3, a.runs // 2)):
            quiet_bare.append(common.measure([sys.executable, "-c", LISTING], root, ENV))
            for v, env in variants.items():
                quiet[v].append(run_index(root, env))
        load_after = common.load()
    finally:
        srv.stop()
    name = f"md-history first {a.files} files" if a.files else "md-history"
    bare = res["bare"]
    bw, bc = [r.wall for r in bare], [r.cpu for r in bare]
    rows = [
        ("corpus", f"{name}: {res['files']} files, zero-cost fake server (--cheap) dim {a.dim}"),
        ("bare listing (os.scandir + stat of each .md, whole process): wall", spread(bw)),
        ("bare listing: CPU", spread(bc)),
    ]
    for v in variants:
        noop, one = res["noop"][v], res["one"][v]
        tag = "" if v == "folio" else f" [{v}]"
        nw, ow = [r.wall for r in noop], [r.wall for r in one]
        nc, oc = [r.cpu for r in noop], [r.cpu for r in one]
        noop_ratio = [n / b for n, b in zip(nw, bw, strict=True)]
        one_extra = [o - b for o, b in zip(ow, bw, strict=True)]
        rows += [
            (f"no-op `folio index`{tag}: wall", spread(nw)),
            (f"no-op{tag}: CPU", spread(nc)),
            (f"no-op / bare listing{tag}", f"**{med(nw) / med(bw):.2f}x** wall medians; {med(noop_ratio):.2f}x median "
                                          f"of per-round ratios (target <= 1.2x); CPU {med(nc) / med(bc):.2f}x"),
            (f"no-op stages{tag} (ms, wall medians)", stage_medians(noop)),
            (f"one changed file{tag}: wall", spread(ow) + f" ({res['file']})"),
            (f"one changed file{tag}: CPU", spread(oc)),
            (f"one changed file - bare listing{tag}", f"**+{med(ow) - med(bw):.3f} s** wall medians; "
                                                     f"+{med(one_extra):.3f} s median of per-round differences "
                                                     f"(target <= +0.25 s); CPU +{med(oc) - med(bc):.3f} s"),
            (f"one changed file stages{tag} (ms, wall medians)", stage_medians(one)),
        ]
    qb = [r.wall for r in quiet_bare]
    rows.append(("no server listening: bare listing wall", spread(qb)))
    for v in variants:
        tag = "" if v == "folio" else f" [{v}]"
        qw, qc = [r.wall for r in quiet[v]], [r.cpu for r in quiet[v]]
        rows.append((f"no server listening: no-op{tag}", f"{spread(qw)}; **{med(qw) / med(qb):.2f}x** the bare listing; "
                                                         f"CPU {spread(qc)}; stages {stage_medians(quiet[v])}"))
    note = (f"Under {load_before} at the start, {load_after} at the end (2 cores "
            f"shared: ratios within a round are the verdict; CPU times barely move under load).")
    for k, v in rows:
        print(f"{k:<58} {v}")
    print(note)
    if a.record:
        common.record(f"bench/reindex_floor.py, {name}", rows, note=note)


if __name__ == "__main__":
    main()
