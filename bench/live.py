"""The live index (issue 43): how soon a file written under a running `folio mcp` is found, what an
idle watcher costs, and what a burst of changed files costs.

    python bench/live.py [--corpus rust-book] [--rounds 20] [--idle 30] [--burst 10000] [--record]
    python bench/live.py --only latency|idle|burst ...

- latency: a new file (a word of its own) is written under a running `folio mcp` (stdio, the MCP
  SDK's client); the client asks `query` (lexical) every 10 ms until the file's row comes back, then
  (semantic) until it ranks first with no notice of sections waiting for vectors; then the file is
  deleted and the client asks until its row is gone. Medians and p95 of the seconds from the write
  (the issue's bar: within 1 s lexically and for the deletion).
- idle: the `folio mcp` process's CPU seconds over --idle seconds with nothing written (by events,
  then by polling every 2 s), as a share of one core (/proc clock ticks: 10 ms resolution).
- burst: --burst generated files (3 sections each) indexed, then `folio index --watch` started and
  every file rewritten at once (one section of each changed); how many runs the watcher made (its
  lines) and how long they took, beside a plain no-op `folio index` and a plain `folio index` of
  the same kind of change (every file rewritten again) on the same corpus.

Against tests/fakeserver.py (--dim, default 384); corpora under FOLIO_BENCH_DIR (default
/tmp/folio-bench/live), copied and indexed once.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("FOLIO_BENCH_DIR", "/tmp/folio-bench/live")
HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)
import common  # noqa: E402
import run_all  # noqa: E402

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # `import mcp` is the SDK's


def env(**extra) -> dict:
    """run_all's environment (no FOLIO_ variable of the caller's, a config home of its own), without
    its FOLIO_TIMINGS, and `extra`."""
    e = {k: v for k, v in run_all.env().items() if k != "FOLIO_TIMINGS"}
    (run_all.BASE / "xdg").mkdir(parents=True, exist_ok=True)
    return {**e, **extra}


def secs(values: list[float]) -> str:
    return (f"{statistics.median(values):.3f} s (p95 {common.pct(values, 95):.3f}, {min(values):.3f}-"
            f"{max(values):.3f}, n={len(values)})")


def client(root: Path, e: dict):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    cmd = common.folio_cmd()
    return Client(StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp"], cwd=str(root), env=e),
                  read_timeout_seconds=300)


async def latency(root: Path, rounds: int, e: dict) -> dict:
    import anyio

    lex, sem, gone = [], [], []
    async with client(root, e) as c:
        async def paths(q: str, mode: str) -> tuple[list[str], list[str]]:
            got = await c.call_tool("query", {"query": q, "mode": mode, "no_refresh": True, "limit": 3})
            return [r["path"] for r in got.structured_content["results"]], got.structured_content["notices"]

        await paths("warm up", "lexical")
        await anyio.sleep(3)  # the catch-up run at start is over
        for i in range(rounds):
            name, word = f"live-bench-{i}.md", f"zqx{i}wv"
            path = root / name
            t0 = time.perf_counter()
            path.write_text(f"# Live {word}\n\nThe {word} note, written while the server runs.\n")
            while name not in (await paths(word, "lexical"))[0]:
                await anyio.sleep(0.01)
            lex.append(time.perf_counter() - t0)
            while True:
                got, notices = await paths(f"the {word} note", "semantic")
                if got[:1] == [name] and not any("no vectors yet" in n for n in notices):
                    break
                await anyio.sleep(0.01)
            sem.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            path.unlink()
            while name in (await paths(word, "lexical"))[0]:
                await anyio.sleep(0.01)
            gone.append(time.perf_counter() - t0)
    return {"lexical": lex, "semantic": sem, "deleted": gone}


async def idle(root: Path, seconds: float, e: dict) -> float:
    import anyio

    async with client(root, e) as c:
        await c.call_tool("query", {"query": "warm up", "mode": "lexical"})
        await anyio.sleep(3)  # past the catch-up run
        pid = common.mcp_server_pid()
        c0 = common.cpu_of(pid)
        await anyio.sleep(seconds)
        return (common.cpu_of(pid) - c0) / seconds


def generated(root: Path, n: int, tag: str) -> None:
    """n files of 3 sections each; `tag` changes the middle section of every file."""
    for i in range(n):
        d = root / f"d{i // 500:03}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05}.md").write_text(f"# File {i}\n\nIntro of file {i}.\n\n## Middle\n\nThe middle of {i}, "
                                       f"version {tag}.\n\n## End\n\nThe end of file {i}.\n")


def burst(base: Path, n: int, srv, e: dict) -> dict:
    root = base / f"burst-{n}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\nmodel: fake\n")
    generated(root, n, "a")
    common.folio(["index"], root, e, timeout=7200)
    common.folio(["index"], root, e)  # settles the racy window
    noop = [common.folio(["index"], root, e).wall for _ in range(3)]
    watch = subprocess.Popen([*common.folio_cmd(), "index", "--watch"], cwd=root, env={**os.environ, **e},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        line = watch.stderr.readline()
        while line and not line.startswith("watching"):
            line = watch.stderr.readline()
        watch.stdout.readline()  # the first run's report
        t0 = time.perf_counter()
        generated(root, n, "b")
        wrote = time.perf_counter() - t0
        import threading

        seen: list[tuple[float, str]] = []
        threading.Thread(target=lambda: [seen.append((time.perf_counter(), x.strip())) for x in watch.stdout],
                         daemon=True).start()
        while True:  # until 20 s pass without a new line
            time.sleep(0.2)
            last = seen[-1][0] if seen else t0
            if time.perf_counter() - last >= 20:
                break
        lines = [x for _t, x in seen if x]
        done = (seen[-1][0] - t0) if seen else float("nan")
    finally:
        watch.send_signal(2)
        watch.wait(60)
    took = [float(m.group(1)) for x in lines if (m := re.search(r"\(([0-9.]+) s\)$", x))]
    generated(root, n, "c")
    plain = common.folio(["index"], root, e, timeout=7200)
    return {"files": n, "wrote": wrote, "runs": len(lines), "lines": lines, "run_seconds": took,
            "until_done": done, "noop": noop, "plain": plain.wall, "plain_out": plain.stdout.strip()}


def main() -> None:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="rust-book", help="rust-book (default), eips, keps, md-119k")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--idle", type=float, default=30.0)
    ap.add_argument("--burst", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--only", choices=("latency", "idle", "burst"))
    ap.add_argument("--record", action="store_true")
    a = ap.parse_args()
    e = env()
    srv = common.fake_server(a.dim)
    rows = []
    load0 = common.load()
    try:
        if a.only in (None, "latency", "idle"):
            root = run_all.prepare(a.corpus, a.corpus)
            common.folio(["index", "--endpoint", srv.url], root, e, timeout=7200)
            print(f"{root} ({common.load()})", flush=True)
        if a.only in (None, "latency"):
            got = anyio.run(latency, root, a.rounds, env(FOLIO_WATCH="events"))
            rows += [("written -> found by an MCP `query` (lexical)", secs(got["lexical"])),
                     ("written -> ranked first by meaning (semantic, its vector committed)", secs(got["semantic"])),
                     ("deleted -> its row stops answering", secs(got["deleted"]))]
        if a.only in (None, "idle"):
            for way in ("events", "poll"):
                share = anyio.run(idle, root, a.idle, env(FOLIO_WATCH=way))
                rows.append((f"idle `folio mcp` CPU, following by {way}", f"{share * 100:.2f}% of one core over "
                                                                          f"{a.idle:.0f} s"))
        if a.only in (None, "burst"):
            b = burst(run_all.BASE, a.burst, srv, e)
            rows += [(f"{b['files']:,} files rewritten at once: runs made by `folio index --watch`",
                      f"**{b['runs']}** ({'; '.join(b['lines'])[:300]})"),
                     ("... their time (as each line says)", f"{sum(b['run_seconds']):.2f} s; writing the files took "
                                                            f"{b['wrote']:.2f} s; first write to last line "
                                                            f"{b['until_done']:.2f} s"),
                     ("plain no-op `folio index` on that corpus", secs(b["noop"])),
                     ("plain `folio index` of the same kind of change", f"{b['plain']:.2f} s ({b['plain_out']})")]
    finally:
        srv.stop()
    load1 = common.load()
    common.show(rows, 70)
    if a.record:
        common.record(f"live index: {a.corpus}, fake server dim {a.dim}", rows,
                      note=f"bench/live.py ({a.rounds} files written, {a.idle:.0f} s idle, a burst of {a.burst:,} "
                           f"files). {load0} at the start, {load1} at the end.")


if __name__ == "__main__":
    main()
