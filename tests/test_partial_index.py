"""An index that covers only part of its corpus, as a user meets it through the CLI: a `folio index`
stopped mid-way, and the notices a query and `status` give about it until a run finishes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from helpers import folio_command, free_port


def _files_committed(root: Path) -> int:
    db = root / ".folio" / "index.db"
    if not db.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return c.execute("SELECT COUNT(*) FROM files").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _stop_midway(root: Path, sig=signal.SIGINT) -> subprocess.CompletedProcess:
    """Start `folio index` and send `sig` once its first batch is committed (as Ctrl-C would)."""
    # Ctrl-C's signal as a terminal delivers it: a suite started in the background (`cmd &` in a script)
    # hands its children SIGINT ignored, and Python then never turns it into KeyboardInterrupt.
    proc = subprocess.Popen([*folio_command(), "index"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while proc.poll() is None and _files_committed(root) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be stopped: slow the server down"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_stopped_run_makes_queries_and_status_say_the_index_is_partial(corpus_copy, fake_server, run_folio):
    srv = fake_server(delay_ms=150)
    root = corpus_copy("rust-book")
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\n")
    total = len(list(root.rglob("*.md")))
    r = _stop_midway(root)
    assert r.returncode == 130, r.stderr
    held = _files_committed(root)
    assert 0 < held < total

    for args in ((), ("--lexical",)):
        q = run_folio("query", "how does ownership work", "--json", *args, cwd=root)
        assert q.returncode == 0, q.stderr
        notes = [n for n in json.loads(q.stdout)["notices"] if "partial" in n]
        assert len(notes) == 1, q.stderr
        assert f"reached {total - held} of the {total} files" in notes[0] and "`folio index`" in notes[0]
        assert notes[0] in q.stderr

    s = run_folio("status", cwd=root)
    files_line = next(ln for ln in s.stdout.splitlines() if ln.startswith("files"))
    assert f"{total - held} not indexed yet" in files_line and "changed since indexing" not in files_line
    assert "stopped before the end" in s.stdout
    data = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (data["unindexed"], data["changed"], data["deleted"], data["unfinished"]) == (total - held, 0, 0, True)

    # a run that finishes clears it: no notice, nothing "not indexed"
    assert run_folio("index", cwd=root).returncode == 0
    q = run_folio("query", "how does ownership work", cwd=root)
    assert q.returncode == 0 and q.stderr == ""
    data = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (data["unindexed"], data["unfinished"], data["waiting"]) == (0, False, 0)


def test_status_tells_new_changed_and_deleted_files_apart(tmp_path, write_tree, run_folio):
    root = write_tree(tmp_path / "c", {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n", "c.md": "# C\n\ngamma\n"})
    endpoint = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    assert run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": endpoint}).returncode == 0
    (root / "a.md").write_text("# A\n\nalpha, edited\n")
    os.remove(root / "b.md")
    (root / "d.md").write_text("# D\n\ndelta\n")
    s = run_folio("status", cwd=root)
    files_line = next(ln for ln in s.stdout.splitlines() if ln.startswith("files"))
    assert files_line.endswith("(1 not indexed yet, 1 changed since indexing, 1 deleted since indexing)"), files_line


def test_the_lexical_fallback_names_an_endpoint_once(tmp_path, write_tree, run_folio, fake_server):
    srv = fake_server()
    root = write_tree(tmp_path / "c", {"a.md": "# Retries\n\nbackoff with jitter\n"})
    assert run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": srv.url}).returncode == 0
    srv.stop()
    r = run_folio("query", "jitter", cwd=root, env={"FOLIO_ENDPOINT": srv.url})
    assert r.returncode == 0
    notes = r.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0].count(srv.url) == 1 and "lexically" in notes[0], r.stderr


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_ctrl_c_in_one_big_file_keeps_the_vectors_the_server_gave(tmp_path, write_tree, fake_server, run_folio, jobs):
    """One file of 1,500 sections is one batch: Ctrl-C half-way through its embedding lost every
    vector (the next run embedded them all again). What the server answered is committed, and the
    next run embeds only the rest."""
    srv = fake_server(delay_ms=100)
    root = write_tree(tmp_path / "c", {"big.md": "".join(f"# Part {i}\n\nbody of part {i}\n\n" for i in range(1500)),
                                       "folio.yaml": f"endpoint: {srv.url}\n"})
    proc = subprocess.Popen([*folio_command(), "index", "--jobs", jobs], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while proc.poll() is None and srv.stats()["inputs"] < 400 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be stopped: slow the server down"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert kept["files"] == 1 and 300 <= kept["sections"] - kept["waiting"] < 1500, kept
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["reused"] == kept["sections"] - kept["waiting"] and rep["embedded"] + rep["reused"] == 1500, rep
