"""`folio mcp --http` against `folio mcp` over stdio, and under several clients at once (issue 43).

    python bench/mcp_http.py [--corpus rust-book] [--llama] [--queries 100] [--clients 8] [--per-client 200]
                             [--record]

- warm: one `folio mcp` over stdio and one `folio mcp --http`, both through the MCP SDK's own
  clients, asked the same questions alternately (so the machine's load falls on both alike); per
  call the client's wall time for `tools/call`. The bar: HTTP's median within 10 ms of stdio's.
- concurrent: --clients SDK clients over HTTP at once, --per-client questions each (the corpus's
  headings, each client in its own order); errors, answers whose `results` and `notices` differ
  from `folio query --json`'s for the same question, per-call latency, and the calls per second.

Corpora under FOLIO_BENCH_DIR (default /tmp/folio-bench/mcp-http), indexed once against the fake
server (dim 768) or the real llama-server (--llama, all-MiniLM-L6-v2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("FOLIO_BENCH_DIR", "/tmp/folio-bench/mcp-http")
HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)
import common  # noqa: E402
import run_all  # noqa: E402

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # `import mcp` is the SDK's


def env() -> dict:
    (run_all.BASE / "xdg").mkdir(parents=True, exist_ok=True)
    # nothing is written: a watcher would only add its catch-up run
    return {**{k: v for k, v in run_all.env().items() if k != "FOLIO_TIMINGS"}, "FOLIO_WATCH": "off"}


ms = common.ms


def http_client(url: str):
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url), read_timeout_seconds=300)


def stdio_client(root: Path, e: dict):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    cmd = common.folio_cmd()
    return Client(StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp"], cwd=str(root), env=e),
                  read_timeout_seconds=300)


def serve_http(root: Path, e: dict) -> tuple[subprocess.Popen, str]:
    import socket

    port = common.free_port()
    proc = subprocess.Popen([*common.folio_cmd(), "mcp", "--http", "--port", str(port)], cwd=root,
                            env={**os.environ, **e}, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    if not line.startswith("folio: serving MCP at"):
        raise RuntimeError(f"folio mcp --http: {line}{proc.stderr.read()}")
    with socket.create_connection(("127.0.0.1", port), timeout=30):
        pass
    return proc, f"http://127.0.0.1:{port}/mcp"


async def warm(root: Path, url: str, texts: list[str], e: dict) -> dict:
    over_stdio, over_http = [], []
    async with stdio_client(root, e) as s, http_client(url) as h:
        for q in texts[:4]:  # both warm
            await s.call_tool("query", {"query": q})
            await h.call_tool("query", {"query": q})
        for q in texts:
            t = time.perf_counter()
            a = await s.call_tool("query", {"query": q})
            over_stdio.append(time.perf_counter() - t)
            t = time.perf_counter()
            b = await h.call_tool("query", {"query": q})
            over_http.append(time.perf_counter() - t)
            if a.is_error or b.is_error or a.structured_content != b.structured_content:
                raise RuntimeError(f"{q!r}: stdio and HTTP answered differently")
    return {"stdio": over_stdio, "http": over_http}


async def concurrent(url: str, texts: list[str], want: dict, clients: int, per_client: int) -> dict:
    import anyio

    calls: list[float] = []
    errors, differ = [], []

    async def one(n: int) -> None:
        async with http_client(url) as c:
            for i in range(per_client):
                q = texts[(n * 7 + i) % len(texts)]
                t = time.perf_counter()
                try:
                    got = await c.call_tool("query", {"query": q})
                except Exception as e:  # a transport error counts, and the client goes on
                    errors.append(f"{q!r}: {e}")
                    continue
                calls.append(time.perf_counter() - t)
                if got.is_error:
                    errors.append(f"{q!r}: {got.content[0].text}")
                elif {k: got.structured_content[k] for k in ("results", "notices")} != want[q]:
                    differ.append(q)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(clients):
            tg.start_soon(one, n)
    return {"calls": calls, "errors": errors, "differ": differ, "wall": time.perf_counter() - t0}


def main() -> None:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="rust-book")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--per-client", type=int, default=200)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--llama", action="store_true", help="the real llama-server instead of the fake server")
    ap.add_argument("--record", action="store_true")
    a = ap.parse_args()
    e = env()
    base, dim, name = run_all.split_name(a.corpus, a.dim)
    name += "-llama" if a.llama else ""
    root = run_all.prepare(base, name)
    srv = common.llama_server() if a.llama else common.fake_server(dim)
    proc = None
    try:
        common.folio(["index", "--endpoint", srv.url], root, e, timeout=7200)
        texts = run_all.query_texts(root, a.queries)
        want = {}
        for q in texts:
            got = json.loads(common.folio(["query", q, "--json"], root, e).stdout)
            want[q] = {"results": got["results"], "notices": got["notices"]}
        load0 = common.load()
        print(f"{len(texts)} questions over {root} ({load0})", flush=True)
        proc, url = serve_http(root, e)
        w = anyio.run(warm, root, url, texts, e)
        c = anyio.run(concurrent, url, texts, want, a.clients, a.per_client)
        load1 = common.load()
    finally:
        if proc is not None:
            proc.terminate()
            rc = proc.wait(30)
            if rc != 0:
                print(f"folio mcp --http exited {rc} on SIGTERM: {proc.stderr.read()[-2000:]}", file=sys.stderr)
        srv.stop()
    gap = (statistics.median(w["http"]) - statistics.median(w["stdio"])) * 1000
    server = "real llama-server (all-MiniLM-L6-v2)" if a.llama else f"fake server dim {dim}"
    n = a.clients * a.per_client
    rows = [
        ("corpus", f"{name}; {server}"),
        ("warm `query` over stdio (client wall)", ms(w["stdio"])),
        ("warm `query` over HTTP (client wall)", ms(w["http"])),
        ("HTTP - stdio (medians)", f"**{gap:+.1f} ms** (bar: within 10 ms)"),
        (f"{a.clients} clients x {a.per_client} queries at once over HTTP",
         f"{len(c['errors'])} errors, {len(c['differ'])} answers unlike the CLI's, of {n}; "
         f"{n / c['wall']:.0f} calls/s over {c['wall']:.1f} s"),
        ("... per call (client wall, under that load)", ms(c["calls"])),
    ]
    common.show(rows)
    for x in (c["errors"] + c["differ"])[:5]:
        print("   ", x)
    if a.record:
        common.record(f"folio mcp --http vs stdio: {name}, {server}", rows,
                      note=f"bench/mcp_http.py, {len(texts)} questions (the corpus's headings), alternating a "
                           f"stdio and an HTTP `query` call; then {a.clients} HTTP clients at once. {load0} at "
                           f"the start, {load1} at the end (2 cores shared: wall times under load are upper "
                           f"bounds).")


if __name__ == "__main__":
    main()
