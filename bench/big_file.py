"""Peak memory and time of `folio index` on one Markdown file of many sections, against the same
sections spread over many files (issue: a big file was one batch). Run by hand:

    python bench/big_file.py [--sections 100000] [--files 1000] [--dim 384] [--record]

Builds both corpora under a temporary directory (never the repository), starts the fake server
(`--cheap`: near zero-cost vectors), and runs `folio index` on each from no index. Prints, for each
corpus: the wall time, the peak RSS of the whole run (the largest of its processes: what `/usr/bin/time
-v` calls "Maximum resident set size"), the peak of the run's own process and of its helpers apart
(the walking child and parse workers, which parse files ahead), how many commits the run made
(index.db's `lexseg` rows are one per commit that carried lexical documents, so the commits are read
from the progress lines instead), and the load average beside it.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def write_corpora(base: Path, sections: int, files: int) -> tuple[Path, Path]:
    rng = random.Random(1)
    words = ["alpha", "beta", "gamma", "delta", "lighthouse", "keeper", "kettle", "wick", "revenue", "timing",
             "harbour", "ferry", "signal", "lantern"]
    secs = [f"## Heading {i}\n\n" + " ".join(rng.choice(words) + str(rng.randrange(500)) for _ in range(12)) + "\n\n"
            for i in range(sections)]
    one, many = base / "one", base / "many"
    one.mkdir()
    many.mkdir()
    (one / "big.md").write_text("# Big\n\n" + "".join(secs))
    per = sections // files
    for f in range(files):
        (many / f"f{f:04d}.md").write_text(f"# File {f}\n\n" + "".join(secs[f * per:(f + 1) * per]))
    return one, many


def _tree(pid: int) -> list[int]:
    """pid and its descendants, from /proc."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _hwm(pid: int) -> int:
    """A process's peak RSS so far (VmHWM), in kB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def index(root: Path, url: str) -> dict:
    """`folio index` from no index, its processes' peaks sampled from /proc while it runs."""
    peaks: dict[int, int] = {}
    proc = subprocess.Popen([*common.folio_cmd(), "index", "--endpoint", url], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample():
        while not done.is_set():
            for p in _tree(proc.pid):
                peaks[p] = max(peaks.get(p, 0), _hwm(p))
            time.sleep(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    t.start()
    pid, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    t.join()
    out, err = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(err[-2000:])
    main = peaks.get(proc.pid, 0)  # (wait4's ru_maxrss is the largest of the process and its children)
    helpers = max((v for p, v in peaks.items() if p != proc.pid), default=0)
    return {"wall": wall, "main": main / 1024, "helpers": helpers / 1024, "peak": max(ru.ru_maxrss, main, helpers) / 1024,
            "summary": out.strip().splitlines()[-1] if out.strip() else ""}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--label", default="", help="a word for the heading (e.g. before, after)")
    ap.add_argument("--record", action="store_true", help="append the figures to docs/benchmarks.md")
    a = ap.parse_args()
    srv = common.fake_server(dim=a.dim, cheap=True)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            one, many = write_corpora(Path(tmp), a.sections, a.files)
            for name, root in ((f"1 file, {a.sections:,} sections", one),
                               (f"{a.files:,} files, {a.sections // a.files} sections each", many)):
                before = common.load()
                r = index(root, srv.url)
                fig = (f"{r['peak']:.0f} MB peak RSS (run {r['main']:.0f} MB, walking child and parse workers "
                       f"{r['helpers']:.0f} MB), {r['wall']:.1f} s; {before}, after: {common.load()}")
                print(f"{name}: {fig}\n  {r['summary']}")
                rows.append((name, fig))
    finally:
        srv.stop()
    if a.record:
        common.record(f"bench/big_file.py{' (' + a.label + ')' if a.label else ''}: one big file against many, "
                      f"fake server --cheap dim {a.dim}", rows)


if __name__ == "__main__":
    main()
