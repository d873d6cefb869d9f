"""An index run asks the server to count a long record's tokens once per text, and with `--jobs N`
asks for the counts of the files it will plan next, N requests at once, while it plans the ones
before (counting.py). Neither may change a record: the index is the same as one built counting
each record in turn, and a server that fails while counts are asked ahead fails the run with the
same sentence as one that fails while they are asked one by one."""

from __future__ import annotations

import json

from helpers_index import assert_same_index
from test_token_budget import DENSE, prose

# The same long section in every file (a licence, a template's boilerplate), and one of its own.
BOILER = "## Licence\n\n" + " ".join(f"Clause {j}: the text may be copied, changed and shared." for j in range(40)) + "\n"
NOTES = {f"notes/n{i:02d}.md": f"# Note {i}\n\nA short note, number {i}.\n\n" + BOILER for i in range(30)}
FILES = NOTES | {f"docs/part{i}.md": prose(i) for i in range(5)} | {"dense.md": DENSE}


def build(run_folio, root, url, jobs: int, workers: int):
    r = run_folio("index", "--endpoint", url, "--json", "--jobs", str(jobs), cwd=root,
                  env={"FOLIO_PARSE_WORKERS": workers}, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def test_counts_asked_ahead_give_the_records_counted_one_by_one(tmp_path, write_tree, fake_server, run_folio):
    one_by_one, ahead = fake_server(dim=32, max_tokens=300), fake_server(dim=32, max_tokens=300)
    a = write_tree(tmp_path / "a", FILES)
    b = write_tree(tmp_path / "b", FILES)
    ra = build(run_folio, a, one_by_one.url, jobs=1, workers=0)
    rb = build(run_folio, b, ahead.url, jobs=2, workers=2)
    assert ra["sections"] == rb["sections"] > len(FILES) * 2  # the long sections were divided
    assert (ra["tokens"], rb["tokens"]) == (300, 300)
    assert_same_index(a, b, queries=("ledger entry", "licence clause", "漢字"))
    # the licence, the same text in 30 files, was counted once by each run, not once per file: as
    # many counts as for a tree with only one of those files
    single = fake_server(dim=32, max_tokens=300)
    c = write_tree(tmp_path / "c", {k: v for k, v in FILES.items() if k not in NOTES or k.endswith("00.md")})
    build(run_folio, c, single.url, jobs=2, workers=2)
    counts = [srv.stats()["tokenize_requests"] for srv in (one_by_one, ahead, single)]
    assert counts[0] == counts[1] == counts[2] > 0


def test_a_server_failing_while_counts_are_asked_ahead_fails_the_run_as_one_by_one(tmp_path, write_tree,
                                                                                  fake_server, run_folio):
    said = []
    for jobs, workers in ((1, 0), (2, 2)):
        srv = fake_server(dim=32, max_tokens=300)
        root = write_tree(tmp_path / f"j{jobs}", {"docs/first.md": prose(0)})
        build(run_folio, root, srv.url, jobs, workers)  # the limit is learned and recorded
        write_tree(root, FILES)
        srv.control(fail="500")  # every request from now on: counts and embeddings alike
        r = run_folio("index", "--endpoint", srv.url, "--jobs", str(jobs), cwd=root,
                      env={"FOLIO_PARSE_WORKERS": workers}, timeout=600)
        assert "Traceback" not in r.stderr
        said.append((r.returncode, [ln for ln in r.stderr.splitlines() if not ln.startswith("indexing:")]))
        s = json.loads(run_folio("status", "--json", cwd=root).stdout)
        assert s["files"] >= 1  # what the first run committed is still there
    assert said[0] == said[1]
