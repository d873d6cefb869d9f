"""`folio mcp` warm against `folio query --json` cold, in the same run (issue 18).

Through the MCP SDK's own stdio client: one `folio mcp` process answers every question (its
stores kept open, one embeddings connection); beside each call, the same question as a whole
`folio query --json` process. Questions alternate between the two so the machine's load falls
on both alike. Per call: the client's wall time for `tools/call` (request written, answer
parsed). Also counts the answers whose structured content equals the CLI's JSON.

    .venv/bin/python bench/mcp.py                      # md-119k (fake server, dim 768), 120 questions
    .venv/bin/python bench/mcp.py --corpus rust-book --llama --queries 60
    .venv/bin/python bench/mcp.py --no-record
    .venv/bin/python bench/mcp.py --root /tmp/folio-bench/floor-md-history --cheap --queries 40   # 478k
    .venv/bin/python bench/mcp.py --facets ...         # also each question with both agent facets, warm

`--facets` (issue 40): beside each warm plain call, the same question with both facets
(common.facets_for: `words` and `passage`) to the same server; target: within 2x the plain call.

md-119k is the first md-history files up to 119,000 records, prepared and indexed as
bench/run_all.py does (under FOLIO_BENCH_DIR, default /tmp/folio-bench/mcp; the index is built
once and reused). Questions are the corpus's own headings (run_all.query_texts).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("FOLIO_BENCH_DIR", "/tmp/folio-bench/mcp")
HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)
import common  # noqa: E402
import run_all  # noqa: E402

# This file is named as the issue names it, bench/mcp.py: with its folder on the path, `import mcp`
# would find it instead of the SDK.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]


def env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("FOLIO_")}
    e["XDG_CONFIG_HOME"] = str(run_all.BASE / "xdg")
    (run_all.BASE / "xdg").mkdir(parents=True, exist_ok=True)
    return e


ms = common.ms


async def measure(root: Path, texts: list[str], e: dict, facets: bool = False) -> dict:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    cmd = common.folio_cmd()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp"], cwd=str(root), env=e)
    t = time.perf_counter()
    warm, cold, cold_cpu, equal, differ, faceted = [], [], [], 0, [], []
    async with Client(params, read_timeout_seconds=300) as client:
        started = time.perf_counter() - t
        pid = common.mcp_server_pid()
        t = time.perf_counter()
        first = await client.call_tool("query", {"query": texts[0]})
        first_call = time.perf_counter() - t
        for q in texts[1:4]:  # both paths warm (page cache, the server's first mapping)
            await client.call_tool("query", {"query": q})
            common.folio(["query", q, "--json"], root, e)
        warm_cpu = 0.0
        for q in texts:
            m = common.folio(["query", q, "--json"], root, e)
            cold.append(m.wall)
            cold_cpu.append(m.cpu)
            c = common.cpu_of(pid)
            t = time.perf_counter()
            got = await client.call_tool("query", {"query": q})
            warm.append(time.perf_counter() - t)
            warm_cpu += common.cpu_of(pid) - c
            if got.is_error:
                raise RuntimeError(f"query {q!r}: {got.content[0].text}")
            if facets:
                words, passage = common.facets_for(q)
                t = time.perf_counter()
                both = await client.call_tool("query", {"query": q, "words": words, "passage": passage})
                faceted.append(time.perf_counter() - t)
                if both.is_error or both.structured_content["facets"] != ["words", "passage"]:
                    raise RuntimeError(f"query {q!r} with facets: {both.content[0].text}")
            want = json.loads(m.stdout)
            if got.structured_content == want:
                equal += 1
            else:
                differ.append((q, sorted(k for k in want if got.structured_content.get(k) != want[k])))
    return {"started": started, "first": first_call, "first_error": first.is_error, "warm": warm,
            "cold": cold, "cold_cpu": cold_cpu, "warm_cpu": warm_cpu / len(texts) if pid else None,
            "equal": equal, "differ": differ, "faceted": faceted}


def main() -> None:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="md-119k", help="md-119k (default), rust-book, eips, keps")
    ap.add_argument("--queries", type=int, default=120)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--llama", action="store_true", help="the real llama-server instead of the fake server")
    ap.add_argument("--root", type=Path, help="an indexed corpus of your own instead of --corpus, re-pointed at "
                                              "this run's server: it must have been built against the same kind "
                                              "of fake server (--cheap for bench/query_floor.py's index), or the "
                                              "re-pointing run embeds it all anew in the other space")
    ap.add_argument("--cheap", action="store_true", help="tests/fakeserver.py --cheap (the zero-cost server)")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--facets", action="store_true", help="also each question with both agent facets, warm")
    a = ap.parse_args()
    e = env()
    base, dim, name = run_all.split_name(a.corpus, a.dim)
    name += "-llama" if a.llama else ""
    root = a.root.resolve() if a.root else run_all.prepare(base, name)
    name = root.name if a.root else name
    srv = common.llama_server() if a.llama else common.fake_server(dim, cheap=a.cheap)
    try:
        m = run_all.meta(root) if (root / ".folio" / "index.db").exists() else {}
        if m.get("endpoint") != srv.url:  # a new server port each run: re-point the index (same space)
            t = time.perf_counter()
            r = common.folio(["index", "--endpoint", srv.url], root, e, timeout=7200)
            print(f"index: {time.perf_counter() - t:.1f} s; {r.stdout.strip()}", flush=True)
        texts = run_all.query_texts(root, a.queries)
        print(f"{len(texts)} questions over {root} ({common.load()})", flush=True)
        load0 = common.load()
        got = anyio.run(measure, root, texts, e, a.facets)
        load1 = common.load()
    finally:
        srv.stop()
    warm, cold = got["warm"], got["cold"]
    ratio = statistics.median(warm) / statistics.median(cold)
    m = run_all.meta(root)
    kind = "fake server --cheap" if a.cheap else "fake server"
    server = "real llama-server (all-MiniLM-L6-v2)" if a.llama else f"{kind} dim {dim}"
    rows = [
        ("corpus", f"{name}: {m['rows']} matrix rows, dim {m['dim']}; {server}"),
        ("`folio mcp` warm `query` call (client wall)", ms(warm)),
        ("`folio query --json` cold, whole process", ms(cold)),
        ("warm / cold (medians)", f"**{ratio:.3f}x** ({1 / ratio:.1f}x faster)"),
        ("CPU per question: warm server / cold process",
         (f"{got['warm_cpu'] * 1000:.1f} ms (mean; /proc clock ticks) / " if got["warm_cpu"] is not None else "? / ")
         + f"{statistics.median(got['cold_cpu']) * 1000:.1f} ms (median)"),
        ("answers equal to the CLI's JSON", f"{got['equal']} of {len(texts)}"),
        *([("`folio mcp` warm `query` with both facets", ms(got["faceted"])),
           ("both facets / plain, warm (medians)",
            f"**{statistics.median(got['faceted']) / statistics.median(warm):.2f}x** (target <= 2x)")]
          if got["faceted"] else []),
        ("server start to first answer", f"{got['started'] * 1000:.0f} ms to connect (imports, handshake), "
                                         f"first query {got['first'] * 1000:.0f} ms"),
    ]
    for k, v in rows:
        print(f"  {k:<46} {v}")
    if got["differ"]:
        print("  differ:", got["differ"][:5])
    if not a.no_record:
        common.record(f"folio mcp warm vs cold CLI: {name}, {server}", rows,
                      note=f"bench/mcp.py, {len(texts)} questions (the corpus's headings), alternating a cold "
                           f"`folio query --json` process and a `query` call to one `folio mcp` through the MCP "
                           f"SDK's stdio client. Under {load0} at the start, {load1} at the end (2 cores shared: "
                           f"wall times under load are upper bounds).")


if __name__ == "__main__":
    main()
