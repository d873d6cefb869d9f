"""The live index and the shared server at 500k sections: `folio mcp --http` following all of md-history.

    python bench/livescale.py [--root /tmp/folio-bench/floor-md-history] [--port 18792] [--edits 20]
                              [--only edit,stream,memory,idle] [--record]

The index is bench/reindex_floor.py's (prepare(): 16,013 files, 525,812 sections, dim 768, built against
the zero-cost fake server tests/fakeserver.py --cheap at --port, started here). Every file edited is
written back as it was at the end, and the index settled by a plain `folio index`.

- edit: a running `folio mcp --http` (the shared server, following the tree by events); a file gets a
  new sentence with a word of its own; an HTTP client asks `query` (lexical, no_refresh) every 20 ms
  until the file answers for that word, then (semantic) until no section waits for vectors (the
  fake server's vectors have no meaning: "findable by meaning" is its vector committed). Single edits,
  bursts of 10 files, and a `git checkout`-like change of 200 files (the time until the LAST of them
  answers). Beside it: the same edit followed by a plain `folio index` (no server following).
- stream: an editor changes a file every second while a client asks warm `query` (hybrid, the corpus's
  headings) back to back; per-call latency against the same questions with nothing edited.
- memory: the server's RSS at start (after the catch-up run), after 1,000 queries, after 500 edits (one
  file each, 0.2 s apart; the last waited for lexically), and the per-call latency of 8 clients at once
  against one alone.
- idle: the server's CPU over --idle seconds with nothing written, following by events and by polling
  (FOLIO_WATCH=poll, watch_interval 2 s).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)
import common  # noqa: E402

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # `import mcp` is the SDK's

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("FOLIO_")}


def pct(xs: list[float], p: float) -> float:
    return common.pct(xs, p)


def secs(xs: list[float]) -> str:
    return (f"{statistics.median(xs):.3f} s (p90 {pct(xs, 90):.3f}, {min(xs):.3f}-{max(xs):.3f}, n={len(xs)})")


def msecs(xs: list[float]) -> str:
    return (f"{statistics.median(xs) * 1000:.1f} ms (p90 {pct(xs, 90) * 1000:.1f}, "
            f"{min(xs) * 1000:.1f}-{max(xs) * 1000:.1f}, n={len(xs)})")


def rss_mb(pid: int) -> str:
    """Resident MB: anonymous (the heap: what would grow) + file-backed (the memory-mapped index, pages
    the kernel may drop)."""
    got = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:")):
            got[line.split(":")[0]] = int(line.split()[1]) / 1024
    return f"{got.get('RssAnon', 0):.0f}+{got.get('RssFile', 0):.0f}"


class Served:
    """`folio mcp --http` over `root`, its log (stderr) in a file: the watcher's lines would fill a pipe."""

    def __init__(self, root: Path, env: dict):
        fd, self.name = tempfile.mkstemp(prefix="livescale-", suffix=".log")
        self.port = common.free_port()
        self.proc = subprocess.Popen([*common.folio_cmd(), "mcp", "--http", "--port", str(self.port)], cwd=root,
                                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd)
        os.close(fd)
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        end = time.monotonic() + 120
        while "serving MCP at" not in self.text():
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"folio mcp --http did not start: {self.text()}")
            time.sleep(0.1)

    def text(self) -> str:
        return Path(self.name).read_text(errors="replace")

    def caught_up(self, timeout: float = 600) -> float:
        """Seconds until the watcher's catch-up run is over (a quiet one logs nothing): the server has
        used under 20 ms of CPU in the last second."""
        t0 = time.monotonic()
        last = common.cpu_of(self.proc.pid)
        while True:
            time.sleep(1)
            now = common.cpu_of(self.proc.pid)
            if now - last < 0.02:
                return time.monotonic() - t0 - 1
            last = now
            if time.monotonic() - t0 > timeout or self.proc.poll() is not None:
                raise RuntimeError(f"the catch-up run did not end: {self.text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def http_client(url: str):
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url), read_timeout_seconds=300)


def candidates(root: Path, n: int, seed: int = 7) -> list[Path]:
    """n mid-sized Markdown files, spread over the tree."""
    paths = sorted(p for p in root.rglob("*.md") if ".folio" not in p.parts)
    random.Random(seed).shuffle(paths)
    out = []
    for p in paths:
        if 1000 < p.stat().st_size < 30000:
            out.append(p)
            if len(out) == n:
                break
    return out


class Editor:
    """Appends sentences to files, remembering each file's first content to write back."""

    def __init__(self, root: Path):
        self.root = root
        self.orig: dict[Path, bytes] = {}
        self.n = 0

    def edit(self, path: Path) -> str:
        self.orig.setdefault(path, path.read_bytes())
        self.n += 1
        word = f"zqlive{self.n}x{random.randrange(10**6)}"
        with path.open("a", encoding="utf-8") as f:
            f.write(f"\n\nThe {word} marker sentence, written by the live bench.\n")
        return word

    def restore(self) -> None:
        for p, b in self.orig.items():
            p.write_bytes(b)
        self.orig.clear()


