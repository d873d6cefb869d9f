"""Interrupted and concurrent `folio index` runs, through the real CLI.

`kill -9` lands at chosen moments of a run (the fake server's per-request delay stretches the run
so the kill falls mid-way): before the first commit, between batches, during compaction, after the
last request, and during the run that recovers from a kill. After every kill the index answers
queries; the next `folio index` ends equal to a clean build (tests/helpers_index.py). Two writers
at once: the second waits with a message (or declines with --no-wait) and queries keep answering.
`KILLDEBUG=1 pytest -s` prints what each kill left (records, generation, rows, files on disk).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import folio_command
from helpers_index import assert_same_index, check_integrity, read_index

DELAY_MS = 60


def _edit(root: Path) -> None:
    """Every heading changes (so every section's text does) and a quarter of the files go: dead
    rows then outnumber live ones and the run ends with a compaction."""
    for i, p in enumerate(sorted(root.rglob("*.md"))):
        if i % 4 == 0:
            p.unlink()
            continue
        text = p.read_text(encoding="utf-8")
        p.write_text(re.sub(r"^(#{1,6} .*)$", r"\1 (revised)", text, flags=re.M), encoding="utf-8")


def _settle(root: Path) -> None:
    t = time.time() - 60  # out of the racy window: a settled run re-reads nothing
    for p in root.rglob("*.md"):
        os.utime(p, (t, t))


@pytest.fixture(scope="module")
def server():
    from helpers import FakeServer

    srv = FakeServer(dim=384, n_ctx=8192)  # takes rust-book's records whole: the edit leaves mostly dead rows
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def builds(server, corpus, tmp_path_factory):
    """Clean builds of the corpus before and after the edit, and an indexed copy to start from."""
    base = tmp_path_factory.mktemp("kill")
    cfg = f"endpoint: {server.url}\nmodel: fake\n"
    server.control(delay_ms=0)

    def build(name: str, edit: bool) -> Path:
        root = base / name
        shutil.copytree(corpus("rust-book"), root)
        (root / "folio.yaml").write_text(cfg)
        if edit:
            _edit(root)
        _settle(root)
        r = _run(root, "index")
        assert r.returncode == 0, r.stderr
        return root

    clean_a = build("clean-a", edit=False)
    clean_b = build("clean-b", edit=True)
    return {"a": clean_a, "b": clean_b, "base": base}


def _run(root: Path, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*folio_command(), *args], cwd=root, capture_output=True, text=True, timeout=timeout)


def _start(root: Path, *args) -> subprocess.Popen:
    return subprocess.Popen([*folio_command(), *args], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _kill_when(proc: subprocess.Popen, cond, timeout: float = 120) -> bool:
    """SIGKILL proc as soon as cond() holds; False when the run ended first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if cond():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
            return True
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the condition never held")
        time.sleep(0.002)
    proc.communicate()
    return False


def _copy(src: Path, dest: Path, with_index: bool) -> Path:
    shutil.copytree(src, dest, ignore=None if with_index else shutil.ignore_patterns(".folio"))
    return dest


def _answers(root: Path) -> None:
    """The index a kill left behind answers queries (semantic and lexical) from what it holds."""
    if os.environ.get("KILLDEBUG"):
        d = root / ".folio"
        st = read_index(root) if (d / "index.db").is_file() else None
        print("\nKILL STATE", root.name, st and (len(st.records), st.meta.get("gen"), st.rows, st.matrix_bytes,
              len(st.segments)), sorted(p.name for p in d.iterdir()) if d.is_dir() else None,
              sorted(p.name for p in (d / "lex").iterdir()) if (d / "lex").is_dir() else None)
    for extra in ((), ("--lexical",)):
        r = _run(root, "query", "how does ownership work", "--no-refresh", "--json", *extra)
        if r.returncode == 1 and "no index at" in r.stderr:  # killed before the first stamp
            assert not (root / ".folio/index.db").is_file() or not read_index(root).records
            assert "run `folio index`" in r.stderr and "damaged" not in r.stderr, r.stderr
            continue
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        held = read_index(root).records
        for res in data["results"]:  # a row (possibly several touching records) starts and ends on held records
            assert any(k[0] == res["path"] and k[1] == res["start"] for k in held), res
            assert any(k[0] == res["path"] and k[2] == res["end"] for k in held), res


def _resume_equals(root: Path, clean: Path) -> dict:
    r = _run(root, "index", "--json")
    assert r.returncode == 0, r.stderr
    assert_same_index(root, clean)
    return json.loads(r.stdout)


def _requests(server, n: int):
    return lambda: server.stats()["requests"] >= n


def _committed_rows(root: Path) -> int:
    import sqlite3

    if not (root / ".folio/index.db").is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{root / '.folio/index.db'}?mode=ro", uri=True) as c:
            r = c.execute("SELECT value FROM meta WHERE key = 'rows'").fetchone()
    except sqlite3.OperationalError:  # not created yet
        return 0
    return int(r[0]) if r else 0


def _full_requests(server, root: Path) -> int:
    """How many requests an uninterrupted run of the same work makes."""
    server.control(delay_ms=0, reset_stats=True)
    r = _run(root, "index")
    assert r.returncode == 0, r.stderr
    n = server.stats()["requests"]
    return n


# --------------------------------------------------------------------------- kill points


def test_kill_on_a_first_build_at_start_before_between_and_after_commits(server, builds, tmp_path):
    a = builds["a"]
    # Before anything: as soon as the lock file exists (walking, parsing).
    root = _copy(a, tmp_path / "k0", with_index=False)
    server.control(delay_ms=DELAY_MS, reset_stats=True)
    proc = _start(root, "index")
    assert _kill_when(proc, lambda: (root / ".folio/write.lock").exists())
    _answers(root)
    _resume_equals(root, a)

    # Before the first commit: the probe went out, no batch is committed yet.
    root = _copy(a, tmp_path / "k1", with_index=False)
    server.control(delay_ms=DELAY_MS, reset_stats=True)
    proc = _start(root, "index")
    assert _kill_when(proc, _requests(server, 2))
    st = check_integrity(root, settled=False)
    assert not st.records  # killed before the first commit
    _answers(root)
    _resume_equals(root, a)

    # Between batches: the first commit is in, the run is far from done.
    root = _copy(a, tmp_path / "k2", with_index=False)
    server.control(delay_ms=DELAY_MS, reset_stats=True)
    proc = _start(root, "index")
    assert _kill_when(proc, _requests(server, 13))
    st = check_integrity(root, settled=False)
    total = len(read_index(a).records)
    assert 0 < len(st.records) < total, (len(st.records), total)
    _answers(root)

    # Kill the run that resumes, too (after it committed a batch of its own); then let one finish.
    server.control(delay_ms=DELAY_MS, reset_stats=True)
    proc = _start(root, "index")
    assert _kill_when(proc, lambda: _committed_rows(root) > st.rows)
    assert len(check_integrity(root, settled=False).records) > len(st.records)
    _answers(root)
    rep = _resume_equals(root, a)
    assert rep["embedded"] < total  # it kept what the killed runs committed

    # After the last commit, while the run merges its lexical segments into one. That window is
    # short (a few segments to merge): a run that ends before the kill lands is run again.
    rows = read_index(a).rows
    for attempt in range(5):
        root = _copy(a, tmp_path / f"k3-{attempt}", with_index=False)
        server.control(delay_ms=DELAY_MS, reset_stats=True)
        proc = _start(root, "index")
        if _kill_when(proc, lambda: _committed_rows(root) >= rows):  # noqa: B023 - called before root moves on
            break
    else:
        raise AssertionError("five runs ended before a kill landed between their last commit and their end")
    assert len(check_integrity(root, settled=False).records) == total
    _answers(root)
    _resume_equals(root, a)


def test_a_first_run_killed_mid_transaction_before_its_wal_switch_reads_as_no_index_yet(tmp_path, run_folio):
    """A kill between the first write to a new index.db and its switch to WAL leaves a hot rollback
    journal, which SQLite undoes only with write access: a query says there is no index yet (not that
    the index is damaged), and the next `folio index` builds it."""
    root = tmp_path / "c"
    (root / ".folio").mkdir(parents=True)
    (root / "own.md").write_text("# Ownership\n\nEach value has one owner.\n", encoding="utf-8")
    dying = ("import os, sqlite3\n"
             "c = sqlite3.connect('index.db', isolation_level=None)\n"
             "c.execute('PRAGMA cache_size=1'); c.execute('BEGIN IMMEDIATE')\n"
             "c.execute('CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)')\n"
             "for i in range(3000): c.execute('INSERT INTO meta VALUES (?, ?)', (str(i), 'x' * 100))\n"
             "os._exit(9)\n")  # pages spilled into index.db, the journal left hot
    subprocess.run([sys.executable, "-c", dying], cwd=root / ".folio", check=False)
    assert (root / ".folio/index.db-journal").stat().st_size > 0
    r = run_folio("query", "who owns a value", "--lexical", "--no-refresh", cwd=root)
    assert r.returncode == 1 and "no index at" in r.stderr and "damaged" not in r.stderr, r.stderr
    assert not read_index(root).records
    r = run_folio("index", cwd=root)  # no endpoint: the lexical plane alone
    assert r.returncode == 0, r.stderr
    r = run_folio("query", "who owns a value", "--lexical", cwd=root)
    assert r.returncode == 0 and "own.md" in r.stdout, r.stderr


def test_kill_during_an_edit_run_between_batches_at_compaction_and_after_the_last_answer(server, builds, tmp_path):
    a, b = builds["a"], builds["b"]
    probe = _copy(a, tmp_path / "probe", with_index=True)
    _edit(probe)
    full = _full_requests(server, probe)
    assert json.loads(_run(probe, "index", "--json").stdout)["compacted"] == 0  # settled
    gen = int(read_index(a).meta["gen"])

    def edited(name: str) -> Path:
        root = _copy(a, tmp_path / name, with_index=True)
        _edit(root)
        server.control(delay_ms=DELAY_MS, reset_stats=True)
        return root

    # Mid-batch, before the run's first commit.
    root = edited("e1")
    proc = _start(root, "index")
    assert _kill_when(proc, _requests(server, 5))
    assert check_integrity(root, settled=False).rows == read_index(a).rows
    _answers(root)
    rep = _resume_equals(root, b)
    assert rep["compacted"] > 0 and rep["dead_rows"] == 0

    # Between batches: old and new rows side by side, dead rows not yet reclaimed.
    root = edited("e2")
    proc = _start(root, "index")
    assert _kill_when(proc, _requests(server, 13))
    assert check_integrity(root, settled=False).rows > read_index(a).rows
    _answers(root)
    _resume_equals(root, b)

    # During compaction: the new matrix generation is being written.
    root = edited("e3")
    proc = _start(root, "index")
    assert _kill_when(proc, lambda: (root / f".folio/vectors.{gen + 1}.f32").exists())
    check_integrity(root, settled=False)
    _answers(root)
    _resume_equals(root, b)

    # After the last request: the final commit, the lexical merge, the compaction.
    root = edited("e4")
    proc = _start(root, "index")

    def answered_all():
        st = server.stats()
        return st["requests"] >= full and st["in_flight"] == 0

    assert _kill_when(proc, answered_all)
    check_integrity(root, settled=False)
    _answers(root)
    _resume_equals(root, b)


# --------------------------------------------------------------------------- two writers


def test_a_second_index_waits_or_declines_and_queries_keep_answering(server, builds, tmp_path):
    a, b = builds["a"], builds["b"]
    root = _copy(a, tmp_path / "w", with_index=True)
    _edit(root)
    server.control(delay_ms=DELAY_MS * 2, reset_stats=True)
    first = _start(root, "index", "--json")
    deadline = time.monotonic() + 60
    while server.stats()["requests"] < 1:  # the first run holds the lock before it sends anything
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)

    r = _run(root, "index", "--no-wait")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("folio: another folio is writing the index at "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1

    second = _start(root, "index", "--json")
    line = second.stderr.readline()
    assert line.startswith("waiting for another folio writing the index at "), line
    assert first.poll() is None  # it said so while the first one was still running
    # Written while the second run waits: it lists the tree once its turn comes, not as it started.
    late = root / "late-arrival.md"
    late.write_text("# Late arrival\n\nWritten while the second run waited for the lock.\n", encoding="utf-8")

    answered = 0
    while first.poll() is None:
        for extra in (("--no-refresh",), ("--lexical", "--no-refresh"), ()):
            q = _run(root, "query", "how does ownership work", "--json", *extra)
            assert q.returncode == 0, q.stderr
            data = json.loads(q.stdout)
            assert data["results"]
            if not extra and any(r["freshness"] != "current" for r in data["results"]):
                assert any("another folio is updating the index" in n for n in data["notices"]), data["notices"]
            answered += 1
    assert answered >= 3
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    rep2 = json.loads(out2)
    assert rep2["new"] == 1 and rep2["embedded"] == 1 and rep2["changed"] == 0  # the first left the rest done
    late.unlink()
    assert _run(root, "index").returncode == 0
    assert_same_index(root, b)


def test_readers_keep_answering_while_runs_compact_and_merge(server, builds, tmp_path):
    """A reader's snapshot can name a matrix generation or lexical segment that a writer removes
    a moment later (compaction, segment merge). Readers run in-process here so thousands of reads
    overlap the few milliseconds of each switch; before readers retried, ~1 in 100 such reads
    failed with 'index damaged' or an IndexError."""
    import threading

    from folio import config, search

    root = _copy(builds["a"], tmp_path / "r", with_index=True)
    settings = config.resolve(root, {})
    originals = {p: p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md"))}
    server.control(delay_ms=0, reset_stats=True)
    stop, errors, reads = threading.Event(), [], [0]

    def reader():
        while not stop.is_set():
            for mode in ("semantic", "lexical"):
                try:
                    a = search.run(root, search.Request("how does ownership work", 5, refresh=False, mode=mode,
                                                        want_confidence=True), settings)
                    assert a.hits and a.confidence is not None
                    reads[0] += 1
                except Exception as e:  # noqa: BLE001 - every failure is the finding
                    errors.append(repr(e))

    t = threading.Thread(target=reader)
    t.start()
    compactions = 0
    try:
        for rnd in range(6):
            for p, text in originals.items():  # every heading changes: dead rows outnumber live ones
                p.write_text(re.sub(r"^(#{1,6} .*)$", rf"\1 r{rnd}", text, flags=re.M), encoding="utf-8")
            r = _run(root, "index", "--json")
            assert r.returncode == 0, r.stderr
            compactions += json.loads(r.stdout)["compacted"] > 0
    finally:
        stop.set()
        t.join()
    assert compactions >= 3
    assert not errors, f"{len(errors)} of {reads[0] + len(errors)} reads failed: {errors[:3]}"
    check_integrity(root)


def test_ctrl_c_mid_file_leaves_sections_waiting_that_status_does_not_blame_on_the_server(
        tmp_path, fake_server, write_tree, run_folio):
    """Ctrl-C after the first part of a big file was committed with its vectors: the rest of its
    sections wait for vectors, and status says a run stopped (or its server failed) before embedding
    them, not that the server failed; the next run embeds them."""
    srv = fake_server(dim=32, delay_ms=150)
    big = "\n\n".join(f"## Part {i}\n\nThe ledger entry {i} is kept." for i in range(700))
    # 8 sections a request: ~13 s of embedding, so the Ctrl-C lands mid-run on a loaded machine too
    root = write_tree(tmp_path / "c", {"big.md": "# Big\n\n" + big + "\n", "folio.yaml": "batch_size: 8\n"})
    env = {**os.environ, "FOLIO_ENDPOINT": srv.url}
    # SIGINT as at a terminal: a suite started in the background hands its children SIGINT ignored
    proc = subprocess.Popen([*folio_command(), "index"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            s = json.loads(run_folio("status", "--json", cwd=root).stdout or "{}") if (root / ".folio").exists() \
                else {}
            if s.get("embedded"):
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before a part of big.md was committed"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["waiting"] > 0, s
    text = run_folio("status", cwd=root).stdout
    note = next(ln for ln in text.splitlines() if "have no vectors yet" in ln)
    assert "(the server failed during a run)" not in note and "a run stopped, or its server failed" in note, note
    r = run_folio("index", cwd=root, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(run_folio("status", "--json", cwd=root).stdout)["waiting"] == 0
