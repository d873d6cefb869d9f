"""A `folio index` that reads a few files has them parsed by the process that listed the tree while
it loads what plans them (folio/readahead.py, WalkAhead.parse_ahead): what it indexes, and what it
warns about, must be exactly what a clean build of the same files gives, whatever the files hold."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from helpers_index import assert_same_index

LONG = "\n\n".join(f"Paragraph {i} about lighthouses, keepers and the lamps they tend at night." for i in range(30))
DOCS = {
    "a.md": "---\ntitle: Alpha\nstatus: live\ntags: [x, y]\n---\n# Alpha\n\nApples grow in the orchard.\n",
    "b.md": "# Beta\n\nBananas ripen in the sun.\n\n## Long\n\n" + LONG + "\n",
    "sub/c.md": "# Gamma\n\nGrapes hang on the vine.\n",
    "sub/d.md": "# Delta\n\nDates dry in the desert.\n",
    "e.md": "# Epsilon\n\nElderberries.\n",
}
QUERIES = ("lighthouse keepers", "grapes on the vine", "bananas")


def backdate(root: Path, seconds: float = 60) -> None:
    t = time.time() - seconds
    for p in root.rglob("*.md"):
        os.utime(p, (t, t))


def index(run_folio, root: Path, env: dict | None = None) -> dict:
    r = run_folio("index", "--json", cwd=root, env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def test_a_few_files_read_again_index_as_a_clean_build_does(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    config = f"endpoint: {srv.url}\nmax_chars: 600\n"
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": config})
    backdate(root)
    index(run_folio, root)
    # edits of every kind a small run meets: frontmatter changed and broken, a section past the
    # budget grown, bytes that are not text, Latin-1, CRLF, a new file, a rename, a deletion
    (root / "a.md").write_text("---\ntitle: Alpha 2\nstatus: [unclosed\n---\n# Alpha\n\nApples, again.\n")
    (root / "b.md").write_text(DOCS["b.md"] + "\n## More\n\n" + LONG.replace("lighthouses", "harbours") + "\n")
    (root / "sub" / "c.md").write_bytes(b"\x00\x01\x02 not text \x00" * 50)
    (root / "sub" / "d.md").write_bytes("# Delta\r\n\r\nDates dry in the d\xe9sert.\r\n".encode("latin-1"))
    (root / "f.md").write_text("---\nid: f\n---\n# Zeta\n\nFigs.\n")
    os.rename(root / "e.md", root / "sub" / "e2.md")
    backdate(root)
    rep = index(run_folio, root)
    assert (rep["read"], rep["new"], rep["changed"], rep["renamed"]) == (6, 1, 4, 1), rep
    assert rep["embedded"] > 0 and rep["unreadable"] == 1, rep

    clean = tmp_path / "clean"
    shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".folio"))
    base = index(run_folio, clean, env={**os.environ, "FOLIO_WALK_AHEAD": "0"})
    assert_same_index(root, clean, queries=QUERIES)
    assert sorted(rep["warnings"]) == sorted(base["warnings"]), (rep["warnings"], base["warnings"])
    for q in QUERIES:
        a = run_folio("query", q, "--json", cwd=root)
        b = run_folio("query", q, "--json", cwd=clean)
        assert a.returncode == b.returncode == 0, a.stderr + b.stderr
        hits = [[(h["path"], h["start"], h["end"], h["frontmatter"]) for h in json.loads(r.stdout)["results"]]
                for r in (a, b)]
        assert hits[0] == hits[1], q


def test_a_small_run_keeps_the_slot_map_whole_across_its_chunks(tmp_path, write_tree, run_folio):
    """The slot map is kept in chunks of 8,192 slots and a small run reads and writes only those its
    slots fall in: edits at both ends of a map of 8,118 records, a deletion, and a new file whose
    slots run into a second chunk leave a map that agrees with the records (helpers_index.read_index
    checks it)."""
    from helpers_index import check_integrity

    body = "".join(f"## Part {j}\n\nLine {j} of the notes.\n\n" for j in range(81))
    docs = {f"n{i:03d}.md": f"# Note {i}\n\n{body}" for i in range(99)}
    root = write_tree(tmp_path / "c", {**docs, "folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n"})
    backdate(root)
    first = index(run_folio, root)
    assert first["lexical_only"] and first["sections"] == 99 * 82, first
    assert check_integrity(root).meta.get("slotmap") == "1"
    (root / "n000.md").write_text(docs["n000.md"].replace("Line 3 of", "Line three of"))
    (root / "n098.md").write_text(docs["n098.md"] + "## Tail\n\nOne more.\n")
    (root / "new.md").write_text("# New\n\n" + body)
    os.remove(root / "n050.md")
    backdate(root)
    rep = index(run_folio, root)
    assert (rep["changed"], rep["new"], rep["deleted"]) == (2, 1, 1), rep
    st = check_integrity(root)
    assert max(slot for slot, _vec in st.records.values()) >= 8192  # the new slots ran into a second chunk
    clean = tmp_path / "clean"
    shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".folio"))
    index(run_folio, clean)
    assert_same_index(root, clean, queries=("line three of the notes", "one more"))
