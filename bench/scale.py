"""Every figure of issue 31 at each corpus size, each against its floor, in one run.

    python bench/scale.py [--sizes 119k,478k,2m] [--dim 768] [--port 18500] [--runs 5]
                          [--queries 12] [--base DIR] [--reuse] [--record]

Sizes: 119k (the first md-history files up to 119,000 sections), 478k (all of md-history) and 2m
(bench/corpora.py's md-2m: four copies of md-history, headings distinct per copy, ~1.9M sections).
Each size is indexed in its own hard-linked copy of the shared tree (BASE/<size>, `cp -al`; BASE
default /tmp/folio-bench/scale), never in the shared tree itself; the edits this bench makes write
a new file and rename it over the old name, so the shared copy's inode is never written.

Per size, against the zero-cost fake server (tests/fakeserver.py --cheap) at --dim:

- first index: `folio index --rebuild --jobs 2` (wall, sections per second, sections per folio CPU
  second, peak RSS of its process tree: the main process, the walking child and the parse workers
  sampled together every 50 ms, and the main process's own peak from wait4); --reuse keeps an
  index already there and reports the figures its first run left in BASE/<size>.first.json;
- no-op re-index against the floor of listing the tree (bench/reindex_floor.py's LISTING: a bare
  Python scandir+stat of every .md file) in the same round: target <= 1.2x;
- one changed file against that listing + 0.25 s: its mtime set 5 s in the past (out of the racy
  window), and again left as written (now, as an editor leaves it: the file is not clean when that
  run stamps it), then the run after that one, which reads it again and re-stamps it;
- `folio query` (default mode) and `folio query --mode hybrid` against the bare one-scan script
  (bench/baseline_query.py: httpx, one request, the matrix mapped, one `M @ q`, one argpartition),
  the three back to back per question: targets <= 1.5x and <= 2x.

Every ratio is the median over rounds of figures measured back to back under the same load (the
machine is shared: the load average is printed and recorded beside them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import common  # noqa: E402
import corpora  # noqa: E402
import reindex_floor  # noqa: E402
import run_all  # noqa: E402

ENV = reindex_floor.ENV
SIZES = ("119k", "478k", "2m")
RECORDS_119K = 119_000


# --------------------------------------------------------------------------- corpora


def files_for_records(target: int, cache: Path) -> int:
    """How many md-history files, in path order, hold `target` sections (cached in `cache`)."""
    return run_all.files_for_records(target, cache)


def source(size: str, base: Path) -> Path:
    """The read-only tree of a size (built once, atomically)."""
    if size == "478k":
        return corpora.unpack("md-history")
    if size == "2m":
        return corpora.build_md2m()
    dest = base / "src-119k"
    if not dest.is_dir():
        n = files_for_records(RECORDS_119K, base / "src-119k.json")
        tmp = base / ".src-119k.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        corpora.subset(corpora.unpack("md-history"), n, tmp)
        os.rename(tmp, dest)
    return dest


def workdir(size: str, base: Path, port: int) -> Path:
    """BASE/<size>: a hard-linked copy of the size's tree, with a folio.yaml naming the server."""
    root = base / size
    if not root.is_dir():
        tmp = base / f".{size}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["cp", "-al", str(source(size, base)), str(tmp)], check=True)
        os.rename(tmp, root)
    replace(root / "folio.yaml", f"endpoint: http://127.0.0.1:{port}/v1/embeddings\nmodel: fake\n".encode())
    return root


def replace(path: Path, data: bytes, mtime: float | None = None) -> None:
    """Write `data` as a new file renamed over `path`: a hard-linked copy's other names keep theirs."""
    tmp = path.with_name(f".{path.name}.scale-tmp")
    tmp.write_bytes(data)
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.replace(tmp, path)


# --------------------------------------------------------------------------- measuring


def _tree(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack += kids.get(p, [])
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def measure_tree(cmd: list[str], cwd: Path, env: dict) -> tuple[common.Measured, int]:
    """common.measure, plus the peak of the summed RSS of the process and its descendants."""
    import tempfile

    full = {**os.environ, **env}
    peak = 0
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=full, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL)
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, sum(_rss(x) for x in _tree(p.pid)))
            time.sleep(0.05)
        wall = time.perf_counter() - t
        fo.seek(0)
        fe.seek(0)
        out, errs = fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace")
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({rc}): {errs[-2000:]}")
    return common.Measured(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, rc, out, errs), peak


