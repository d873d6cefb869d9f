"""A `folio index` run under way is reported as under way (how far, about how long is left), not as
a run that stopped; and while most files are not indexed yet the confidence band is never
`grounded`. Through the real CLI against the fake embeddings server, which is made to hold the
run's second batch (requests holding a "ferry" section take minutes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from helpers import folio_command

N = 600  # files, one section each: the first commit (256 sections) holds fewer than half of them


def spread(n: int, sample: int = 32) -> set[int]:
    """The files report.sample_first reads first (spread over the run): they must not hold a ferry."""
    step = n / sample
    return {int(i * step + step / 2) for i in range(sample)}


def test_a_run_under_way_is_reported_as_such_and_the_band_is_not_grounded(tmp_path, fake_server, write_tree,
                                                                          run_folio):
    srv = fake_server()
    srv.control(delay_input_containing="ferry", delay_input_ms=200_000)
    early = spread(N)
    files = {f"notes/n{i:03}.md": f"# Note {i}\n\nMarker tok{i:03}x about the harbour"
                                  + (" and the ferry" if i >= 400 and i not in early else "") + ".\n"
             for i in range(N)}
    root = tmp_path / "c"
    write_tree(root, {**files, "folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n"})
    env = {**os.environ, "FOLIO_TIMEOUT": "600"}
    run = subprocess.Popen([*folio_command(), "index"], cwd=root, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 120
        while True:  # until the first batch is committed and the run waits on the ferry
            st = run_folio("status", "--json", cwd=root)
            if st.returncode == 0 and json.loads(st.stdout)["files"] > 0:
                break
            assert run.poll() is None and time.monotonic() < end, run.stderr.read() if run.poll() else "slow"
            time.sleep(0.3)
        status = json.loads(run_folio("status", "--json", cwd=root).stdout)
        assert status["running"]["pid"] == run.pid and status["files"] < N / 2
        assert status["running"]["files_total"] == N
        text = run_folio("status", cwd=root).stdout
        assert f"a `folio index` run (pid {run.pid}) is under way: it has read" in text
        assert "stopped" not in text

        q = run_folio("query", "marker tok007x", "--lexical", "--json", cwd=root)
        assert q.returncode == 0, q.stderr
        got = json.loads(q.stdout)
        assert got["results"][0]["path"] == "notes/n007.md"
        partial = [n for n in got["notices"] if n.startswith("this index is partial")]
        assert partial and f"a `folio index` run (pid {run.pid}) is under way" in partial[0], got["notices"]
        assert "stopped" not in partial[0] and partial[0].endswith("it goes on by itself")
        conf = got["confidence"]
        assert conf["band"] == "partial" and conf["found_files"] == N and conf["indexed_files"] < N / 2
        q = run_folio("query", "marker tok007x", "--lexical", "--band", cwd=root)
        assert f"confidence: partial - only {conf['indexed_files']:,} of the 600 files are indexed yet" in q.stderr
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    # killed: its note stays, its pid is gone: a run that stopped
    status = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert status["running"] is None and status["unfinished"]
    q = run_folio("query", "marker tok007x", "--lexical", "--json", cwd=root)
    assert any("the last `folio index` stopped before it reached" in n for n in json.loads(q.stdout)["notices"])
