"""One Markdown file of many sections, through the CLI: it is embedded and committed part by part
like many small files (memory bounded by the batch, progress moving, a kill keeping the parts
committed), while a query never sees the file with only some of its sections, and a batch that
replaces older vectors still keeps them answering until its last part is in."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from helpers import folio_command
from helpers_index import assert_same_index, check_integrity, read_index

SECTIONS = 1500


def _big(n: int = SECTIONS, tail: str = "") -> str:
    return "".join(f"# Part {i}\n\nbody of part {i} about lantern{i} and ferry{i % 7}\n\n" for i in range(n)) + tail


def _json(run_folio, *args, cwd: Path) -> dict:
    r = run_folio(*args, "--json", cwd=cwd)
    assert r.returncode == 0 and r.stdout.startswith("{"), (args, r.returncode, r.stderr)
    return json.loads(r.stdout)


def _running(root: Path, run_folio) -> dict | None:
    """The run's note as `folio status` shows it (None before the run made its index)."""
    r = run_folio("status", "--json", cwd=root)
    if r.returncode == 1 and "no index at" in r.stderr:
        return None
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout).get("running")


def _held(root: Path) -> tuple[int, int, int]:
    """(files, records, records with a vector) as committed now."""
    db = root / ".folio" / "index.db"
    if not db.is_file():
        return 0, 0, 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            f = c.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            n, v = c.execute("SELECT COUNT(*), COALESCE(SUM(vec), 0) FROM records").fetchone()
            return f, n, v
    except sqlite3.OperationalError:
        return 0, 0, 0


