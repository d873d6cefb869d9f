"""Never a wrong line range: the query's stat check, refresh under the lock, `--no-refresh`,
renames, copies, section-level reuse and the index report — all through the real CLI against
the deterministic fake embeddings server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers_index import check_integrity, read_index

from folio.embed import PROBE_TEXT

QUESTION = "when is revenue recognised"
NOTICE_1 = "(1 of the files behind this result had changed; 1 file(s) re-embedded before answering)"

REVENUE = """\
# Revenue

The finance handbook: how money comes in.

## Recognition

General rules for booking income.

### Timing

Revenue is recognised when the performance obligation is satisfied and control transfers.

### Amounts

The transaction price is allocated to each obligation.

## Expenses

Travel and meals are booked when incurred.
"""

OTHERS = {
    "people/hiring.md": "# Hiring\n\nHow we interview candidates.\n\n## Offers\n\nOffers are approved by the lead.\n",
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n\n## Paging\n\nPages go to the primary first.\n",
}


def backdate(root: Path, seconds: float = 60) -> None:
    """Move every file's mtime into the past, out of the racy window (so a run re-reads nothing)."""
    t = time.time() - seconds
    for p in root.rglob("*.md"):
        os.utime(p, (t, t))


def make_corpus(root: Path, srv, write_tree, files: dict | None = None) -> Path:
    write_tree(root, {"finance/revenue.md": REVENUE, **OTHERS, **(files or {})})
    write_tree(root, {"folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n"})
    backdate(root)
    return root