async def found(c, word: str, rel: str, mode: str = "lexical") -> bool:
    got = await c.call_tool("query", {"query": word, "mode": mode, "no_refresh": True, "limit": 5})
    sc = got.structured_content
    if mode == "lexical":
        return any(r["path"] == rel for r in sc["results"])
    return not any("have no vectors yet" in n for n in sc["notices"])


async def wait_for(c, checks: list, every: float = 0.02, timeout: float = 300) -> float:
    """Seconds until every (word, rel, mode) check holds (each asked until it does)."""
    import anyio

    t0 = time.perf_counter()
    for word, rel, mode in checks:
        while not await found(c, word, rel, mode):
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"{word} in {rel} ({mode}) not found within {timeout} s")
            await anyio.sleep(every)
    return time.perf_counter() - t0


async def edit_rounds(root: Path, url: str, ed: Editor, files: list[Path], edits: int) -> list[tuple[str, str]]:
    import anyio

    rows = []
    async with http_client(url) as c:
        await found(c, "warm", "x")
        for size, label, n in ((1, "single edit", edits), (10, "burst of 10 files", max(3, edits // 4)),
                               (200, "checkout-like change of 200 files", 3)):
            lex, sem = [], []
            for r in range(n):
                group = [files[(r * size + i) % len(files)] for i in range(size)]
                t0 = time.perf_counter()
                words = [(ed.edit(p), p.relative_to(root).as_posix()) for p in group]
                last = words[-1]
                await wait_for(c, [(last[0], last[1], "lexical")])  # the last written (one query per look)
                lex.append(time.perf_counter() - t0)
                await wait_for(c, [(last[0], last[1], "semantic")])
                sem.append(time.perf_counter() - t0)
                await wait_for(c, [(w, rel, "lexical") for w, rel in words])  # and every other, not timed
                await anyio.sleep(0.5)
            rows.append((f"{label}: written -> found lexically (MCP query over HTTP)", secs(lex)))
            rows.append((f"{label}: written -> its vectors committed (semantic, no section waiting)", secs(sem)))
            print(rows[-2], rows[-1], sep="\n", flush=True)
    return rows


def plain_rounds(root: Path, ed: Editor, files: list[Path], n: int) -> list[tuple[str, str]]:
    rows = []
    for size, label in ((1, "single edit"), (10, "burst of 10 files"), (200, "checkout-like change of 200 files")):
        walls = []
        for r in range(n):
            for i in range(size):
                ed.edit(files[(r * size + i + 7) % len(files)])
            walls.append(common.folio(["index"], root, ENV).wall)
        rows.append((f"{label}: plain `folio index` after it (whole process)", secs(walls)))
        print(rows[-1], flush=True)
    return rows


async def queries(url: str, texts: list[str], n: int, mode: str = "hybrid") -> list[float]:
    out = []
    async with http_client(url) as c:
        for i in range(n):
            t = time.perf_counter()
            got = await c.call_tool("query", {"query": texts[i % len(texts)], "mode": mode, "no_refresh": True})
            out.append(time.perf_counter() - t)
            if got.is_error:
                raise RuntimeError(got.content[0].text)
    return out


async def streamed(url: str, texts: list[str], n: int, ed: Editor, files: list[Path], every: float = 1.0):
    """Queries back to back while an editor changes a file every `every` s."""
    import anyio

    done = anyio.Event()
    edits = 0

    async def editor() -> None:
        nonlocal edits
        i = 0
        while not done.is_set():
            ed.edit(files[i % len(files)])
            edits += 1
            i += 1
            with anyio.move_on_after(every):
                await done.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(editor)
        calls = await queries(url, texts, n)
        done.set()
    return calls, edits


async def concurrent(url: str, texts: list[str], clients: int, per: int) -> list[float]:
    import anyio

    calls: list[float] = []

    async def one(k: int) -> None:
        got = await queries(url, texts[k * 7:] + texts[:k * 7], per)
        calls.extend(got)

    async with anyio.create_task_group() as tg:
        for k in range(clients):
            tg.start_soon(one, k)
    return calls


def headings(root: Path, n: int) -> list[str]:
    out = []
    for p in candidates(root, n * 3, seed=11):
        for line in p.read_text(errors="replace").splitlines():
            m = re.match(r"#{1,4}\s+(.{8,60})$", line)
            if m:
                out.append(m[1])
                break
        if len(out) == n:
            break
    return out


async def edits_until_found(c, root: Path, ed: Editor, files: list[Path], n: int, every: float = 0.2) -> float:
    """n edits, one file each, `every` s apart (the watcher gathers them as it can); then the last waited for."""
    import anyio

    t0 = time.perf_counter()
    for i in range(n):
        p = files[i % len(files)]
        w = ed.edit(p)
        await anyio.sleep(every)
    await wait_for(c, [(w, p.relative_to(root).as_posix(), "lexical")])
    return time.perf_counter() - t0


def main() -> None:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path("/tmp/folio-bench/floor-md-history"))
    ap.add_argument("--port", type=int, default=18792)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--idle", type=float, default=60)
    ap.add_argument("--only", default="edit,stream,memory,idle")
    ap.add_argument("--record", action="store_true")
    a = ap.parse_args()
    only = set(a.only.split(","))
    root = a.root
    load0 = common.load()
    srv = common.Server([sys.executable, str(common.FAKESERVER), "--port", str(a.port), "--dim", str(a.dim),
                         "--cheap"], f"http://127.0.0.1:{a.port}")
    ed = Editor(root)
    files = candidates(root, 400)
    texts = headings(root, 50)
    rows: list[tuple[str, str]] = []
    try:
        common.folio(["index"], root, ENV)  # settled before anything is measured
        if "edit" in only or "stream" in only or "memory" in only:
            s = Served(root, ENV)
            try:
                rows.append(("`folio mcp --http` listening -> its catch-up run over (CPU quiet)", f"{s.caught_up():.2f} s"))
                print(rows[-1], flush=True)
                pid = s.proc.pid
                if "memory" in only:
                    rows.append(("server RSS after the catch-up run", f"{rss_mb(pid)} MB (anonymous+file-backed)"))
                if "edit" in only:
                    rows += anyio.run(edit_rounds, root, s.url, ed, files, a.edits)
                if "stream" in only:
                    quiet = anyio.run(queries, s.url, texts, a.queries)
                    busy, n = anyio.run(streamed, s.url, texts, a.queries, ed, files[200:])
                    quiet2 = anyio.run(queries, s.url, texts, a.queries)
                    rows.append(("warm hybrid `query` over HTTP, nothing edited (before, after)",
                                 f"{msecs(quiet)}; {msecs(quiet2)}"))
                    rows.append((f"... while a file is edited every second ({n} edits)", msecs(busy)))
                    rows.append(("... ratio of medians (edited / not)",
                                 f"x{statistics.median(busy) / statistics.median(quiet + quiet2):.2f}"))
                    print(*rows[-3:], sep="\n", flush=True)
                if "memory" in only:
                    r0 = rss_mb(pid)
                    anyio.run(queries, s.url, texts, 1000)
                    r1 = rss_mb(pid)

                    async def edits500() -> float:
                        async with http_client(s.url) as c:
                            return await edits_until_found(c, root, ed, files, 500)

                    t = anyio.run(edits500)
                    r2 = rss_mb(pid)
                    anyio.run(queries, s.url, texts, 1000)
                    r3 = rss_mb(pid)
                    rows.append(("server RSS: before 1,000 queries / after / after 500 edits / after 1,000 more",
                                 f"{r0} / {r1} / {r2} / {r3} MB anonymous+file-backed (the 500 edits took {t:.0f} s)"))
                    one = anyio.run(queries, s.url, texts, 50)
                    eight = anyio.run(concurrent, s.url, texts, 8, 25)
                    rows.append(("warm hybrid `query`, one agent alone", msecs(one)))
                    rows.append(("... 8 agents at once (per call)", msecs(eight)))
                    rows.append(("... ratio of medians", f"x{statistics.median(eight) / statistics.median(one):.2f}"
                                 f"; RSS after {rss_mb(pid)} MB"))
                    print(*rows[-5:], sep="\n", flush=True)
            finally:
                s.stop()
            ed.restore()
            common.folio(["index"], root, ENV)
        if "edit" in only:
            rows += plain_rounds(root, ed, files, 5)
            ed.restore()
            common.folio(["index"], root, ENV)
        if "idle" in only:
            for label, extra in (("events", {}), ("poll (watch_interval 2 s)", {"FOLIO_WATCH": "poll"})):
                s = Served(root, {**ENV, **extra})
                try:
                    s.caught_up()
                    time.sleep(3)
                    c0 = common.cpu_of(s.proc.pid)
                    time.sleep(a.idle)
                    share = (common.cpu_of(s.proc.pid) - c0) / a.idle
                    rows.append((f"idle `folio mcp --http` CPU, following by {label}",
                                 f"{share * 100:.2f}% of one core ({share * 60:.2f} CPU s per minute) over {a.idle:.0f} s"))
                    print(rows[-1], flush=True)
                finally:
                    s.stop()
    finally:
        ed.restore()
        srv.stop()
    common.show(rows, 70)
    note = (f"bench/livescale.py over {root.name} (16,013 files, 525,812 sections), zero-cost fake server dim "
            f"{a.dim}. {load0} at the start, {common.load()} at the end (2 cores shared: wall times under load "
            f"are upper bounds).")
    print(note)
    if a.record:
        common.record("live index and shared server at scale: floor-md-history", rows, note=note)


if __name__ == "__main__":
    main()