def test_a_big_file_commits_part_by_part_whole_and_a_kill_keeps_the_parts(tmp_path, write_tree, fake_server,
                                                                         run_folio):
    """One file of 1,500 sections was one batch: nothing committed and the progress at 0 until the
    server had answered every section, and a kill lost it all. Its parts are committed as they come
    (the run's note, which the progress line shows, counts them), every commit holds all of its
    sections (those still without a vector wait, as after Ctrl-C), and a kill keeps the parts."""
    srv = fake_server()
    clean = write_tree(tmp_path / "clean", {"big.md": _big(), "folio.yaml": f"endpoint: {srv.url}\n"})
    assert run_folio("index", cwd=clean).returncode == 0
    srv.control(delay_ms=100, reset_stats=True)  # the run's three parts: about 5 s
    root = write_tree(tmp_path / "c", {"big.md": _big(), "folio.yaml": f"endpoint: {srv.url}\n"})
    proc = subprocess.Popen([*folio_command(), "index"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline, seen = time.monotonic() + 120, None
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            run = _running(root, run_folio)
            if run and 0 < run.get("embedded", 0) < SECTIONS:
                seen = run
                break
            time.sleep(0.05)
        assert seen is not None and proc.poll() is None, "the run's progress never moved before its end"
        files, records, vectors = _held(root)
        assert (files, records) == (1, SECTIONS) and 0 < vectors < SECTIONS, (files, records, vectors)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    st = check_integrity(root, settled=False)
    kept = sum(1 for _slot, vec in st.records.values() if vec)
    assert st.keys == read_index(clean).keys and 0 < kept < SECTIONS  # every section, with its own lines
    s = _json(run_folio, "status", cwd=root)
    assert (s["files"], s["sections"], s["sections"] - s["waiting"]) == (1, SECTIONS, kept), s
    q = run_folio("query", "lantern7", "--json", "--no-refresh", cwd=root)
    assert q.returncode == 0, q.stderr
    data = json.loads(q.stdout)
    assert any("have no vectors yet" in n for n in data["notices"]), data["notices"]
    starts, ends = {k[1] for k in st.keys}, {k[2] for k in st.keys}  # a row may join touching records
    assert data["results"] and all(r["start"] in starts and r["end"] in ends for r in data["results"])
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["reused"] == kept and rep["embedded"] == SECTIONS - kept, rep
    assert_same_index(root, clean)


def test_a_record_refused_in_a_later_part_is_divided_in_place(tmp_path, write_tree, fake_server, run_folio):
    """A record the server refuses after its file's first part was committed (so the record is in
    the index, waiting) is replaced by its pieces: no dead row, no leftover, exact lines."""
    srv = fake_server(dim=32, max_tokens=300, no_tokenize=True)
    dense = "# Dense\n\n" + "\n".join("x" * 60 for _ in range(30)) + "\n"
    root = write_tree(tmp_path / "c", {"big.md": _big(1200, dense)})
    r = run_folio("index", "--endpoint", srv.url, "--max-chars", "1900", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert any(ln.startswith(f"big.md:{4 * 1200 + 1}-") and "folio divided it into" in ln
               for ln in r.stderr.splitlines()), r.stderr
    s = _json(run_folio, "status", cwd=root)
    assert s["embedded"] == s["sections"] > 1200 + 1 and s["dead_rows"] == 0 and s["waiting"] == 0, s
    st = check_integrity(root)
    spans = sorted((k[1], k[2]) for k in st.keys)  # the refused record gone, its pieces in its lines
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    assert [sp for sp in spans if sp[0] > 4 * 1200][-1][1] == 4 * 1200 + 32


def test_a_big_re_embedding_cut_short_keeps_the_older_vectors_answering(tmp_path, write_tree, fake_server,
                                                                         run_folio):
    """A big file read again only to be embedded anew (an older record text) replaces vectors that
    still answer: it is committed whole once its last part is in, its parts' vectors written
    ahead, so a server failing half-way leaves every older vector answering."""
    from helpers_index import backdate

    srv = fake_server()
    root = write_tree(tmp_path / "c", {"big.md": _big()})
    backdate(root)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        c.execute("DELETE FROM meta WHERE key = 'text'")
        c.execute("UPDATE records SET text_hash = 'source:' || text_hash")  # keys of another version
    srv.control(reset_stats=True, fail_after=20)  # the probe, its first part, then it fails in the second
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert srv.stats()["ok"] == 20 and srv.stats()["inputs"] > 256 + 32, srv.stats()  # past the first part
    s = _json(run_folio, "status", cwd=root)
    assert s["embedded"] == s["sections"] == SECTIONS and s["text"] == "source", s  # nothing lost; still due
    check_integrity(root, settled=False)
    srv.control(fail_after=None)
    q = _json(run_folio, "query", "part 42 about lantern42 and ferry0", "--mode", "semantic", cwd=root)
    assert q["results"][0]["start"] == 4 * 42 + 1
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == SECTIONS, r.stderr
    clean = write_tree(tmp_path / "clean", {"big.md": _big()})
    assert run_folio("index", "--endpoint", srv.url, cwd=clean).returncode == 0
    assert_same_index(root, clean)


def _edited(n: int = SECTIONS) -> str:
    """_big revised: every section's text changed and one line longer, so every range moves too."""
    return "".join(f"# Part {i}\n\nbody of part {i} about lantern{i} and ferry{i % 7}\nrevised {i}\n\n" for i in range(n))


def _sha(root: Path) -> str | None:
    db = root / ".folio" / "index.db"
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            row = c.execute("SELECT sha256 FROM files").fetchone()
            return row[0] if row else None
    except sqlite3.OperationalError:
        return None


def _rows_in(run_folio, root: Path, question: str, ranges: set) -> dict:
    """A query's answer without a refresh, every row current and on the lines of a section (or of
    touching sections) as the edited file holds them."""
    data = _json(run_folio, "query", question, "--no-refresh", cwd=root)
    starts, ends = {a for a, _b in ranges}, {b for _a, b in ranges}
    rows = data["results"]
    assert rows and all(r["freshness"] == "current" and r["start"] in starts and r["end"] in ends
                        for r in rows), rows
    return data


def test_an_edited_big_file_killed_mid_run_keeps_its_parts_and_resumes(tmp_path, write_tree, fake_server,
                                                                         run_folio):
    """A big file edited after its first index is re-embedded part by part, as on its first index:
    each part committed with the file's new lines, so a query meanwhile answers with the edited
    file's line ranges; a kill -9 three quarters through keeps the parts committed, and the next
    run embeds only the sections left (counted at the server), ending equal to a clean build."""
    import hashlib

    from helpers_index import backdate

    srv = fake_server(record=True)
    clean = write_tree(tmp_path / "clean", {"big.md": _edited(), "folio.yaml": f"endpoint: {srv.url}\n"})
    assert run_folio("index", cwd=clean).returncode == 0
    ranges = {(k[1], k[2]) for k in read_index(clean).keys}
    root = write_tree(tmp_path / "c", {"big.md": _big(), "folio.yaml": f"endpoint: {srv.url}\n"})
    backdate(root)
    assert run_folio("index", cwd=root).returncode == 0
    (root / "big.md").write_text(_edited())
    new_sha = hashlib.sha256((root / "big.md").read_bytes()).hexdigest()

    srv.control(delay_ms=100, reset_stats=True)  # parts of 256, then 512 texts: about 5 s in all
    proc = subprocess.Popen([*folio_command(), "index"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline and _sha(root) != new_sha:
            time.sleep(0.05)  # the first part's commit: the file's new stamp, all of its records
        assert proc.poll() is None, "the run ended before its first part was seen committed"
        _rows_in(run_folio, root, "lantern1400 ferry0", ranges)  # mid-run: the edited file's lines
        while proc.poll() is None and time.monotonic() < deadline and srv.stats()["inputs"] < SECTIONS * 3 // 4:
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before three quarters of its requests"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    st = check_integrity(root, settled=False)
    kept = sum(1 for _slot, vec in st.records.values() if vec)
    assert st.keys == read_index(clean).keys and 256 <= kept < SECTIONS, kept  # some parts kept, every section
    s = _json(run_folio, "status", cwd=root)
    assert (s["files"], s["sections"], s["waiting"]) == (1, SECTIONS, SECTIONS - kept), s
    data = _rows_in(run_folio, root, "lantern1400 ferry0", ranges)
    assert any("have no vectors yet" in n for n in data["notices"]), data["notices"]

    srv.control(delay_ms=0, reset_stats=True)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert (rep["embedded"], rep["reused"]) == (SECTIONS - kept, kept), rep
    sent = [t for t in srv.inputs() if "revised" in t]  # the sections' texts, not the space's probe
    assert len(sent) == len(set(sent)) == SECTIONS - kept, (len(sent), SECTIONS - kept)
    assert_same_index(root, clean)
    data = _json(run_folio, "query", "part 42 about lantern42 and ferry0", "--mode", "semantic", cwd=root)
    assert (data["results"][0]["start"], data["results"][0]["freshness"]) == (5 * 42 + 1, "current"), data
