"""Keeping an index current on ~15k files: no-op re-index, one-changed-file re-index, and the
query's stat check.

    python bench/freshness.py [--files 15000] [--runs 7] [--port 18790] [--dest DIR] [--json]

Corpus: the first N files of md-history (bench/corpora.py unpacks the tarball under
/tmp/folio-bench; this script copies the subset to DEST, default /tmp/folio-bench/fresh-md<N>,
so no other benchmark's `.folio/` lands in it). The first run indexes it once against
tests/fakeserver.py at dim 384 with no delay (several minutes); later runs reuse that index
(the fake server is deterministic, so the same port gives the same vectors).

Measured (targets from DESIGN.md §7, on this machine):
- no-op `folio index`, whole process, median of --runs: <= 0.35 s
- one changed file (one section's text edited), whole process, median: <= 0.5 s plus one
  embedding round trip (measured separately against the same server)
- the query's stat check (search.check_files over the files behind the top 10 rows),
  in-process, median of 200: < 5 ms
Wall times on a shared machine include waiting for a CPU: the script also reports each process's
CPU time (user+sys, from wait4) and the load average, and the floor a bare Python pays for
starting up and for listing+stat'ing the same tree.
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
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpora  # noqa: E402

FOLIO = [str(Path(sys.executable).parent / "folio")]
if not Path(FOLIO[0]).is_file():
    FOLIO = [sys.executable, "-m", "folio"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("FOLIO_")}


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, cpu seconds user+sys of the child, result)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _pid, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    out, err = p.stdout.read(), p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    return wall, ru.ru_utime + ru.ru_stime, subprocess.CompletedProcess(cmd, p.returncode, out, err)


def start_server(port: int) -> subprocess.Popen:
    srv = subprocess.Popen([sys.executable, str(REPO / "tests" / "fakeserver.py"), "--port", str(port),
                            "--dim", "384"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = srv.stdout.readline().strip()
    if not line.startswith("http://"):
        srv.kill()
        raise SystemExit(f"fakeserver did not start on port {port} (is it taken?): {line!r}")
    return srv


def prepare(files: int, dest: Path, url: str) -> Path:
    if not (dest / ".folio" / "index.db").is_file():
        src = corpora.unpack("md-history")
        if not dest.is_dir():
            print(f"copying the first {files} files of {src} to {dest} ...", file=sys.stderr)
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            corpora.subset(src, files, tmp)
            os.rename(tmp, dest)
        (dest / "folio.yaml").write_text(f"endpoint: {url}\nmodel: fake\n")
        print("indexing it once (several minutes) ...", file=sys.stderr)
        r = subprocess.run([*FOLIO, "index", "--jobs", "2"], cwd=dest, env=ENV, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"initial index failed: {r.stderr[-2000:]}")
    (dest / "folio.yaml").write_text(f"endpoint: {url}\nmodel: fake\n")
    timed([*FOLIO, "index"], dest)  # settle: restamp anything touched since, write .pyc files
    return dest


def pick_file(root: Path) -> Path:
    """A mid-sized file with a few sections, whose last section we edit."""
    for p in sorted(root.rglob("*.md"))[len(list(root.glob("*"))):]:
        if 2000 < p.stat().st_size < 20000 and p.read_text(encoding="utf-8", errors="replace").count("\n#") >= 3:
            return p
    raise SystemExit("no suitable file to edit")


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def bench_noop(root: Path, runs: int) -> dict:
    walls, cpus = [], []
    for _ in range(runs):
        w, c, r = timed([*FOLIO, "index", "--json"], root)
        rep = json.loads(r.stdout)
        assert rep["read"] == 0 and rep["embedded"] == 0, rep
        walls.append(w)
        cpus.append(c)
    return {"wall_median": med(walls), "cpu_median": med(cpus), "walls": walls}


def bench_one_file(root: Path, runs: int, url: str) -> dict:
    path = pick_file(root)
    original = path.read_bytes()
    walls, cpus, embedded = [], [], []
    try:
        for i in range(runs):
            path.write_bytes(original + f"\nA sentence added by the benchmark, run {i} at {time.time_ns()}.\n".encode())
            w, c, r = timed([*FOLIO, "index", "--json"], root)
            rep = json.loads(r.stdout)
            assert rep["changed"] == 1, rep
            walls.append(w)
            cpus.append(c)
            embedded.append(rep["embedded"])
    finally:
        path.write_bytes(original)
        timed([*FOLIO, "index"], root)
    # One embedding round trip for the same section, as the run sends it (probe + one section).
    import httpx

    from folio.embed import PROBE_TEXT

    text = original.decode("utf-8", "replace").rsplit("\n#", 1)[-1][:8000]
    rtts = []
    with httpx.Client() as c:
        for _ in range(max(runs, 5)):
            t = time.perf_counter()
            c.post(url, json={"model": "fake", "input": [PROBE_TEXT, text], "encoding_format": "base64"})
            rtts.append(time.perf_counter() - t)
    return {"file": str(path.relative_to(root)), "wall_median": med(walls), "cpu_median": med(cpus), "walls": walls,
            "embedded": embedded, "round_trip_median": med(rtts)}


def bench_stat_check(root: Path) -> dict:
    from folio import search
    from folio.store import Store

    store = Store.open(root)
    try:
        with store.snapshot():
            slots, _ = store.live()
            chosen = [int(s) for s in slots[:: max(1, len(slots) // 10)][:10]]
            rows = store.records(chosen)
            files = store.files({r.file_id for r in rows.values()})
    finally:
        store.close()
    times = []
    for _ in range(200):
        t = time.perf_counter()
        verdict = search.check_files(root, files)
        times.append(time.perf_counter() - t)
    assert set(verdict.values()) == {"current"}, verdict
    return {"files": len(files), "median_ms": med(times) * 1000, "p95_ms": sorted(times)[189] * 1000}


def floors(root: Path) -> dict:
    """What any Python pays here: interpreter start-up, and listing+stat'ing the tree."""
    startup = [timed([sys.executable, "-c", "pass"], root)[0] for _ in range(5)]
    listing = ("import os,time\nt=time.perf_counter();s=[os.path.realpath('.')]\nwhile s:\n d=s.pop()\n"
               " with os.scandir(d) as it:\n  for e in it:\n   if e.name[0]=='.':continue\n"
               "   if e.is_dir():s.append(e.path)\n   elif e.name.endswith('.md'):e.stat()\n")
    walls = [timed([sys.executable, "-c", listing], root)[0] for _ in range(5)]
    return {"python_startup_median": med(startup), "python_list_and_stat_median": med(walls)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=15000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--port", type=int, default=18790)
    ap.add_argument("--dest", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    dest = args.dest or Path(f"/tmp/folio-bench/fresh-md{args.files // 1000}k")
    srv = start_server(args.port)
    url = f"http://127.0.0.1:{args.port}/v1/embeddings"
    try:
        root = prepare(args.files, dest, url)
        out = {"corpus": str(root), "files": args.files, "load_before": os.getloadavg(),
               "noop": bench_noop(root, args.runs), "one_file": bench_one_file(root, args.runs, url),
               "stat_check": bench_stat_check(root), "floors": floors(root), "load_after": os.getloadavg()}
    finally:
        srv.terminate()
        srv.wait()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    n, o, s, f = out["noop"], out["one_file"], out["stat_check"], out["floors"]
    print(f"corpus {root} ({args.files} files); load average {out['load_before'][0]:.1f} -> {out['load_after'][0]:.1f}")
    print(f"no-op index       wall median {n['wall_median']:.3f} s (target <= 0.35), cpu median {n['cpu_median']:.3f} s")
    print(f"one changed file  wall median {o['wall_median']:.3f} s (target <= 0.5 + round trip "
          f"{o['round_trip_median'] * 1000:.1f} ms), cpu median {o['cpu_median']:.3f} s, "
          f"embedded {o['embedded']}")
    print(f"stat check        median {s['median_ms']:.3f} ms, p95 {s['p95_ms']:.3f} ms over {s['files']} files "
          f"(target < 5 ms)")
    print(f"floors            python start-up {f['python_startup_median']:.3f} s, python list+stat of the tree "
          f"{f['python_list_and_stat_median']:.3f} s")


if __name__ == "__main__":
    main()
