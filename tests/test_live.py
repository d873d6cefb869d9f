"""A live index: `folio mcp` keeps its index current from file-system events (or by polling), and
`folio index --watch` does the same in the foreground. Through the real CLI and the MCP SDK client,
against the fake embeddings server. Times here are generous bounds for a loaded machine, not
measures (bench/live.py measures)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from helpers import folio_command, indexed
from helpers_mcp import stdio, text_of, until

BASE = {
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n\n## Paging\n\nPages go to the primary first.\n",
    "finance/revenue.md": "# Revenue\n\nRevenue is recognised when control transfers.\n",
}


@pytest.fixture
def corpus(tmp_path, fake_server, run_folio):
    srv = fake_server()
    return indexed(tmp_path / "c", BASE, srv, run_folio), srv


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


def start_watch(root: Path, *args: str, env: dict | None = None, settled: bool = True) -> subprocess.Popen:
    """`folio index --watch` in `root`, returned once it says it watches (settled=False: at once, its
    first run still under way)."""
    # PYTHONFAULTHANDLER: a watcher that does not stop is made to print every thread's stack (stopped()).
    # SIGINT as at a terminal: a suite started in the background (nohup, `&` in a script) runs with SIGINT
    # ignored, every child inherits that across exec, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen([*folio_command(), "index", "--watch", *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    if not settled:
        return proc
    line = proc.stderr.readline()  # the first run's report goes to stdout; then it says it watches
    while line and not line.startswith("watching "):
        line = proc.stderr.readline()
    assert line.startswith(f"watching {root} for changes"), line
    return proc


@contextlib.contextmanager
def watching(root: Path, *args: str):
    """`folio index --watch` in `root` for the body, then Ctrl-C: it must end cleanly (exit 0, no
    traceback). A body that fails stops it too, and its own failure is the one reported."""
    proc = start_watch(root, *args)
    try:
        yield proc
    except BaseException:
        stopped(proc)
        raise
    rc = stopped(proc)
    err = proc.stderr.read()
    assert rc == 0 and "Traceback" not in err, err


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


def _slow_corpus(tmp_path, fake_server, run_folio, n: int = 40):
    """A corpus whose next index run takes seconds: two inputs a request, 100 ms each."""
    srv = fake_server(delay_ms=100, max_inputs=2)
    root = tmp_path / "slow"
    root.mkdir()
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\nmodel: fake\n")
    (root / "a.md").write_text("# A\n\nThe first note.\n")
    assert run_folio("index", cwd=root).returncode == 0
    for i in range(n):
        (root / f"s{i:02}.md").write_text(f"# S{i}\n\nSlow note {i}.\n")
    return root, srv


def _line(stream, within: float = 60) -> str:
    """The next line of `stream`, or a failure after `within` seconds (never a hung suite)."""
    import threading

    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    t.start()
    t.join(within)
    assert got, f"no line within {within} s"
    return got[0]


def _until(pred, within: float = 60) -> None:
    end = time.monotonic() + within
    while not pred() and time.monotonic() < end:
        time.sleep(0.02)
    assert pred()


def test_index_watch_catches_up_with_files_written_during_its_first_run(tmp_path, fake_server, run_folio):
    """The watcher began after the first run: a file written while that run embedded (hours on a
    big corpus) was never indexed. It catches up; with nothing new it prints no line."""
    root, srv = _slow_corpus(tmp_path, fake_server, run_folio)
    before = srv.stats()["inputs"]
    proc = start_watch(root, settled=False)
    try:
        _until(lambda: srv.stats()["inputs"] >= before + 5)  # the first run is embedding
        assert proc.poll() is None
        (root / "late.md").write_text("# Late\n\nA wombat wrote this during the first run.\n")
        assert _line(proc.stdout).startswith("indexed 41 files")  # the first run's report
        line = _line(proc.stdout, within=30)
        assert "caught up" in line and "1 new; 1 section embedded" in line, line
        assert "late.md" in run_folio("query", "wombat", "--lexical", "--paths-only", cwd=root).stdout
    finally:
        rc = stopped(proc)
    assert rc == 0 and proc.stdout.read() == ""


def test_index_watch_cut_short_by_ctrl_c_says_so_and_exits_130(tmp_path, fake_server, run_folio):
    root, srv = _slow_corpus(tmp_path, fake_server, run_folio, n=0)
    proc = start_watch(root)
    before = srv.stats()["inputs"]
    for i in range(40):
        (root / f"b{i:02}.md").write_text(f"# B{i}\n\nBurst note {i}.\n")
    _until(lambda: srv.stats()["inputs"] >= before + 5)  # the burst's run is embedding
    rc = stopped(proc)
    err = proc.stderr.read()
    assert rc == 130, err
    assert "the run under way was cut short" in err and "Traceback" not in err


def test_index_watch_polling_outlives_a_folio_yaml_broken_for_a_while(corpus):
    """Polling read the settings outside its guard: a folio.yaml saved half-written killed the polling
    thread with a traceback, and the watcher, still running, never saw another change."""
    root, _srv = corpus
    proc = start_watch(root, env={"FOLIO_WATCH": "poll", "FOLIO_WATCH_INTERVAL": "1"})
    try:
        assert _line(proc.stdout).startswith("indexed 2 files")  # the first run's report
        good = (root / "folio.yaml").read_text()
        (root / "folio.yaml").write_text(good + "exclude: [\n")
        (root / "ops" / "oncall.md").write_text("# On call\n\nThe rota changes every Friday now.\n")
        time.sleep(1.5)  # a listing with the broken file (there is nothing to see until it is mended)
        (root / "folio.yaml").write_text(good)
        line = _line(proc.stdout, within=15)
        assert "1 changed; 1 section embedded" in line, line
        # a poll that listed the edit before the file broke ran it alone; the mended listing then queues
        # a quiet catch-up of the whole tree: let it end, so that Ctrl-C stops an idle watcher (exit 0)
        time.sleep(3)
    finally:
        rc = stopped(proc)
    err = proc.stderr.read()
    assert rc == 0 and "Traceback" not in err, err


def test_index_watch_keeps_its_events_when_folio_yaml_breaks_during_the_first_run(tmp_path, fake_server, run_folio):
    """A folio.yaml left broken while the first run embedded: the catch-up could not read the
    settings, so the first event's filter raised, and the watcher fell back to listing the tree
    every 2 s for good (`file-system events failed (... not valid YAML ...)`)."""
    root, srv = _slow_corpus(tmp_path, fake_server, run_folio, n=20)
    good = (root / "folio.yaml").read_text()
    before = srv.stats()["inputs"]
    proc = start_watch(root, settled=False)
    try:
        _until(lambda: srv.stats()["inputs"] >= before + 3)  # the first run is embedding
        (root / "folio.yaml").write_text(good + "exclude: [\n")
        assert _line(proc.stdout).startswith("indexed 21 files")
        assert "not valid YAML" in _line(proc.stdout)  # the catch-up, and the bursts, say what is wrong
        (root / "late.md").write_text("# Late\n\nA wombat wrote this.\n")
        assert "not valid YAML" in _line(proc.stdout, within=15)
        (root / "folio.yaml").write_text(good)
        line = _line(proc.stdout, within=15)
        assert "1 new; 1 section embedded" in line, line
    finally:
        rc = stopped(proc)
    err = proc.stderr.read()
    assert rc == 0 and "events failed" not in err and "Traceback" not in err, err



@pytest.mark.parametrize("watch", ["events", "poll"])
def test_a_watched_index_removed_is_built_anew(corpus, run_folio, watch):
    """`rm -rf .folio` (or `git clean -x`) under a watcher: queries said `no index` until some
    Markdown file happened to change."""
    import shutil

    root, _srv = corpus
    proc = start_watch(root, env={"FOLIO_WATCH": watch, "FOLIO_WATCH_INTERVAL": "1"})
    try:
        assert _line(proc.stdout).startswith("indexed 2 files")
        shutil.rmtree(root / ".folio")
        line = _line(proc.stdout, within=15)
        assert "2 new; 3 sections embedded" in line, line
        assert run_folio("query", "rota", "--paths-only", cwd=root).stdout.startswith("ops/oncall.md:")
    finally:
        stopped(proc)


def test_an_index_removed_while_a_watchers_run_writes_it_is_one_sentence_and_built_anew(tmp_path, fake_server,
                                                                                        run_folio):
    """The run then wrote into a directory that was gone: a traceback, and `folio index --watch` died
    (`folio mcp`'s following thread died, leaving the server deaf to every later change)."""
    import shutil

    root, srv = _slow_corpus(tmp_path, fake_server, run_folio, n=0)
    proc = start_watch(root)
    try:
        assert _line(proc.stdout).startswith("indexed 1 file")
        before = srv.stats()["inputs"]
        for i in range(30):
            (root / f"b{i:02}.md").write_text(f"# B{i}\n\nBurst note {i}.\n")
        _until(lambda: srv.stats()["inputs"] >= before + 4)  # the burst's vectors pass is embedding
        shutil.rmtree(root / ".folio")
        line = _line(proc.stdout)
        assert "was removed while this run was writing the index there" in line, line
        line = _line(proc.stdout)
        assert "31 new" in line, line  # built anew, with no other change to start it
        assert proc.poll() is None
    finally:
        rc = stopped(proc)
    err = proc.stderr.read()
    assert "Traceback" not in err, err
    assert rc in (0, 130)
    assert run_folio("query", "burst note 7", "--lexical", "--paths-only", cwd=root).stdout.startswith("b07.md:")


def test_index_watch_piped_into_head_ends_at_its_next_line(corpus):
    """`folio index --watch | head -1` went on watching for ever once head had gone (its lines went
    nowhere); it ends at the next line it would print, as `tail -f | head -1` does."""
    root, _srv = corpus
    proc = subprocess.Popen(["sh", "-c", f"'{folio_command()[0]}' index --watch | head -1"], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert _line(proc.stdout).startswith("indexed 2 files")
        end = time.monotonic() + 20
        k = 0
        while proc.poll() is None and time.monotonic() < end:
            (root / "ops" / "oncall.md").write_text(f"# On call\n\nThe rota changes {k} times.\n")
            k += 1
            time.sleep(0.3)
        assert proc.poll() == 0, "still watching with no reader left"
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_index_watch_says_the_first_runs_notice_once(tmp_path, run_folio):
    """With no server, the first run's long `no embeddings server answers` sentence came twice: once
    from the first run, once again from the catch-up run after it."""
    root = tmp_path / "c"
    root.mkdir()
    (root / "folio.yaml").write_text("endpoint: http://127.0.0.1:9/v1/embeddings\nmodel: fake\n")
    (root / "a.md").write_text("# A\n\nThe first note.\n")
    proc = start_watch(root, settled=False)
    seen = []
    while not seen or not seen[-1].startswith("watching "):
        seen.append(_line(proc.stderr))
    rc = stopped(proc)
    err = "".join(seen) + proc.stderr.read()
    assert rc == 0 and "Traceback" not in err, err
    assert err.count("no embeddings server answers") == 1, err


# -- a server that comes (back) while the watcher waits --------------------------------------------


def _no_server_corpus(tmp_path) -> tuple[Path, int]:
    """BASE under tmp_path/c, its folio.yaml naming a port where nothing listens (yet)."""
    from helpers import free_port, write_tree

    port = free_port()
    root = write_tree(tmp_path / "c", {**BASE, "folio.yaml": f"endpoint: http://127.0.0.1:{port}/v1/embeddings\n"
                                                             f"model: fake\n"})
    return root, port


def _ranked_by_meaning(run_folio, root: Path, query: str) -> list:
    import json

    r = run_folio("query", query, "--json", "--no-refresh", cwd=root)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)["results"]
    assert results
    return [row["ranks"]["semantic"] for row in results]


def test_index_watch_embeds_what_waits_once_a_server_starts_with_no_file_change(tmp_path, fake_server, run_folio):
    """`folio index --watch` started before llama-server: every section waited for vectors until some
    file happened to change, however long the server had been answering."""
    root, port = _no_server_corpus(tmp_path)
    with watching(root) as proc:
        assert _line(proc.stdout).startswith("indexed 2 files")  # lexical only: nothing listens there
        fake_server(port=port)
        started = time.monotonic()
        line = _line(proc.stdout, within=15)
        assert "embeddings server answers" in line and "3 sections embedded" in line, line
        assert time.monotonic() - started < 10, line
        assert None not in _ranked_by_meaning(run_folio, root, "revenue recognised")


def test_index_watch_burst_with_the_server_known_down_pays_no_retries_yet_sees_it_back(tmp_path, fake_server,
                                                                                        run_folio):
    """Each burst with no server took ~0.8 s, its vectors pass retrying a connection the watcher already
    knew was refused; it takes one attempt now, and a server back by the next burst is not missed."""
    import re

    root, port = _no_server_corpus(tmp_path)
    with watching(root) as proc:
        assert _line(proc.stdout).startswith("indexed 2 files")
        (root / "late.md").write_text("# Late\n\nA wombat wrote this.\n")
        line = _line(proc.stdout, within=15)
        assert "late.md: 1 new; sections wait for vectors until an embeddings server listens at" in line, line
        assert float(re.search(r"\(([\d.]+) s\)$", line)[1]) < 0.6, line  # 3 attempts and 0.75 s of waits before
        fake_server(port=port)
        (root / "later.md").write_text("# Later\n\nA quokka wrote this.\n")
        lines = [_line(proc.stdout, within=15)]
        if "later.md" not in lines[0]:  # a look for the server came first
            lines.append(_line(proc.stdout, within=15))
        assert "later.md: 1 new;" in lines[-1] and "embedded" in lines[-1], lines
        assert None not in _ranked_by_meaning(run_folio, root, "wombat quokka revenue")


def test_index_watch_embeds_what_a_server_killed_mid_burst_left_once_it_is_back(tmp_path, fake_server, run_folio):
    """The server killed while a burst embedded (a crash, a restart): what it had not embedded waited
    for vectors until the next file change."""
    import re

    root, srv = _slow_corpus(tmp_path, fake_server, run_folio, n=0)
    with watching(root) as proc:
        assert _line(proc.stdout).startswith("indexed 1 file")
        before = srv.stats()["inputs"]
        for i in range(30):
            (root / f"b{i:02}.md").write_text(f"# B{i}\n\nBurst note {i} about the ferry.\n")
        _until(lambda: srv.stats()["inputs"] >= before + 4)  # the burst's vectors pass is embedding
        srv.kill()
        line = _line(proc.stdout, within=30)
        waiting = re.search(r"(\d+) sections waiting for vectors", line)
        assert "30 new" in line and waiting, line
        # no "run `folio index` again": the watcher looks for the server itself
        assert "wait for vectors: they are embedded once it listens again (the watcher looks for it) (" in line
        assert "folio index" not in line, line
        srv.restart()  # the same port
        started = time.monotonic()
        line = _line(proc.stdout, within=15)
        assert "embeddings server answers" in line and f"{waiting[1]} sections embedded" in line, line
        assert time.monotonic() - started < 10, line
        assert None not in _ranked_by_meaning(run_folio, root, "burst note 7 ferry")


def test_mcp_embeds_what_waits_once_a_server_starts(tmp_path, fake_server, run_folio):
    """`folio mcp` started before its embeddings server (both launched at login): semantic queries
    found no vector until a file changed."""
    root, port = _no_server_corpus(tmp_path)
    assert run_folio("index", cwd=root).returncode == 0  # lexical only

    async def body():
        async with stdio(root) as c:
            await anyio.sleep(1)  # its catch-up run finds no server either
            fake_server(port=port)

            async def by_meaning():
                got = await c.call_tool("query", {"query": "revenue recognised", "mode": "semantic",
                                                  "no_refresh": True})
                return (not got.is_error and paths_of(got)[:1] == ["finance/revenue.md"]
                        and not got.structured_content["notices"])
            await until(by_meaning, timeout=15)

    anyio.run(body)


def test_index_watch_gives_way_to_edits_while_its_server_loads_its_model_then_embeds(corpus, run_folio):
    """llama-server restarted under a watcher, loading its model (503 "Loading model" everywhere): a
    burst spent ~20 s of busy retries (a file written meanwhile waited that long for even its words),
    then gave up, and what waited for vectors stayed so until some file changed."""
    import json

    root, srv = corpus
    with watching(root) as proc:
        srv.control(loading_s=16)
        (root / "early.md").write_text("# Early\n\nA numbat wrote this.\n")
        line = _line(proc.stderr, within=20)
        assert "is loading its model" in line and "folio waits for it ..." in line, line
        (root / "late.md").write_text("# Late\n\nA wombat wrote this.\n")
        t0 = time.monotonic()

        def found() -> bool:
            r = run_folio("query", "wombat", "--json", "--no-refresh", cwd=root)
            return r.returncode == 0 and any(row["path"] == "late.md" for row in json.loads(r.stdout)["results"])
        _until(found, within=11)  # it waited for the busy retries before: ~20 s
        assert time.monotonic() - t0 < 11
        line = _line(proc.stdout, within=30)
        while " sections embedded" not in line:
            line = _line(proc.stdout, within=30)
        assert "late.md: 1 new; 2 sections embedded" in line, line  # early.md's and late.md's, nothing changed since
        assert None not in _ranked_by_meaning(run_folio, root, "wombat numbat revenue on call")


def test_index_watch_asks_a_server_busy_past_its_retries_again_and_embeds_once_it_answers(corpus, run_folio):
    """A rate-limited server (429 past the retries) ended a burst with "run `folio index` again once
    the server answers", and what waited for vectors stayed so until some file changed."""
    root, srv = corpus
    with watching(root) as proc:
        srv.control(fail="429", retry_after="0")
        assert _line(proc.stdout).startswith("indexed 2 files")  # the first run's report
        (root / "late.md").write_text("# Late\n\nA wombat wrote this.\n")
        line = _line(proc.stdout, within=30)
        assert "late.md: 1 new;" in line and "answered HTTP 429" in line, line
        assert "for vectors: they are embedded once it answers (the watcher asks it again) (" in line, line
        assert "run the command again" not in line, line
        assert "folio index" not in line, line
        time.sleep(7)  # the watcher asks again at 2 s and 6 s: still refused, and not said again
        srv.control(fail=None)
        line = _line(proc.stdout, within=30)
        assert "the embeddings server answers: 1 section embedded" in line, line
        assert None not in _ranked_by_meaning(run_folio, root, "wombat revenue on call")


def test_index_watch_names_the_file_sed_edits_in_place_not_its_temporary_file(corpus):
    """`sed -i` writes a temporary file beside the one it edits and renames it over it: the burst's line
    named both (`ops/oncall.md, ops/sedRMlgvl: 1 changed`)."""
    import shutil

    if shutil.which("sed") is None:
        pytest.skip("no sed")
    root, _srv = corpus
    with watching(root) as proc:
        assert _line(proc.stdout).startswith("indexed 2 files")
        subprocess.run(["sed", "-i", "s/Monday/Tuesday/", "ops/oncall.md"], cwd=root, check=True)
        line = _line(proc.stdout, within=30)
        assert "  ops/oncall.md: 1 changed;" in line, line
        assert "sed" not in line, line


HANGING_RESOLVER = '''\
import os
import socket
import time

import _socket


def _wrap(real):
    def getaddrinfo(host, *args, **kwargs):
        if host == "embed.test":  # resolves to this machine, until the flag file says the DNS server hangs
            while os.path.exists(os.environ["FOLIO_TEST_DNS_HANGS"]):
                time.sleep(0.05)
            host = "127.0.0.1"
        return real(host, *args, **kwargs)
    return getaddrinfo


socket.getaddrinfo = _wrap(socket.getaddrinfo)
_socket.getaddrinfo = _wrap(_socket.getaddrinfo)
'''


def test_index_watch_goes_on_while_the_name_of_its_servers_host_does_not_resolve(tmp_path):
    """A DNS server that hangs stalled `folio index --watch` for good: its look for a server it had
    found down asked getaddrinfo for the endpoint's host with no bound, so no change was indexed
    after it. The lookup is bounded by the look's connect time now. (The resolver is made to hang by
    a sitecustomize on PYTHONPATH that wraps getaddrinfo for one host name.)"""
    from helpers import free_port, write_tree

    site = write_tree(tmp_path / "site", {"sitecustomize.py": HANGING_RESOLVER})
    flag = tmp_path / "dns-hangs"
    root = write_tree(tmp_path / "c", {**BASE, "folio.yaml": f"endpoint: http://embed.test:{free_port()}/v1/embeddings"
                                                             f"\nmodel: fake\n"})
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    proc = start_watch(root, env={"PYTHONPATH": path, "FOLIO_TEST_DNS_HANGS": str(flag)})
    try:
        assert _line(proc.stdout).startswith("indexed 2 files")  # nothing listens there: lexical only
        flag.touch()  # from now on the name never resolves
        time.sleep(3)  # the watcher's first look for the server (2 s after the run) is under way
        (root / "late.md").write_text("# Late\n\nA wombat wrote this.\n")
        line = _line(proc.stdout, within=30)
        assert "late.md: 1 new; sections wait for vectors until an embeddings server listens at" in line, line
    finally:
        rc = stopped(proc)
        flag.unlink(missing_ok=True)
    err = proc.stderr.read()
    assert rc == 0 and "Traceback" not in err, err


def test_an_index_run_against_a_host_whose_name_never_resolves_ends_lexical_only(tmp_path, run_folio):
    """The same hanging resolver on the request's own path (a host off this machine goes through
    httpx, whose connect timeout does not cover the lookup): `folio index` never ended. Each lookup
    ends within the connect time now, and the run builds the lexical plane as with no server."""
    from helpers import free_port, write_tree

    site = write_tree(tmp_path / "site", {"sitecustomize.py": HANGING_RESOLVER})
    flag = tmp_path / "dns-hangs"
    flag.touch()
    root = write_tree(tmp_path / "c", {**BASE, "folio.yaml": f"endpoint: http://embed.test:{free_port()}/v1/embeddings"
                                                             f"\nmodel: fake\n"})
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    try:
        r = run_folio("index", cwd=root, env={"PYTHONPATH": path, "FOLIO_TEST_DNS_HANGS": str(flag)}, timeout=90)
    finally:
        flag.unlink()
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "no embeddings server answers at http://embed.test:" in r.stderr, r.stderr
    assert r.stdout.startswith("indexed 2 files"), r.stdout


def test_a_file_an_event_names_is_read_even_when_its_size_and_mtime_are_as_indexed(corpus, run_folio):
    """An edit that keeps the size and puts the old mtime back (a tool restoring it, `touch -d`, a sync,
    a checkout within the mtime's granularity) sends an event, but the burst's run compared the stat
    alone and passed the file by: `folio ls` said `current` and queries gave the old content's lines."""
    import hashlib
    import json

    root, _srv = corpus
    path = root / "ops" / "oncall.md"
    old = path.read_text()
    # the same size: Monday -> Sunday, and the Paging heading one line up (its section moves)
    new = "# On call\n\nThe rota changes every Sunday.\n## Paging\n\n\nPages go to the primary first.\n"
    assert len(new) == len(old)
    st = path.stat()
    with watching(root) as proc:
        assert _line(proc.stdout).startswith("indexed 2 files")
        # written beside it (a hidden name: not followed), its mtime set back, then renamed over it as an
        # editor saves: one event, whatever the timing
        (root / ".stage").mkdir()
        staged = root / ".stage" / "oncall.md"
        staged.write_text(new)
        os.utime(staged, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.rename(staged, path)
        assert (path.stat().st_mtime_ns, path.stat().st_size) == (st.st_mtime_ns, st.st_size)
        line = _line(proc.stdout, within=30)  # the watcher's line for the burst
        assert "ops/oncall.md: 1 changed" in line, line
    sha = hashlib.sha256(new.encode()).hexdigest()
    got = json.loads(run_folio("query", "primary", "--lexical", "--json", cwd=root).stdout)["results"][0]
    assert (got["path"], got["start"], got["freshness"]) == ("ops/oncall.md", 4, "current"), got
    assert sha.startswith(got["citation"]["sha"]), got
    assert "ops/oncall.md" in run_folio("query", "Sunday", "--lexical", "--paths-only", cwd=root).stdout


def test_a_burst_re_embeds_only_the_changed_section_of_a_file_whose_long_section_the_server_divided(
        tmp_path, fake_server, run_folio):
    """The words pass (no server: no token counts) gave a long section divided by the server's counts
    whole again, dropping its pieces' vectors: every edit elsewhere in the file re-embedded them all
    (`1 changed; 5 sections embedded`), and the vectors pass wrote every record of the file again."""
    import json

    srv = fake_server(dim=32, max_tokens=512)
    para = "word " * 100 + "\n\n"
    root = indexed(tmp_path / "c", {"long.md": "# Long\n\n" + para * 12 + "## Tail\n\nThe tail says hello.\n"},
                   srv, run_folio)
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["sections"] == 4 + 1 and s["embedded"] == s["sections"]  # the long section in 4 records
    with watching(root) as proc:
        assert _line(proc.stdout).startswith("indexed 1 file")
        p = root / "long.md"
        p.write_text(p.read_text().replace("The tail says hello.", "The tail says goodbye, wombat."))
        line = _line(proc.stdout, within=30)
        assert "long.md: 1 changed; 1 section embedded" in line, line
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["sections"] == 5 and s["embedded"] == 5 and s["dead_rows"] <= 1, s
    got = json.loads(run_folio("query", "wombat goodbye", "--mode", "semantic", "--json", cwd=root).stdout)
    assert (got["results"][0]["start"], got["notices"]) == (27, []), got
    again = json.loads(run_folio("index", "--json", cwd=root).stdout)
    assert again["embedded"] == 0 and again["changed"] == 0, again
