"""`kill -9` of `folio index` at random moments, over and over, on a 300-file corpus that keeps
changing between runs (edits, deletions, additions, renames, a heavy churn now and then that ends in
a compaction). After every kill the index passes the integrity check of tests/helpers_index.py (no
record names an unwritten row, the matrix holds every committed row, the segments it names exist),
`status` and queries answer from what it holds; after the last run it equals a clean build of the
final tree. tests/test_interrupted.py kills at chosen points; this one lets chance choose, so the
points nobody thought of get hit too. The seed is printed with any failure (FOLIO_KILL_SEED=N
replays the same edits and kill choices; the timing itself can never be replayed exactly)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import FakeServer, folio_command, write_tree
from helpers_index import assert_same_index, check_integrity, read_index

KILLS = 22
BATCH = 16
_VOCABULARY = """ownership borrow lifetime trait closure iterator module crate cargo test macro enum struct
pattern match error result option vector string slice thread channel mutex async future
lighthouse kettle harbour glacier meadow orchard quarry saddle tunnel violin"""
WORDS = tuple(_VOCABULARY.split())
QUERIES = ("borrow lifetime trait", "kettle harbour meadow", "thread channel mutex")


def _section(rng: random.Random, i: int, j: int) -> str:
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
    return f"## Topic {i}.{j} {rng.choice(WORDS)}\n\n{body}\n"


def _file(rng: random.Random, i: int) -> str:
    head = f"---\nid: doc-{i}\nstatus: {rng.choice(['live', 'draft'])}\n---\n" if rng.random() < 0.5 else ""
    return head + f"# Document {i}\n\n" + "\n".join(_section(rng, i, j) for j in range(rng.randint(4, 12)))


def _settle(root: Path) -> None:
    past = time.time() - 30  # out of the racy window, so a settled run re-reads nothing
    for p in root.rglob("*.md"):
        os.utime(p, (past, past))


def _edit(rng: random.Random, root: Path, counter: list[int], churn: bool) -> tuple[str, int]:
    """Change the tree; returns what was done and how many sections now need embedding.
    `churn`: most files change, dead rows pile up, and a compaction follows."""
    files = sorted(p for p in root.rglob("*.md"))
    picked = rng.sample(files, k=max(1, len(files) * (6 if churn else 2) // 10))
    todo = 0
    for p in picked:
        op = rng.random()
        if op < 0.7:  # every heading changes, so every section's text does; sometimes the lines move too
            word = rng.choice(WORDS)
            text = p.read_text().replace("## Topic", f"## Topic {word}")
            if rng.random() < 0.3:
                text = "Preamble line added.\n\n" + text
            p.write_text(text)
            todo += text.count("## ")
        elif op < 0.85:
            p.unlink()
        else:  # a rename costs no embedding: the bytes are the same
            counter[0] += 1
            p.rename(p.with_name(f"renamed-{counter[0]}.md"))
    for _ in range(rng.randint(0, 5)):
        counter[0] += 1
        text = _file(rng, 10_000 + counter[0])
        write_tree(root, {f"new/n{counter[0]}.md": text})
        todo += text.count("## ")
    _settle(root)
    return ("churn" if churn else "edit") + f" {len(picked)} files, {todo} sections", todo


def _folio(root: Path, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*folio_command(), *args], cwd=root, capture_output=True, text=True, timeout=timeout)


def _commits(root: Path) -> tuple:
    """A signature of what is committed: it changes with every commit a run makes."""
    import sqlite3

    db = root / ".folio" / "index.db"
    if not db.is_file():
        return ()
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05) as c:
            meta = tuple(c.execute("SELECT value FROM meta WHERE key IN ('rows', 'gen') ORDER BY key"))
            return (meta, c.execute("SELECT COUNT(*), COALESCE(MAX(stamped_ns), 0) FROM files").fetchone(),
                    c.execute("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM lexseg").fetchone())
    except sqlite3.Error:  # not created yet, or busy for a moment
        return ()


def _kill_at_random(rng: random.Random, root: Path, srv: FakeServer, todo: int) -> str | None:
    """Start `folio index`, kill -9 it at a random moment of a randomly chosen phase; say when, or
    None if the run finished first. `todo`: sections the run has to embed (for the request trigger)."""
    jobs = ["--jobs", "2"] if rng.random() < 0.3 else []
    base = srv.stats()["requests"]
    before = _commits(root)
    proc = subprocess.Popen([*folio_command(), "index", *jobs], cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    mode = rng.choice(["start", "requests", "commit", "commit", "tail"])
    after = rng.uniform(0.0, 0.25)  # a little later than the trigger: inside whatever follows it
    want_requests = base + rng.randint(1, max(2, todo // BATCH + 2))
    want_commits = rng.randint(1, 3)
    start, seen, commits, last_req, quiet_since = time.monotonic(), before, 0, base, time.monotonic()
    fire = None
    while proc.poll() is None and time.monotonic() - start < 60:
        now = time.monotonic()
        if fire is None:
            if mode == "start" and now - start >= after * 6:  # 0-1.5 s: start-up, walk, parse, probe
                fire = now
            elif mode == "requests" and srv.stats()["requests"] >= want_requests:
                fire = now + after
            elif mode == "commit":
                sig = _commits(root)
                if sig and sig != seen:
                    seen, commits = sig, commits + 1
                    if commits >= want_commits:
                        fire = now + after
            elif mode == "tail":  # the server went quiet: the run is committing, merging, compacting
                req = srv.stats()["requests"]
                if req != last_req:
                    last_req, quiet_since = req, now
                elif req > base and now - quiet_since > 0.05:
                    fire = now + after
        if fire is not None and now >= fire:
            break
        time.sleep(0.003)
    if proc.poll() is not None:
        err = proc.communicate()[1]
        assert proc.returncode == 0, err
        return None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    return (f"{mode} at {time.monotonic() - start:.2f}s, {srv.stats()['requests'] - base} requests, "
            f"{commits} commits seen{' --jobs 2' if jobs else ''}")


def _intact(root: Path, why: str) -> int:
    """The index a kill left is whole and answers; returns how many records it holds."""
    d = root / ".folio"
    unborn = not (d / "index.db").is_file() or not read_index(root).meta
    # A first run killed before it created index.db leaves nothing to check but what readers say.
    st = check_integrity(root, settled=False) if (d / "index.db").is_file() else None
    if st and st.dim:
        for key, (slot, vec) in st.records.items():
            assert not vec or slot < st.rows, f"{why}: {key[:3]} names row {slot}, only {st.rows} are written"
        assert st.matrix_bytes >= st.rows * st.dim * 4, f"{why}: the matrix is short of its committed rows"
    r = _folio(root, "status", "--json")
    if unborn:
        assert r.returncode == 1 and "no index" in r.stderr and "Traceback" not in r.stderr, (why, r.stderr)
        return 0
    assert r.returncode == 0, (why, r.stderr)
    assert json.loads(r.stdout)["sections"] == len(st.records), why
    held = {(k[0], k[1]) for k in st.records} | {(k[0], k[2]) for k in st.records}
    for extra in ((), ("--lexical",)):
        r = _folio(root, "query", QUERIES[len(st.records) % len(QUERIES)], "--no-refresh", "--json", *extra)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (why, r.stderr)
        for res in json.loads(r.stdout)["results"]:
            assert (res["path"], res["start"]) in held and (res["path"], res["end"]) in held, (why, res)
    return len(st.records)


@pytest.mark.slow
def test_random_kills_never_break_the_index_and_the_end_equals_a_clean_build(tmp_path):
    seed = int(os.environ.get("FOLIO_KILL_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    srv = FakeServer(dim=64, delay_ms=25)
    try:
        root = tmp_path / "corpus"
        write_tree(root, {f"d{i // 30:02}/f{i:03}.md": _file(rng, i) for i in range(300)})
        (root / "folio.yaml").write_text(f"endpoint: {srv.url}\nbatch_size: {BATCH}\n")
        _settle(root)
        counter, kills, finished, log = [0], 0, 0, []
        todo = sum(p.read_text().count("## ") for p in root.rglob("*.md"))
        for run in range(KILLS * 5):  # runs that finish before their kill (small edits, a fast machine) take turns too
            if kills >= KILLS:
                break
            if run and (todo < 100 or rng.random() < 0.4):  # a resumed run has what the kill left; add more
                what, more = _edit(rng, root, counter, churn=kills in (4, 12) or rng.random() < 0.2)
                todo += more
                log.append(what)
            moment = _kill_at_random(rng, root, srv, todo)
            if moment is None:
                finished += 1
                todo = 0
                log.append("finished")
                continue
            kills += 1
            log.append(f"kill {kills}: {moment}")
            why = f"seed {seed}, after: {'; '.join(log[-6:])}"
            held = _intact(root, why)
            log[-1] += f" -> {held} records"
            todo = max(todo // 2, 50)  # roughly: the run got part of the way
        if os.environ.get("KILLDEBUG"):
            print(f"\nseed {seed}\n" + "\n".join(log))
        assert kills >= KILLS, f"seed {seed}: only {kills} runs were still going when their kill came ({log})"
        # The last run finishes; it must equal an index built from scratch on the same tree.
        r = _folio(root, "index", "--json", timeout=300)
        assert r.returncode == 0, r.stderr
        clean = tmp_path / "clean"
        shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".folio"))
        r = _folio(clean, "index", timeout=300)
        assert r.returncode == 0, r.stderr
        assert_same_index(root, clean, queries=QUERIES)
        settled = check_integrity(root, settled=True)
        assert set(settled.files) == {p.relative_to(root).as_posix() for p in root.rglob("*.md")}
        assert all(vec for _slot, vec in settled.records.values()), "a record is left without its vector"
    finally:
        srv.stop()
