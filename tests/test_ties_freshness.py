"""Rankings and freshness verdicts do not depend on an index's history (issue 15, item 9): tied
scores come out in path and line order in every mode, however the records were stored, and an
edit that keeps a file's size and mtime is seen the same way by `query` and by `show`."""

from __future__ import annotations

import json
import os
import shutil

import pytest

SAME = "# Same\n\nThe lighthouse keeper trims the wick at dusk.\n"
FIRST = {"z.md": SAME, "m.md": SAME, "other.md": "# Other\n\nA kettle of tea by the lighthouse.\n"}
LATER = {"a.md": SAME, "k.md": "# Preface\n\nSomething else entirely.\n\n" + SAME}


@pytest.mark.parametrize("mode", ["semantic", "lexical", "hybrid"])
def test_tied_scores_come_in_path_order_however_the_index_was_built(tmp_path, fake_server, write_tree,
                                                                    run_folio, mode):
    srv = fake_server(dim=32)
    grown = write_tree(tmp_path / "grown", FIRST)  # z.md and m.md are stored before a.md and k.md
    assert run_folio("index", "--endpoint", srv.url, cwd=grown).returncode == 0
    write_tree(grown, LATER)
    assert run_folio("index", cwd=grown).returncode == 0
    clean = write_tree(tmp_path / "clean", {**FIRST, **LATER})
    assert run_folio("index", "--endpoint", srv.url, cwd=clean).returncode == 0

    orders = []
    for root in (grown, clean):
        r = run_folio("query", "lighthouse keeper trims the wick", "--mode", mode, "-l", "10", "--json", cwd=root)
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)["results"]
        orders.append([(h["ref"], round(h["score"], 6)) for h in rows])
    assert orders[0] == orders[1]
    same = [ref for ref, _ in orders[0] if ref in ("a.md:1-3", "k.md:5-7", "m.md:1-3", "z.md:1-3")]
    assert same == ["a.md:1-3", "k.md:5-7", "m.md:1-3", "z.md:1-3"], orders[0]
    scores = {score for ref, score in orders[0] if ref in same}
    assert len(scores) == 1  # they really tie


def test_an_edit_keeping_size_and_mtime_is_seen_alike_by_query_and_show(tmp_path, fake_server, write_tree,
                                                                       run_folio):
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {"a.md": "# Alpha\n\nThe lighthouse keeper trims the wick.\n",
                                       "b.md": "# Beta\n\nA kettle of tea.\n"})
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    a = root / "a.md"
    old = tmp_path / "stamp"
    shutil.copy2(a, old)
    past = a.stat().st_mtime_ns - 10 * 10**9  # well outside the racy window
    os.utime(a, ns=(past, past))
    os.utime(old, ns=(past, past))
    assert run_folio("index", cwd=root).returncode == 0  # re-stamped at the old mtime, hash unchanged
    a.write_text("# Alpha\n\nThe lighthouse KEEPER trims the wick.\n")  # same size
    os.utime(a, ns=(past, past))  # `touch -r`: size and mtime as stamped
    r = run_folio("query", "lighthouse keeper", "--json", "--no-refresh", cwd=root)
    assert r.returncode == 0, r.stderr
    q = next(h for h in json.loads(r.stdout)["results"] if h["path"] == "a.md")
    s = run_folio("show", "a.md:1-3", "--json", cwd=root)
    assert s.returncode == 0, s.stderr
    assert q["freshness"] == json.loads(s.stdout)["freshness"]
    assert q["freshness"] == "stale"  # the bytes differ from what was indexed
    # without --no-refresh the query re-indexes it first (so the edit is found), and show agrees
    r = run_folio("query", "lighthouse KEEPER", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "re-embedded" in r.stderr or "re-indexed" in r.stderr, r.stderr
    q = next(h for h in json.loads(r.stdout)["results"] if h["path"] == "a.md")
    assert q["freshness"] == "current"
    assert json.loads(run_folio("show", "a.md:1-3", "--json", cwd=root).stdout)["freshness"] == "current"
