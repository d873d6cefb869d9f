"""The slot map (folio/store/slotmap.py's header): a query reads every slot's owner from a few
blobs instead of every record row, so the map must say exactly what the records say after any
sequence of index runs. Driven through the CLI; checked by reading .folio/index.db with sqlite3, as the
format documents, and by queries that must never name a deleted section."""

from __future__ import annotations

import json
import os
import sqlite3

import numpy as np
from helpers_index import backdate

DOCS = {
    "a.md": "# Alpha\n\nApples and apricots.\n\n## Orchard\n\nRows of apple trees.\n",
    "b.md": "# Beta\n\nBananas in bunches.\n\n## Ripening\n\nYellow then brown.\n",
    "c/d.md": "Preamble about cherries.\n\n# Cherry\n\nRed and small.\n",
}


def check_map(root):
    """The slot map decodes to exactly (slot -> file_id * 2 + vec) of the records; returns it."""
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        assert dict(c.execute("SELECT key, value FROM meta"))["slotmap"] == "1"
        blobs = c.execute("SELECT chunk, data FROM slotmap ORDER BY chunk").fetchall()
        records = c.execute("SELECT slot, file_id, vec FROM records").fetchall()
    assert [k for k, _ in blobs] == list(range(len(blobs)))
    owners = np.frombuffer(b"".join(d for _, d in blobs), dtype="<i8")
    want = np.full(len(owners), -1, dtype=np.int64)
    for slot, file_id, vec in records:
        assert slot < len(owners), "a record beyond the slot map"
        want[slot] = file_id * 2 + vec
    np.testing.assert_array_equal(owners, want)
    return owners


def refs(run_folio, root, text):
    r = run_folio("query", text, "--json", "-l", "20", "--no-refresh", cwd=root)
    assert r.returncode == 0, r.stderr
    return {(h["path"], h["start"], h["end"]) for h in json.loads(r.stdout)["results"]}


def test_slot_map_follows_every_kind_of_change(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", DOCS)
    backdate(root)

    def index(*extra):
        r = run_folio("index", "--endpoint", srv.url, *extra, cwd=root)
        assert r.returncode == 0, r.stderr
        backdate(root)
        return check_map(root)

    owners = index()
    assert int((owners >= 0).sum()) == 6 and int((owners & 1)[owners >= 0].sum()) == 6
    # an edit: new sections get new slots, the replaced one frees its slot
    (root / "a.md").write_text("# Alpha\n\nApples and apricots.\n\n## Orchard\n\nPears now, not apples.\n")
    index()
    assert ("a.md", 5, 7) in refs(run_folio, root, "pears")
    # a deletion and a rename
    (root / "b.md").unlink()
    os.rename(root / "c" / "d.md", root / "c" / "e.md")
    index()
    found = refs(run_folio, root, "bananas cherries apples")
    assert not any(p in ("b.md", "c/d.md") for p, _, _ in found)
    assert any(p == "c/e.md" for p, _, _ in found)
    # many new files, then most of them gone: dead rows outnumber live ones, the index compacts
    write_tree(root, {f"many/{i}.md": f"# Note {i}\n\nWord{i} text.\n\n## More {i}\n\nExtra{i}.\n"
                      for i in range(60)})
    grown = index()
    for i in range(60):
        (root / "many" / f"{i}.md").unlink()
    compacted = index()
    assert len(compacted) < len(grown)
    assert int((compacted >= 0).sum()) == len(compacted), "compaction renumbers the live records to 0..n-1"
    assert not any(p.startswith("many/") for p, _, _ in refs(run_folio, root, "note word7 extra7 more"))
    # another vector space at the same endpoint: every vector is invalid, then embedded again
    srv.control(space="b")
    index()


def test_an_index_without_a_slot_map_gains_one_and_queries_meanwhile(tmp_path, write_tree, fake_server,
                                                                      run_folio):
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", DOCS)
    backdate(root)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    with sqlite3.connect(root / ".folio" / "index.db") as c:  # as an index written before the map existed
        c.execute("DELETE FROM slotmap")
        c.execute("DELETE FROM meta WHERE key = 'slotmap'")
    before = refs(run_folio, root, "apples bananas cherries")
    assert {p for p, _, _ in before} == {"a.md", "b.md", "c/d.md"}
    (root / "b.md").write_text("# Beta\n\nPlantains too.\n")
    assert run_folio("index", cwd=root).returncode == 0
    check_map(root)
    assert {p for p, _, _ in refs(run_folio, root, "plantains apples")} >= {"a.md", "b.md"}