def first_index(root: Path, size: str, base: Path, reuse: bool) -> dict:
    cache = base / f"{size}.first.json"
    if reuse and (root / ".folio" / "index.db").is_file() and cache.is_file():
        return {**json.loads(cache.read_text()), "reused": True}
    print(f"{size}: first index of {root} (minutes at 2M) ...", file=sys.stderr)
    load = common.load()
    r, tree = measure_tree([*common.folio_cmd(), "index", "--rebuild", "--jobs", "2", "--json"], root, ENV)
    rep = json.loads(r.stdout)
    got = {"wall": r.wall, "cpu": r.cpu, "rss_main": r.rss, "rss_tree": tree, "sections": rep["sections"],
           "embedded": rep["embedded"], "copied": rep["copied"], "files": rep["files"], "load": load,
           "commit": common.commit(), "date": time.strftime("%Y-%m-%d %H:%M")}
    cache.write_text(json.dumps(got))
    return {**got, "reused": False}


def rounds(root: Path, runs: int) -> dict:
    """Bare listing, no-op index and one-file index (the edit's mtime 5 s back, then left as written,
    then the run after that), back to back per round (the file replaced, not written in place)."""
    victim = reindex_floor.pick_file(root)
    original = victim.read_bytes()
    mtime = victim.stat().st_mtime
    bare, noop, one, now, after = [], [], [], [], []
    try:
        for i in range(runs):
            bare.append(common.measure([sys.executable, "-c", reindex_floor.LISTING], root, ENV))
            r = common.folio(["index", "--json"], root, reindex_floor.TIMED)
            rep = json.loads(r.stdout)
            assert rep["read"] == 0 and rep["embedded"] == 0, rep
            noop.append(r)
            past = time.time() - 5 - i * 0.001  # not racy, and a stamp no earlier run took
            replace(victim, original + f"\nA sentence added by the benchmark, {time.time_ns()}.\n".encode(), past)
            r = common.folio(["index", "--json"], root, reindex_floor.TIMED)
            rep = json.loads(r.stdout)
            assert rep["changed"] == 1 and rep["read"] == 1, rep
            one.append(r)
            replace(victim, original + f"\nA sentence added by the benchmark, {time.time_ns()}.\n".encode())
            written = victim.stat().st_mtime
            r = common.folio(["index", "--json"], root, reindex_floor.TIMED)
            rep = json.loads(r.stdout)
            assert rep["changed"] == 1 and rep["read"] == 1, rep
            now.append(r)
            time.sleep(max(0.0, written + 2.1 - time.time()))  # the racy window past: the next run re-stamps it
            r = common.folio(["index", "--json"], root, reindex_floor.TIMED)
            rep = json.loads(r.stdout)
            assert rep["read"] <= 1 and rep["changed"] == 0, rep
            after.append(r)
    finally:
        replace(victim, original, mtime)
        common.folio(["index"], root, ENV)
    return {"file": victim.relative_to(root).as_posix(), "bare": bare, "noop": noop, "one": one, "now": now,
            "after": after}


def queries(root: Path, n: int) -> dict:
    """The bare one-scan script, `folio query` and `folio query --mode hybrid`, back to back per question."""
    m = run_all.meta(root)
    bare_cmd = [sys.executable, str(REPO / "bench" / "baseline_query.py"), str(run_all.matrix_path(root, m)),
                m["rows"], m["dim"], m["endpoint"], m["model"]]
    texts = run_all.query_texts(root, n)
    for t in texts[:2]:  # the page cache and every code path warm
        common.measure([*bare_cmd, t], root, ENV)
        common.folio(["query", t], root, ENV)
        common.folio(["query", "--mode", "hybrid", t], root, ENV)
    out: dict[str, list] = {"bare": [], "default": [], "hybrid": []}
    for t in texts:
        out["bare"].append(common.measure([*bare_cmd, t], root, ENV))
        out["default"].append(common.folio(["query", t], root, reindex_floor.TIMED))
        out["hybrid"].append(common.folio(["query", "--mode", "hybrid", t], root, reindex_floor.TIMED))
    out["rows"] = int(m["rows"])
    return out


# --------------------------------------------------------------------------- report


def med(xs) -> float:
    return statistics.median(xs)


def ratio(a: list, b: list, plus: float = 0.0) -> float:
    """Median of the per-round ratios a / (b + plus)."""
    return med(x.wall / (y.wall + plus) for x, y in zip(a, b, strict=True))


def verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def size_rows(size: str, first: dict, rr: dict | None, qq: dict | None) -> list[tuple[str, str]]:
    rows = []
    rate = first["sections"] / first["wall"]
    reused = f" (measured {first['date']} at commit {first['commit']}, {first['load']})" if first.get("reused") \
        else f" ({first['load']} at its start)"
    rows.append((f"{size}: first index", f"{first['wall']:.1f} s for {first['sections']:,} sections "
                 f"({first['embedded']:,} embedded, {first['copied']:,} copied), {first['files']:,} files: "
                 f"**{rate:,.0f} sections/s** wall, {first['sections'] / first['cpu']:,.0f} per folio CPU second "
                 f"(target >= 5,000/s: {verdict(rate >= 5000)}){reused}"))
    rows.append((f"{size}: first index peak RSS", f"**{first['rss_tree'] / 2**20:,.0f} MiB** process tree "
                 f"(main process {first['rss_main'] / 2**20:,.0f} MiB); target <= 2 GiB: "
                 f"{verdict(first['rss_tree'] <= 2 << 30)}"))
    if rr is not None:
        b = [r.wall for r in rr["bare"]]
        nw = [r.wall for r in rr["noop"]]
        rn = ratio(rr["noop"], rr["bare"])
        bc = med(r.cpu for r in rr["bare"])
        rows.append((f"{size}: no-op re-index", f"{reindex_floor.spread(nw)} against listing the tree "
                     f"{reindex_floor.spread(b)}: **{rn:.2f}x** (target <= 1.2x: {verdict(rn <= 1.2)}); CPU "
                     f"{med(r.cpu for r in rr['noop']):.3f} s against {bc:.3f} s"))
        for key, how in (("one", "one changed file (mtime 5 s back)"), ("now", "one changed file (mtime as written)"),
                         ("after", "the run after it (re-stamps it)")):
            ro = ratio(rr[key], rr["bare"], 0.25)
            rows.append((f"{size}: {how}", f"{reindex_floor.spread([r.wall for r in rr[key]])} against listing "
                         f"+ 0.25 s = {med(b) + 0.25:.3f} s: **{ro:.2f}x** (target <= 1.0x: {verdict(ro <= 1.0)}); "
                         f"CPU {med(r.cpu for r in rr[key]):.3f} s against {bc:.3f} + 0.25 s; "
                         f"stages {reindex_floor.stage_medians(rr[key])} ms"))
    if qq is not None:
        b = [r.wall for r in qq["bare"]]
        for mode, target in (("default", 1.5), ("hybrid", 2.0)):
            w = [r.wall for r in qq[mode]]
            rq = ratio(qq[mode], qq["bare"])
            cpu = med(r.cpu for r in qq[mode]) / med(r.cpu for r in qq["bare"])
            rows.append((f"{size}: query ({mode})", f"{reindex_floor.spread(w, 1000, 'ms', 0)} against the bare "
                         f"one-scan script {reindex_floor.spread(b, 1000, 'ms', 0)}: **{rq:.2f}x** (target <= "
                         f"{target}x: {verdict(rq <= target)}); CPU {cpu:.2f}x; "
                         f"stages {reindex_floor.stage_medians(qq[mode])} ms"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--port", type=int, default=18500)
    ap.add_argument("--runs", type=int, default=5, help="no-op and one-edit rounds per size")
    ap.add_argument("--queries", type=int, default=12, help="questions per size (0: no query figures)")
    ap.add_argument("--base", type=Path, default=Path("/tmp/folio-bench/scale"))
    ap.add_argument("--reuse", action="store_true", help="keep an index already built (its first-run figures)")
    ap.add_argument("--no-rounds", action="store_true", help="first index only")
    ap.add_argument("--record", action="store_true", help="append the rows to docs/benchmarks.md")
    a = ap.parse_args()
    sizes = [s.strip().lower() for s in a.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in SIZES:
            sys.exit(f"unknown size {s}; one of {', '.join(SIZES)}")
    a.base.mkdir(parents=True, exist_ok=True)
    srv = common.Server([sys.executable, str(common.FAKESERVER), "--port", str(a.port), "--dim", str(a.dim),
                         "--cheap"], f"http://127.0.0.1:{a.port}")
    rows: list[tuple[str, str]] = []
    load_before = common.load()
    try:
        for size in sizes:
            root = workdir(size, a.base, a.port)
            first = first_index(root, size, a.base, a.reuse)
            rr = None if a.no_rounds else rounds(root, a.runs)
            qq = None if a.no_rounds or not a.queries else queries(root, a.queries)
            got = size_rows(size, first, rr, qq)
            for k, v in got:
                print(f"{k}: {v}", flush=True)
            rows += got
    finally:
        srv.stop()
    note = (f"dim {a.dim}, zero-cost fake server (tests/fakeserver.py --cheap), `--jobs 2`; {a.runs} rounds of "
            f"listing / no-op / one edit and {a.queries} questions per size, each figure's ratio the median of "
            f"per-round ratios. Under {load_before} at the start, {common.load()} at the end (2 cores shared "
            f"with other work: wall times move with the load, ratios within a round much less).")
    print(note)
    if a.record:
        common.record("bench/scale.py: 119k, 478k and 2M sections, each figure against its floor", rows, note=note)


if __name__ == "__main__":
    main()
