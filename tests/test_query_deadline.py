"""A query answers in bounded time whatever the server is doing (issue 29.1): while another
`folio index` keeps the one slot of the server busy, the question's vector and the refresh of the
files behind its rows each wait at most `query_timeout`, then the query answers from what it has
(the lexical plane; rows marked stale) with one notice naming the server and the time it waited.
And a run that finds the server busy with a live run's requests says another run is using it,
instead of taking them for an interrupted run's leftovers and waiting for them to drain."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

import anyio
import pytest
from helpers import folio_command, http_json

SLOW = "ferry"  # the busy run's sections hold this word: the server takes 5 s over each of them

A_FILES = {
    "finance/revenue.md": "# Revenue\n\n## Timing\n\nRevenue is recognised when control transfers.\n\n"
                          "## Expenses\n\nTravel is booked when incurred.\n",
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n",
}


def backdate(root, seconds: float = 60) -> None:
    t = time.time() - seconds
    for p in root.rglob("*.md"):
        os.utime(p, (t, t))


@pytest.fixture
def busy(tmp_path, fake_server, write_tree, run_folio):
    """(corpus A indexed by meaning, the server, start()): start() runs `folio index` over another
    corpus in the background, two requests at a time, each holding the server's only slot for 5 s,
    and returns once the server is at work on them. The run is killed at the end."""
    srv = fake_server(dim=32, slots=1)
    a = write_tree(tmp_path / "a", {**A_FILES, "folio.yaml": f"endpoint: {srv.url}\n"})
    backdate(a)
    r = run_folio("index", cwd=a)
    assert r.returncode == 0, r.stderr
    b = write_tree(tmp_path / "b", {f"harbour/h{i:02}.md": f"# Harbour {i}\n\nThe {SLOW} leaves at {i}.\n"
                                    for i in range(60)})
    write_tree(b, {"folio.yaml": f"endpoint: {srv.url}\nbatch_size: 1\njobs: 2\n"})
    procs = []

    def start():
        srv.control(delay_input_containing=SLOW, delay_input_ms=5000)
        proc = subprocess.Popen([*folio_command(), "index"], cwd=b, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(proc)
        end = time.monotonic() + 60
        while srv.stats()["in_flight"] < 2:  # one request in the slot, the next one queued
            assert proc.poll() is None and time.monotonic() < end, "the busy run never reached the server"
            time.sleep(0.05)
        return b

    yield a, srv, start
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_query_behind_a_busy_server_ranks_lexically_within_query_timeout(busy, run_folio):
    a, srv, start = busy
    start()
    r = run_folio("query", "when is revenue recognised", "--mode", "semantic", "--json", cwd=a,
                  env={"FOLIO_QUERY_TIMEOUT": "1"})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["mode"] == "lexical"
    assert d["results"][0]["path"] == "finance/revenue.md"
    said = [n for n in d["notices"] if srv.url in n]
    assert len(said) == 1, d["notices"]
    assert "gave no query vector in the 1 s a query waits" in said[0] and "`query_timeout`" in said[0], said[0]
    assert "ranking lexically" in said[0]


def test_a_refresh_behind_a_busy_server_marks_its_rows_stale_within_query_timeout(busy, run_folio):
    a, srv, start = busy
    path = a / "finance/revenue.md"
    path.write_text("# Revenue\n\nA line added on top.\n\n" + path.read_text().split("\n", 2)[2])
    start()
    # lexically ranked, the question needs no vector: the refresh alone talks to the busy server
    r = run_folio("query", "when is revenue recognised", "--mode", "lexical", "--json", cwd=a,
                  env={"FOLIO_QUERY_TIMEOUT": "2"}, timeout=100)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    top = d["results"][0]
    assert (top["path"], top["freshness"]) == ("finance/revenue.md", "stale")
    said = [n for n in d["notices"] if srv.url in n]
    assert len(said) == 1, d["notices"]
    assert "did not embed them in the 2 s a query waits" in said[0] and "marked (stale)" in said[0], said[0]


def test_an_index_run_sharing_the_server_with_a_live_run_says_so_and_does_not_wait_for_it(busy, tmp_path,
                                                                                           write_tree, run_folio):
    a, srv, start = busy
    b = start()
    c = write_tree(tmp_path / "c", {f"n{i}.md": f"# Note {i}\n\nTides and lighthouses, part {i}.\n" for i in range(3)})
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=c, timeout=100)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 3
    assert f"another run is using the embeddings server at {srv.url} (indexing {b})" in r.stderr, r.stderr
    assert "interrupted" not in r.stderr and "waiting for it to be free" not in r.stderr
    # the busy run is still going: this one did not wait for it to end
    assert any(s["is_processing"] for s in http_json("GET", srv.base + "/slots")[1])


def test_over_mcp_a_query_behind_a_busy_server_answers_lexically_with_the_notice(busy, run_folio):
    from test_mcp import connect, text_of

    a, srv, start = busy
    write = a / "folio.yaml"
    write.write_text(write.read_text() + "query_timeout: 1\n")

    async def body():
        async with connect(a) as c:
            warm = await c.call_tool("query", {"query": "when is revenue recognised", "mode": "semantic"})
            assert warm.structured_content["mode"] == "semantic", text_of(warm)
            start()
            got = await c.call_tool("query", {"query": "when is revenue recognised", "mode": "semantic"})
            assert not got.is_error, text_of(got)
            d = got.structured_content
            assert d["mode"] == "lexical" and d["results"][0]["path"] == "finance/revenue.md"
            said = [n for n in d["notices"] if srv.url in n]
            assert len(said) == 1 and "gave no query vector in the 1 s a query waits" in said[0], d["notices"]
            assert said[0] in text_of(got).splitlines()

    anyio.run(body)