def index(run_folio, root: Path, *extra) -> dict:
    r = run_folio("index", "--json", *extra, cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def query(run_folio, root: Path, text: str = QUESTION, *extra) -> tuple[dict, str]:
    # semantic: the rows these tests follow are single sections ranked by meaning (hybrid merges more)
    r = run_folio("query", "--mode", "semantic", text, "--json", *extra, cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def row(answer: dict, path: str, heading: str) -> dict:
    for res in answer["results"]:
        if res["path"] == path and res["trail"][-1] == heading:
            return res
    raise AssertionError(f"{path} > {heading} not among {[(r['path'], r['trail']) for r in answer['results']]}")


def insert_lines(path: Path, after_line: int, lines: list[str]) -> None:
    text = path.read_text(encoding="utf-8").split("\n")
    text[after_line:after_line] = lines
    path.write_text("\n".join(text), encoding="utf-8")


# --------------------------------------------------------------------------- the seed README's story


def test_two_lines_above_a_section_refresh_moves_the_range_by_two(tmp_path, fake_server, run_folio, write_tree):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    before, err = query(run_folio, root)
    assert "had changed" not in err
    old = row(before, "finance/revenue.md", "Timing")
    assert old["freshness"] == "current"
    assert before["results"][0]["path"] == "finance/revenue.md"

    insert_lines(root / "finance/revenue.md", 1, ["", "A line someone added."])
    r = run_folio("query", "--mode", "semantic", QUESTION, cwd=root)
    assert r.returncode == 0, r.stderr
    assert NOTICE_1 in r.stderr.splitlines()
    first = r.stdout.splitlines()[0]
    assert first.endswith(f"finance/revenue.md:{old['start'] + 2}-{old['end'] + 2}"), r.stdout
    assert "(stale)" not in r.stdout
    # The lines handed out are the section's lines now.
    lines = (root / "finance/revenue.md").read_text().split("\n")
    assert lines[old["start"] + 2 - 1] == "### Timing"

    # The refresh was written: the next query has nothing to do and says nothing.
    again, err = query(run_folio, root)
    assert "had changed" not in err
    assert row(again, "finance/revenue.md", "Timing")["start"] == old["start"] + 2
    assert all(res["freshness"] == "current" for res in again["results"])
    check_integrity(root)


def test_no_refresh_marks_stale_keeps_the_old_range_and_writes_nothing(tmp_path, fake_server, run_folio,
                                                                       write_tree):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    old = row(query(run_folio, root)[0], "finance/revenue.md", "Timing")
    insert_lines(root / "finance/revenue.md", 1, ["", "A line someone added."])
    db_before = (root / ".folio/index.db").read_bytes()

    r = run_folio("query", "--mode", "semantic", QUESTION, "--no-refresh", cwd=root)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.endswith(f"finance/revenue.md:{old['start']}-{old['end']} (stale)"), r.stdout
    assert "re-embedded" not in r.stderr

    data, _ = query(run_folio, root, QUESTION, "--no-refresh", "-l", "10")
    fresh = {res["path"]: res["freshness"] for res in data["results"]}
    assert fresh["finance/revenue.md"] == "stale"
    assert set(fresh.values()) == {"stale", "current"}, fresh  # the other files' rows are current
    for res in data["results"]:
        assert res["citation"]["freshness"] == res["freshness"]

    (root / "ops/oncall.md").unlink()
    data, _ = query(run_folio, root, "who gets paged on call", "--no-refresh", "-l", "10")
    fresh = {res["path"]: res["freshness"] for res in data["results"]}
    assert fresh["ops/oncall.md"] == "missing"
    assert fresh["finance/revenue.md"] == "stale"
    r = run_folio("query", "--mode", "semantic", "who gets paged on call", "--no-refresh", "-l", "10", cwd=root)
    assert "ops/oncall.md:" in r.stdout and "(missing)" in r.stdout

    # --no-refresh turned off the writing: the index is byte for byte what it was.
    assert (root / ".folio/index.db").read_bytes() == db_before
    # ... and the next refreshing query still finds both changes.
    data, err = query(run_folio, root, "who gets paged on call", "-l", "10")
    assert "(2 of the files behind this result had changed; 1 file(s) re-embedded before answering, 1 gone)" \
        in err.splitlines()
    assert "ops/oncall.md" not in {res["path"] for res in data["results"]}
    assert all(res["freshness"] == "current" for res in data["results"])


def test_a_deleted_files_rows_disappear_after_the_refresh(tmp_path, fake_server, run_folio, write_tree):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    before, _ = query(run_folio, root, "who gets paged on call")
    assert before["results"][0]["path"] == "ops/oncall.md"
    (root / "ops/oncall.md").unlink()

    after, err = query(run_folio, root, "who gets paged on call", "-l", "10")
    assert "ops/oncall.md" not in {res["path"] for res in after["results"]}
    assert any("gone" in line for line in err.splitlines()), err
    assert all(res["freshness"] == "current" for res in after["results"])
    st = check_integrity(root)
    assert "ops/oncall.md" not in st.files
    assert not [k for k in st.records if k[0] == "ops/oncall.md"]
    status = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert status["files"] == 2 and status["changed"] == 0


ZEBRA = {"a.md": "# A\n\n## Zebra facts\n\nzebra stripes savanna zebra stripes\n",
         "b.md": "# B\n\n## Zebra notes\n\nzebra stripes\n",
         "c.md": "# C\n\n## Other\n\nnothing here about that animal\n"}


@pytest.mark.parametrize("then", ["deleted", "edited"])
@pytest.mark.parametrize("out", ["--json", "--paths-only"])
def test_a_row_the_refresh_lifts_is_checked_too(tmp_path, fake_server, run_folio, write_tree, then, out):
    """The refresh of the first ranking's file drops its row; the row that rises in its place comes
    from a file that changed too (deleted, or lines inserted above the section): it is refreshed
    before the answer, never printed (missing) or with its old range."""
    srv = fake_server()
    root = tmp_path / "z"
    write_tree(root, {**ZEBRA, "folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n"})
    backdate(root)
    index(run_folio, root)
    (root / "a.md").write_text("# A\n\n## Other stuff\n\nunrelated content\n", encoding="utf-8")
    if then == "deleted":
        (root / "b.md").unlink()
    else:
        insert_lines(root / "b.md", 1, ["A note added", "", "over four lines.", ""])
    r = run_folio("query", "zebra stripes savanna", "-l", "1", out, cwd=root)
    assert r.returncode == 0, r.stderr
    if out == "--json":
        first = json.loads(r.stdout)["results"][0]
        assert first["freshness"] == "current", first
        path, start = first["path"], first["start"]
    else:
        assert "missing" not in r.stderr and "stale" not in r.stderr, r.stderr
        path, lines = r.stdout.split()[0].rsplit(":", 1)
        start = int(lines.split("-")[0])
    assert (root / path).is_file(), r.stdout
    if then == "edited":  # the words' own section, at its new place
        assert (path, start) == ("b.md", 7), r.stdout
        assert (root / path).read_text(encoding="utf-8").split("\n")[start - 1] == "## Zebra notes"


def test_a_touched_file_with_the_same_bytes_is_current_and_not_re_indexed(tmp_path, fake_server, run_folio,
                                                                          write_tree):
    """`touch`, a checkout, a copy that keeps the bytes: a new mtime, the same size and the same text.
    Its rows' line ranges hold: they are current, with `--no-refresh` too, and a query has nothing to
    re-index (no notice, no section sent to the server, the index not written). An edit that keeps
    the size is still stale: the bytes decide, not the stat."""
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    os.utime(root / "finance/revenue.md")  # `git checkout`: new mtime, same bytes
    db_before = (root / ".folio/index.db").read_bytes()
    srv.control(reset_stats=True)
    data, err = query(run_folio, root)
    assert all(res["freshness"] == "current" for res in data["results"])
    assert srv.stats()["inputs"] == 2  # the probe and the question: nothing re-embedded
    assert data["notices"] == [] and "had" not in err, (data["notices"], err)
    data, _ = query(run_folio, root, QUESTION, "--no-refresh", "-l", "10")
    assert {res["freshness"] for res in data["results"]} == {"current"}, data["results"]
    r = run_folio("query", "--mode", "semantic", QUESTION, "--no-refresh", cwd=root)
    assert r.returncode == 0 and "(stale)" not in r.stdout, r.stdout
    assert (root / ".folio/index.db").read_bytes() == db_before

    text = (root / "finance/revenue.md").read_text(encoding="utf-8")
    (root / "finance/revenue.md").write_text(text.replace("booked when", "Booked when"), encoding="utf-8")
    data, _ = query(run_folio, root, QUESTION, "--no-refresh", "-l", "10")
    assert {res["path"]: res["freshness"] for res in data["results"]}["finance/revenue.md"] == "stale"


class _Mover(threading.Thread):
    """Rewrites one file over and over until stopped, every write new bytes (`version(i)`, two sizes
    alternating): whatever version a refresh read, the file no longer holds it."""

    def __init__(self, path: Path, version):
        super().__init__(daemon=True)
        self.path, self.version, self.halt = path, version, threading.Event()

    def run(self):
        i = 0
        while not self.halt.is_set():
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(self.version(i), encoding="utf-8")
            os.replace(tmp, self.path)
            i += 1
            time.sleep(0.01)


def test_refresh_happens_at_most_once_and_a_row_still_moving_is_marked(tmp_path, fake_server, run_folio,
                                                                        write_tree):
    srv = fake_server(delay_ms=300)  # each embedding request takes longer than the file stays still
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    srv.control(reset_stats=True)
    mover = _Mover(root / "finance/revenue.md",
                   lambda i: REVENUE.replace("# Revenue\n", f"# Revenue\n\nEdit number {i:06d}.\n" + "extra\n" * (1 + i % 2)))
    mover.start()
    try:
        r = run_folio("query", "--mode", "semantic", QUESTION, "--json", cwd=root, timeout=60)
    finally:
        mover.halt.set()
        mover.join()
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    notices = [n for n in data["notices"] if "had changed" in n]
    assert len(notices) == 1, data["notices"]  # refreshed once, not once per move
    assert row(data, "finance/revenue.md", "Timing")["freshness"] == "stale"
    # One question request, then one refresh's requests (probe + the changed section): never a second.
    assert srv.stats()["requests"] <= 2, srv.stats()
    r = run_folio("query", "--mode", "semantic", QUESTION, cwd=root)  # once the file holds still, a query settles it
    assert r.returncode == 0 and "(stale)" not in r.stdout, r.stdout


# --------------------------------------------------------------------------- the lock


LOCK_HOLDER = """
import sys, time
from filelock import FileLock
lk = FileLock(sys.argv[1])
lk.acquire()
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def hold_lock():
    procs = []

    def hold(root: Path) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(root / ".folio/write.lock")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "locked"
        procs.append(p)
        return p

    yield hold
    for p in procs:
        p.stdin.close()
        p.wait(timeout=10)


def test_a_query_declines_the_refresh_while_another_folio_holds_the_lock(tmp_path, fake_server, run_folio,
                                                                          write_tree, hold_lock):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    old = row(query(run_folio, root)[0], "finance/revenue.md", "Timing")
    insert_lines(root / "finance/revenue.md", 1, ["", "A line someone added."])
    holder = hold_lock(root)

    # The holder never lets go while it runs: a query that waited would hit the timeout.
    r = run_folio("query", "--mode", "semantic", QUESTION, cwd=root, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].endswith(f"finance/revenue.md:{old['start']}-{old['end']} (stale)"), r.stdout
    assert "another folio is updating the index" in r.stderr
    assert "re-embedded" not in r.stderr
    data, _ = query(run_folio, root)
    assert row(data, "finance/revenue.md", "Timing")["freshness"] == "stale"

    holder.stdin.close()
    holder.wait(timeout=10)
    r = run_folio("query", "--mode", "semantic", QUESTION, cwd=root)
    assert NOTICE_1 in r.stderr.splitlines()
    assert r.stdout.splitlines()[0].endswith(f"finance/revenue.md:{old['start'] + 2}-{old['end'] + 2}")


def test_index_no_wait_declines_with_a_sentence_while_the_lock_is_held(tmp_path, fake_server, run_folio,
                                                                       write_tree, hold_lock):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    hold_lock(root)
    r = run_folio("index", "--no-wait", cwd=root, timeout=30)
    assert r.returncode == 1
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("folio: another folio is writing the index at "), r.stderr
    assert "Traceback" not in r.stderr
    assert "--no-wait" in lines[0]  # the sentence says how to wait instead


# --------------------------------------------------------------------------- renames, copies, sections


def test_a_renamed_file_keeps_its_vectors(tmp_path, fake_server, run_folio, write_tree):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    before = read_index(root)
    (root / "finance/archive").mkdir()
    os.rename(root / "finance/revenue.md", root / "finance/archive/income.md")
    srv.control(reset_stats=True)

    rep = index(run_folio, root)
    assert (rep["renamed"], rep["new"], rep["deleted"], rep["embedded"], rep["copied"]) == (1, 0, 0, 0, 0), rep
    assert rep["reused"] == 5 and rep["removed"] == 0 and rep["dead_rows"] == 0
    assert srv.stats()["inputs"] == 1  # nothing embedded: only the fingerprint probe (same model?)
    after = check_integrity(root)
    moved = {k[1:]: v for k, v in before.records.items() if k[0] == "finance/revenue.md"}
    now = {k[1:]: v for k, v in after.records.items() if k[0] == "finance/archive/income.md"}
    assert now == moved  # same ranges, same slots, same vectors
    assert after.rows == before.rows
    status = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert status["dead_rows"] == 0
    r = run_folio("query", "--mode", "semantic", QUESTION, cwd=root)
    assert "finance/archive/income.md:9-11" in r.stdout.splitlines()[0]
    srv.control(reset_stats=True)
    os.rename(root / "finance/archive/income.md", root / "income.md")
    r = run_folio("index", cwd=root)
    assert r.returncode == 0 and "1 renamed" in r.stdout and "0 embedded" in r.stdout, r.stdout


def test_a_copy_is_not_a_move(tmp_path, fake_server, run_folio, write_tree):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    before = read_index(root)
    shutil.copy2(root / "finance/revenue.md", root / "finance/revenue-copy.md")
    srv.control(reset_stats=True)

    rep = index(run_folio, root)
    assert (rep["new"], rep["renamed"], rep["deleted"], rep["removed"]) == (1, 0, 0, 0), rep
    assert rep["embedded"] == 0 and rep["copied"] == 5  # known texts: vectors copied, not re-embedded
    after = check_integrity(root)
    orig = {k[1:]: v for k, v in before.records.items() if k[0] == "finance/revenue.md"}
    assert {k[1:]: v for k, v in after.records.items() if k[0] == "finance/revenue.md"} == orig
    copy = {k[1:]: v for k, v in after.records.items() if k[0] == "finance/revenue-copy.md"}
    assert set(copy) == set(orig)
    assert not {s for s, _ in copy.values()} & {s for s, _ in orig.values()}  # rows of its own
    for k in orig:
        assert (after.vector(("finance/revenue.md", *k)) == after.vector(("finance/revenue-copy.md", *k))).all()
    data, _ = query(run_folio, root, QUESTION, "-l", "10")
    assert {"finance/revenue.md", "finance/revenue-copy.md"} <= {res["path"] for res in data["results"]}

    # A rename and a copy of the same file in one run: one keeps the rows, the other copies them.
    os.rename(root / "ops/oncall.md", root / "ops/rota.md")
    shutil.copy2(root / "ops/rota.md", root / "ops/rota-copy.md")
    rep = index(run_folio, root)
    assert (rep["renamed"], rep["new"], rep["deleted"], rep["removed"], rep["embedded"]) == (1, 1, 0, 0, 0), rep
    assert rep["dead_rows"] == 0


def fifty_sections() -> str:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    parts = ["# Handbook\n"]
    for i in range(50):
        w = f"{words[i % 10]} {words[(i * 3) % 10]} {words[(i * 7) % 10]}"
        parts.append(f"## Topic {i}\n\nSection {i} explains {w} in plain words, item {i}.\n")
    return "\n".join(parts)


def test_editing_one_section_of_fifty_re_embeds_that_section_only(tmp_path, fake_server, run_folio, write_tree):
    srv = fake_server(record=True)
    root = make_corpus(tmp_path / "c", srv, write_tree, {"handbook.md": fifty_sections()})
    index(run_folio, root)
    before = read_index(root)
    text = (root / "handbook.md").read_text()
    old_body = "Section 20 explains"
    assert text.count(old_body) == 1
    text = text.replace(old_body, "Section 20 now says, across two lines,\nexplains")
    (root / "handbook.md").write_text(text)
    srv.control(reset_stats=True)

    rep = index(run_folio, root)
    assert (rep["changed"], rep["embedded"], rep["reused"], rep["removed"], rep["copied"]) == (1, 1, 50, 1, 0), rep
    sent = [t for t in srv.inputs() if t != PROBE_TEXT]
    assert len(sent) == 1 and sent[0].startswith("Topic 20\n") and "now says" in sent[0]  # as a reader sees it
    after = check_integrity(root)
    old = {k[3]: (k[1], k[2], v) for k, v in before.records.items() if k[0] == "handbook.md"}
    new = {k[3]: (k[1], k[2], v) for k, v in after.records.items() if k[0] == "handbook.md"}
    for i in range(50):
        trail = json.dumps(["Handbook", f"Topic {i}"])
        (s0, e0, v0), (s1, e1, v1) = old[trail], new[trail]
        if i < 20:
            assert (s1, e1, v1) == (s0, e0, v0)
        elif i == 20:
            assert (s1, e1) == (s0, e0 + 1) and v1[0] != v0[0]
        else:  # moved down one line, same slot: the vector is reused
            assert (s1, e1, v1) == (s0 + 1, e0 + 1, v0)
    assert rep["dead_rows"] == 1


def test_the_index_report_counts_what_happened(tmp_path, fake_server, run_folio, write_tree):
    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    first = index(run_folio, root)
    assert (first["files"], first["new"], first["embedded"], first["sections"]) == (3, 3, 9, 9), first
    noop = index(run_folio, root)
    assert (noop["files"], noop["new"], noop["changed"], noop["embedded"], noop["reused"], noop["removed"],
            noop["restamped"]) == (3, 0, 0, 0, 0, 0, 0), noop
    (root / "people/hiring.md").unlink()
    os.utime(root / "ops/oncall.md")
    rep = index(run_folio, root)
    assert (rep["deleted"], rep["removed"], rep["restamped"], rep["dead_rows"]) == (1, 2, 1, 2), rep
    r = run_folio("index", cwd=root)
    assert r.returncode == 0
    assert r.stdout.startswith("indexed 2 files"), r.stdout
    assert "2 dead rows" in r.stdout


def test_many_refreshes_leave_an_index_equal_to_a_clean_build(tmp_path, fake_server, run_folio, write_tree):
    from helpers_index import assert_same_index

    from folio.indexer import MAX_SEGMENTS

    srv = fake_server()
    root = make_corpus(tmp_path / "c", srv, write_tree)
    index(run_folio, root)
    files = ["finance/revenue.md", "people/hiring.md", "ops/oncall.md"]
    for i in range(3 * MAX_SEGMENTS):
        p = root / files[i % 3]
        p.write_text(p.read_text() + f"\nNote {i}: a paragraph about widgets number {i}.\n")
        data, err = query(run_folio, root, f"widgets number {i}", "-l", "20")
        assert "1 file(s) re-embedded" in err, err
        assert all(res["freshness"] == "current" for res in data["results"])
        assert len(read_index(root).segments) <= MAX_SEGMENTS
    clean = tmp_path / "clean"
    shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".folio"))
    index(run_folio, clean)
    assert_same_index(root, clean, queries=("widgets number 7", "revenue recognised", "who gets paged"))


def test_segment_merges_reach_back_over_big_segments_only_when_comparable_work_piled_up():
    from folio.indexer import _tail_to_merge

    assert _tail_to_merge([433_000, 12, 9, 15, 11]) == 4  # the small ones merge; the big one stays
    assert _tail_to_merge([433_000, 200_000, 150_000]) == 3  # comparable sizes merge together
    assert _tail_to_merge([5, 5]) == 2
