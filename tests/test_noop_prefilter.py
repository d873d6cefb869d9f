"""A no-op `folio index` compares the tree's listing with the index's clean stamps kept whole in one
row (the cleanset, see folio/store/cleanset.py) and, through the walking child's count and digest, without
the listing itself. Whatever changes between runs, by folio or by anything else that writes the
index, the next run reads exactly the files that changed."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

DOCS = {
    "a.md": "# Alpha\n\nApples grow in the orchard.\n",
    "b.md": "# Beta\n\nBananas ripen in the sun.\n",
    "sub/c.md": "# Gamma\n\nGrapes hang on the vine.\n",
}


def backdate(*paths: Path, seconds: float = 60) -> None:
    """An mtime out of the racy window (a stamp taken within 2 s of it is re-checked by content)."""
    t = time.time() - seconds
    for p in paths:
        os.utime(p, (t, t))


def index(run_folio, root: Path) -> dict:
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def corpus(tmp_path, write_tree, srv) -> Path:
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n"})
    backdate(*root.rglob("*.md"))
    return root


def test_each_edit_rename_delete_and_new_file_is_read_once_and_then_never_again(tmp_path, write_tree, fake_server,
                                                                                run_folio):
    root = corpus(tmp_path, write_tree, fake_server(dim=16))
    assert index(run_folio, root)["read"] == 3
    assert index(run_folio, root)["read"] == 0

    steps = [
        ("edit", lambda: (root / "a.md").write_text(DOCS["a.md"] + "\nPears too.\n"), "changed", "a.md"),
        ("rename", lambda: (root / "b.md").rename(root / "sub" / "b2.md"), "renamed", None),
        ("delete", lambda: (root / "sub" / "c.md").unlink(), "deleted", None),
        ("new", lambda: (root / "d.md").write_text("# Delta\n\nDates come from palms.\n"), "new", "d.md"),
    ]
    for what, change, counted, written in steps:
        change()
        if written:
            backdate(root / written, seconds=30)  # out of the racy window, and an mtime of its own
        rep = index(run_folio, root)
        assert rep[counted] == 1, (what, rep)
        assert rep["read"] == (0 if what == "delete" else 1), (what, rep)
        # the run kept what it changed: the next one reads nothing, and still lists every file
        again = index(run_folio, root)
        assert again["read"] == 0 and again["deleted"] == 0 and again["new"] == 0, (what, again)
        assert again["files"] == len(list(root.rglob("*.md"))), (what, again)

    r = run_folio("query", "dates palms", "--json", cwd=root)
    assert json.loads(r.stdout)["results"][0]["path"] == "d.md"


def test_a_stamp_written_by_another_writer_is_read_again_and_a_garbled_row_is_ignored(tmp_path, write_tree,
                                                                                      fake_server, run_folio):
    root = corpus(tmp_path, write_tree, fake_server(dim=16))
    index(run_folio, root)
    assert index(run_folio, root)["read"] == 0
    db = root / ".folio" / "index.db"
    # Another writer (an older folio, a hand edit) records a stamp that no longer matches the file:
    # the files table's triggers drop the kept row, so the next run compares with the table.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE files SET mtime_ns = mtime_ns - 1000 WHERE path = 'a.md'")
    rep = index(run_folio, root)
    assert rep["read"] == 1 and rep["restamped"] == 1, rep
    assert index(run_folio, root)["read"] == 0

    # A row whose columns do not agree (or do not decode) is not believed: the table is read instead.
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM cleanset").fetchone()[0] == 1
        conn.execute("UPDATE cleanset SET paths = X'FFFE00'")
    rep = index(run_folio, root)
    assert rep["read"] == 0 and rep["files"] == 3, rep
    (root / "b.md").write_text(DOCS["b.md"] + "\nPlantains are cooked.\n")
    backdate(root / "b.md")
    rep = index(run_folio, root)
    assert rep["read"] == 1 and rep["changed"] == 1, rep


def test_an_edit_stamped_within_the_racy_window_is_read_until_a_stamp_is_clean(tmp_path, write_tree, fake_server,
                                                                                 run_folio):
    """An editor's save is stamped within the racy window (here an mtime ahead of the clock, so the
    window holds however slow the run): a second save of the same size and mtime is still found, and
    once a run stamps the file well after its mtime, it is never read again."""
    root = corpus(tmp_path, write_tree, fake_server(dim=16))
    index(run_folio, root)
    ahead = time.time() + 60
    a = root / "a.md"
    a.write_text("# Alpha\n\nApples grow in the meadow.\n")
    os.utime(a, (ahead, ahead))
    rep = index(run_folio, root)
    assert rep["changed"] == 1 and rep["read"] == 1, rep
    a.write_text("# Alpha\n\nApples grow in the forest.\n")  # same size, same mtime: only the bytes tell
    os.utime(a, (ahead, ahead))
    rep = index(run_folio, root)
    assert rep["changed"] == 1 and rep["read"] == 1, rep
    backdate(a)
    rep = index(run_folio, root)
    assert rep["read"] == 1 and rep["restamped"] == 1 and rep["changed"] == 0, rep
    for _ in range(2):
        rep = index(run_folio, root)
        assert rep["read"] == 0 and rep["files"] == 3, rep
    r = run_folio("query", "apples forest", "--mode", "lexical", "--json", cwd=root)
    assert json.loads(r.stdout)["results"][0]["path"] == "a.md"
