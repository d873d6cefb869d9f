"""How long `folio doctor` and `folio index` say indexing will take, against how long it takes
(issue 29.5: both within 2x of the real time, on the same machine and server).

For each corpus and `--jobs` value, on a fresh copy (no index): `folio doctor --json` gives its
estimate (`speed.data.estimate_s`, for every section not embedded yet), then `folio index --jobs N`
runs off a terminal and its first `indexing: about ...` line is timed. The doctor's estimate is
compared with the whole run, the run's own with the time from its line to the run's end. Both
through the real llama-server (all-MiniLM-L6-v2 f16, default flags), started here on `--port`.

Usage: python bench/estimates.py [--corpora rust-book keps] [--jobs 1 4] [--every keps=K ...]
       [--port 18490] [--no-record]
`--every NAME=K` indexes every K-th Markdown file of that corpus (path order, directories kept): a
full keps index takes ~25 minutes through llama-server on a quiet 2-core machine, per job count.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import corpora  # noqa: E402

WORK = Path("/tmp/folio-bench-estimates")
FIRST = re.compile(r"^indexing: about (.+?) to embed the ([\d,]+) sections left")


def seconds(text: str) -> float:
    """folio.estimate.duration's wording back to seconds: `40 seconds`, `12 minutes`, `3.5 hours`."""
    n, unit = text.split()
    return float(n) * {"seconds": 1, "minutes": 60, "hours": 3600}[unit]


def subset(src: Path, dest: Path, every: int) -> Path:
    """Every `every`-th Markdown file of src (path order), at the same relative paths."""
    if dest.exists():
        shutil.rmtree(dest)
    files = sorted(p for p in src.rglob("*.md") if ".folio" not in p.parts)
    for p in files[::every]:
        to = dest / p.relative_to(src)
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, to)
    return dest


def index_timed(root: Path, url: str, jobs: int, env: dict) -> dict:
    """`folio index --jobs N --json` off a terminal: its whole time, and its first estimate line with
    the time it appeared."""
    with tempfile.TemporaryFile() as out:
        t0 = time.monotonic()
        p = subprocess.Popen([*common.folio_cmd(), "index", "--endpoint", url, "--jobs", str(jobs), "--json"],
                             cwd=root, env={**os.environ, **env}, stdout=out, stderr=subprocess.PIPE, text=True)
        first, lines = None, []
        for line in p.stderr:
            lines.append(line.rstrip("\n"))
            m = FIRST.match(line)
            if m and first is None:
                first = (time.monotonic() - t0, seconds(m.group(1)), int(m.group(2).replace(",", "")))
        rc = p.wait()
        took = time.monotonic() - t0
        out.seek(0)
        text = out.read().decode()
    if rc != 0:
        raise RuntimeError(f"folio index failed ({rc}): {lines[-5:]}")
    return {"seconds": took, "report": json.loads(text), "first": first, "lines": lines}


def measure(name: str, src: Path, url: str, jobs: int) -> dict:
    root = common.fresh_copy(src, WORK / f"{name}-j{jobs}")
    env = {"XDG_CONFIG_HOME": str(WORK / "xdg")}
    d = common.folio(["doctor", "--endpoint", url, "--json"], root, env, check=False)
    speed = {c["name"]: c for c in json.loads(d.stdout)["checks"]}["speed"]["data"]
    run = index_timed(root, url, jobs, env)
    real = run["seconds"]
    row = {"corpus": name, "jobs": jobs, "embedded": run["report"]["embedded"], "real_s": real,
           "doctor_s": speed["estimate_s"], "doctor_sections": speed["not_embedded"],
           "doctor_rate": speed["sections_per_s"], "doctor_ratio": speed["estimate_s"] / real}
    if run["first"]:
        at, said, left = run["first"]
        row.update(first_at_s=at, first_s=said, first_left=left, first_ratio=said / (real - at),
                   run_rate=run["report"]["embedded"] / real)
    print(json.dumps(row), flush=True)
    return row


def cell(r: dict) -> str:
    doc = (f"doctor {r['doctor_s']:.0f} s for ~{r['doctor_sections']:,} sections ({r['doctor_ratio']:.2f}x the "
           f"real {r['real_s']:.0f} s)")
    if "first_s" not in r:
        return f"{r['embedded']:,} embedded; {doc}; the run said no estimate"
    return (f"{r['embedded']:,} embedded; {doc}; the run at {r['first_at_s']:.0f} s: about {r['first_s']:.0f} s for "
            f"{r['first_left']:,} left, real {r['real_s'] - r['first_at_s']:.0f} s ({r['first_ratio']:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpora", nargs="+", default=["rust-book", "keps"])
    ap.add_argument("--jobs", nargs="+", type=int, default=[1, 4])
    ap.add_argument("--every", nargs="*", default=[], help="NAME=K: index every K-th file of that corpus")
    ap.add_argument("--port", type=int, default=18490)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--from-log", type=Path, help="record the rows an earlier run printed (one JSON object a line), "
                                                    "e.g. of a run stopped for time, instead of measuring")
    ap.add_argument("--note", default="", help="said with the recorded table (what was not measured and why)")
    a = ap.parse_args()
    if a.from_log:
        rows = [json.loads(ln) for ln in a.from_log.read_text().splitlines() if ln.startswith("{")]
        report(rows, a, f"rows from {a.from_log.name}; {common.load()} when recorded")
        return
    binary = os.environ.get("FOLIO_LLAMA_BIN") or str(Path.home() / ".cache/folio-llama/b11434.0.0/llama-server")
    WORK.mkdir(parents=True, exist_ok=True)
    srcs = {}
    every = _every(a)
    for name in a.corpora:
        src = corpora.unpack(name)
        if every.get(name, 1) > 1:
            src = subset(src, WORK / f"{name}-every-{every[name]}", every[name])
        srcs[name] = src
    load_before = common.load()
    srv = common.Server([binary, "-m", str(common.MODEL), "--embeddings", "--host", "127.0.0.1", "--port",
                         str(a.port)], f"http://127.0.0.1:{a.port}")
    rows = []
    try:
        for name, src in srcs.items():
            for jobs in a.jobs:
                rows.append(measure(name, src, srv.url, jobs))
    finally:
        srv.stop()
    report(rows, a, f"{load_before} at the start, {common.load()} at the end")


def _every(a) -> dict[str, int]:
    return {k: int(v) for k, v in (x.split("=", 1) for x in a.every)}


def report(rows: list[dict], a, load: str) -> None:
    table = []
    every = _every(a)
    for r in rows:
        k = every.get(r["corpus"], 1)
        label = r["corpus"] if k == 1 else f"{r['corpus']} (every {k}th file)"
        table.append((f"{label}, --jobs {r['jobs']}", cell(r)))
    within = all(0.5 <= r["doctor_ratio"] <= 2 and 0.5 <= r.get("first_ratio", 1) <= 2 for r in rows)
    table.append(("all within 2x (issue 29.5)", "yes" if within else "no"))
    for k, v in table:
        print(f"{k:<36} {v}")
    if not a.no_record:
        common.record("indexing estimates against the real time, real llama-server", table,
                      note=f"llama-server b11434, all-MiniLM-L6-v2 f16, default flags, on 127.0.0.1:{a.port}; "
                           f"doctor then `folio index --jobs N` on a fresh copy; {load} (the 2 cores are shared)"
                           + (f". {a.note}" if a.note else ""))


if __name__ == "__main__":
    main()
