"""What a user sees when the embeddings server changes or misbehaves under an index: a model
swapped behind the same URL, requests an earlier killed run left queued, redirects, a server that
died, a transient 500 — each named for what it is, each with a way out."""

from __future__ import annotations

import json
import os
import time

DOCS = {
    "finance/revenue.md": "# Revenue\n\nOverview of money.\n\n## Recognition\n\nIncome is booked at delivery.\n",
    "ops/runbook.md": "# Runbook\n\n## Restart\n\nBegin with a drain.\n\n## Delete caches\n\nErase the cache.\n",
    "notes/car.md": "# Cars\n\nAn automobile is large.\n",
}
SECTIONS = 6


def backdate(root, seconds=10):
    """Move every mtime out of the racy window, so a no-op run really is one."""
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(root):
        if ".folio" not in dirpath:
            for f in files:
                os.utime(os.path.join(dirpath, f), (past, past))


def make_index(tmp_path, write_tree, run_folio, srv):
    root = write_tree(tmp_path / "corpus", DOCS)
    backdate(root)
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == SECTIONS
    return root


# -- a model swapped behind the same URL (issue 15.3) ----------------------------------------------


def test_a_no_op_index_re_embeds_when_the_server_restarted_on_another_model(tmp_path, write_tree, fake_server,
                                                                            run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.restart(space="b")  # same port, same model name, another model
    q = run_folio("query", "erase the cache", cwd=root)
    assert q.returncode == 1 and "another vector space" in q.stderr and "folio index" in q.stderr
    # no file changed: the run still asks the server for the fingerprint, sees the new space, re-embeds
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "another vector space" in r.stderr and "re-embedding every section" in r.stderr
    rep = json.loads(r.stdout)
    assert rep["embedded"] == SECTIONS and rep["new"] == rep["changed"] == rep["deleted"] == 0
    q = run_folio("query", "erase the cache", "--json", cwd=root)
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout)["results"][0]["path"] == "ops/runbook.md"
    # and the run after that is a no-op again: one probe, nothing embedded, no notice
    srv.control(reset_stats=True)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 0
    assert "vector space" not in r.stderr
    assert srv.stats()["inputs"] == 1


def test_a_no_op_index_without_a_server_still_works(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.stop()
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 0
    assert r.stderr.strip() == "", r.stderr  # nothing to check against, nothing to say


def test_a_no_op_index_says_when_the_server_answers_the_probe_with_an_error(tmp_path, write_tree, fake_server,
                                                                           run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.control(fail="500")
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "could not check" in r.stderr and "HTTP 500" in r.stderr
    assert json.loads(r.stdout)["embedded"] == 0
