"""A live index: `folio mcp` keeps its index current from file-system events (or by polling), and
`folio index --watch` does the same in the foreground. Through the real CLI and the MCP SDK client,
against the fake embeddings server. Times here are generous bounds for a loaded machine, not
measures (bench/live.py measures)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from helpers import folio_command, indexed
from helpers_mcp import stdio, text_of

BASE = {
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n\n## Paging\n\nPages go to the primary first.\n",
    "finance/revenue.md": "# Revenue\n\nRevenue is recognised when control transfers.\n",
}


@pytest.fixture
def corpus(tmp_path, fake_server, run_folio):
    srv = fake_server()
    return indexed(tmp_path / "c", BASE, srv, run_folio), srv


async def until(check, timeout: float = 30.0, every: float = 0.2):
    """Call the async `check` until it returns something true (or fail after `timeout` s)."""
    end = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"not seen within {timeout} s")
        await anyio.sleep(every)


def paths_of(result) -> list[str]:
    return [row["path"] for row in result.structured_content["results"]]


@pytest.mark.parametrize("watch", ["events", "poll"])
def test_a_file_created_changed_and_deleted_under_a_running_mcp_is_seen(corpus, watch):
    root, _srv = corpus
    env = {"FOLIO_WATCH": watch, "FOLIO_WATCH_INTERVAL": "1"}

    async def body():
        async with stdio(root, env=env) as c:
            async def ask(q, mode="lexical"):
                got = await c.call_tool("query", {"query": q, "mode": mode, "no_refresh": True})
                assert not got.is_error, text_of(got)
                return got

            # Created: its words answer first, then its vector (semantic mode ranks only sections with one).
            (root / "notes").mkdir()
            (root / "notes" / "zebra.md").write_text("# Zebras\n\nZebra crossings need a lollipop warden.\n")

            async def found_lexically():
                return "notes/zebra.md" in paths_of(await ask("zebra lollipop warden"))
            await until(found_lexically)

            async def found_by_meaning():
                got = await ask("zebra lollipop warden", "semantic")
                return paths_of(got)[:1] == ["notes/zebra.md"] and not got.structured_content["notices"]
            await until(found_by_meaning)

            # Changed: the new words answer, the old ones no longer find it.
            (root / "notes" / "zebra.md").write_text("# Zebras\n\nGiraffes now have the crossing too.\n")

            async def changed():
                return "notes/zebra.md" in paths_of(await ask("giraffes crossing")) and \
                    "notes/zebra.md" not in paths_of(await ask("lollipop warden"))
            await until(changed)

            # Deleted: its rows stop answering.
            (root / "notes" / "zebra.md").unlink()

            async def gone():
                return "notes/zebra.md" not in paths_of(await ask("giraffes crossing"))
            await until(gone)

    anyio.run(body)


def test_mcp_catches_up_at_start_and_without_watch_leaves_the_index_alone(corpus, run_folio):
    root, _srv = corpus
    (root / "late.md").write_text("# Late\n\nWritten while no server ran: quokka.\n")

    async def body(env, expect):
        async with stdio(root, env=env) as c:
            async def seen():
                got = await c.call_tool("query", {"query": "quokka", "mode": "lexical", "no_refresh": True})
                return "late.md" in paths_of(got)
            if expect:
                await until(seen)
            else:
                await anyio.sleep(3)
                assert not await seen()

    anyio.run(body, {"FOLIO_WATCH": "off"}, False)
    anyio.run(body, {}, True)


def start_watch(root: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    # PYTHONFAULTHANDLER: a watcher that does not stop is made to print every thread's stack (stopped()).
    # SIGINT as at a terminal: a suite started in the background (nohup, `&` in a script) runs with SIGINT
    # ignored, every child inherits that across exec, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen([*folio_command(), "index", "--watch", *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    line = proc.stderr.readline()  # the first run's report goes to stdout; then it says it watches
    while line and not line.startswith("watching "):
        line = proc.stderr.readline()
    assert line.startswith(f"watching {root} for changes"), line
    return proc


def stopped(proc: subprocess.Popen, sig: int = signal.SIGINT, within: float = 30) -> int:
    """Send `sig` and wait for the watcher to exit; one that does not is made to show where it is stuck."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack on its stderr
        _out, err = proc.communicate(timeout=30)
        pytest.fail(f"`folio index --watch` did not exit within {within} s of signal {sig}; where it was:\n{err}")


def test_index_watch_prints_a_line_per_burst_and_stops_cleanly_on_ctrl_c(corpus, run_folio):
    root, _srv = corpus
    proc = start_watch(root)
    try:
        assert proc.stdout.readline().startswith("indexed 2 files")  # the first run, as `folio index` says it
        (root / "ops" / "oncall.md").write_text("# On call\n\nThe rota changes every Friday now.\n")
        line = proc.stdout.readline()
        assert "ops/oncall.md: 1 changed; 1 section embedded" in line, line
        # A burst (as a checkout writes files): 300 files land at once and make one run, not 300.
        stage = root / ".stage"
        stage.mkdir()
        for i in range(300):
            (stage / f"n{i:03}.md").write_text(f"# Note {i}\n\nNumber {i} of the batch.\n")
        (root / "batch").mkdir()
        for i in range(300):
            os.rename(stage / f"n{i:03}.md", root / "batch" / f"n{i:03}.md")
        line = proc.stdout.readline()
        assert "300 new; 300 sections embedded" in line, line
        assert run_folio("query", "number 7 of the batch", "--lexical", cwd=root).stdout.count("batch/") >= 1
    finally:
        rc = stopped(proc)
    assert rc == 0, proc.stderr.read()
    rest = proc.stderr.read()
    assert f"stopped watching {root}" in rest and "Traceback" not in rest
    assert proc.stdout.read() == ""  # nothing more: that burst was the last


def test_index_watch_stops_on_sigterm(corpus):
    root, _srv = corpus
    proc = start_watch(root)
    assert stopped(proc, signal.SIGTERM) == 0
    assert "stopped watching" in proc.stderr.read()
