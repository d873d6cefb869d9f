"""Identifiers rank first for themselves, and a half-built index ranks fairly (issue 28), through the
real CLI against the fake embeddings server, in the default mode (hybrid).

Each identifier shape gets a corpus where its parts are common words elsewhere (sections that say
them again and again, in their headings too) and the whole identifier occurs in one section only:
that section must be row 1. The analysis version an index records is checked too: an index built
under older rules is analysed again by the next `folio index`, without embedding anything again.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers import many_files

from folio.lexical.analysis import ANALYSIS_VERSION

# shape -> (the identifier as written in the corpus and asked, its parts as plain words)
SHAPES = {
    "screaming": ("HASH_OPCODE_GAS", "hash opcode gas"),
    "snake": ("parent_beacon_root", "parent beacon root"),
    "camel": ("maxSurgeValue", "max surge value"),
    "kebab": ("--dry-run-mode", "dry run mode"),
    "docname": ("EIP-4844", "EIP 4844"),
    "dotted": ("memory.swap.max", "memory swap max"),
    "generic": ("Rc<T>", "Rc T"),
    "version": ("v1.2.3", "v1 2 3"),
}


def _corpus(shape: str) -> dict[str, str]:
    ident, words = SHAPES[shape]
    noise = (f"{words} " * 6).strip()
    return {
        # the one section that holds the identifier whole: a short table row among other words (its
        # sibling shares no word with the parts: one that did would score alike and merge into its row)
        "spec/params.md": (f"# Parameters\n\n## Constants\n\n| name | value |\n|---|---|\n| `{ident}` | 3 |\n"
                           f"| `OTHER_LIMIT` | 9 |\n\n## Rationale\n\nThey were chosen by measuring.\n"),
        # sections made of its parts, as plain words, in their headings and bodies
        "notes/a.md": f"# {words}\n\n{noise}\n\n## More {words}\n\n{noise}, and {words} again.\n",
        "notes/b.md": f"# About {words}\n\nWhy {noise} matters.\n",
        "notes/c.md": f"# {words} guide\n\n{noise}. See also {words}.\n",
        "notes/d.md": "# Unrelated\n\nGardening in spring: tomatoes, beans and peas.\n",
    }


def _query(run_folio, root: Path, text: str, *extra) -> dict:
    r = run_folio("query", "--json", "-l", "5", *extra, "--", text, cwd=root)  # `--dry-run-mode` is a question
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_an_identifier_ranks_the_section_that_holds_it_first(shape, tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = tmp_path / shape
    write_tree(root, _corpus(shape))
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\n")
    assert run_folio("index", cwd=root).returncode == 0
    ident, words = SHAPES[shape]
    data = _query(run_folio, root, ident)
    assert data["mode"] == "hybrid", data["notices"]
    top = data["results"][0]
    assert (top["path"], top["trail"][-1]) == ("spec/params.md", "Constants"), data["results"]
    # the parts alone, in plain words, find the sections made of them: the whole is what decides
    plain = _query(run_folio, root, words)
    assert plain["results"][0]["path"].startswith("notes/"), plain["results"]


def test_an_identifier_in_a_question_ranks_its_section_first(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = tmp_path / "c"
    write_tree(root, _corpus("screaming"))
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\n")
    assert run_folio("index", cwd=root).returncode == 0
    data = _query(run_folio, root, "what is the value of HASH_OPCODE_GAS")
    assert data["results"][0]["path"] == "spec/params.md", data["results"]
    # semantic mode is what it was: no identifier rule
    sem = _query(run_folio, root, "what is the value of HASH_OPCODE_GAS", "--mode", "semantic")
    assert sem["mode"] == "semantic" and "ranks" not in sem["results"][0]


def test_an_index_analysed_under_older_rules_is_analysed_again_without_embedding(
        tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = tmp_path / "c"
    write_tree(root, _corpus("dotted"))
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\n")
    assert run_folio("index", cwd=root).returncode == 0
    db = root / ".folio" / "index.db"
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone() == (ANALYSIS_VERSION,)
        c.execute("DELETE FROM meta WHERE key = 'analysis'")  # as an index built before identifiers were terms
        sections = c.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    # a query still answers, and says in one sentence what to run when its question holds an identifier
    data = _query(run_folio, root, "memory.swap.max")
    said = [n for n in data["notices"] if "older rules" in n]
    assert len(said) == 1 and "`folio index`" in said[0] and data["results"], data
    assert not [n for n in _query(run_folio, root, "gardening tomatoes")["notices"] if "older rules" in n]

    srv.control(reset_stats=True)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert any("read again to rebuild it" in n for n in rep["notices"]), rep
    assert rep["embedded"] == 0 and rep["reused"] == sections, rep
    assert srv.stats()["inputs"] <= 2  # at most the fingerprint probe: nothing embedded again
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone() == (ANALYSIS_VERSION,)
        assert c.execute("SELECT COUNT(*) FROM lexseg").fetchone()[0] == 1  # the superseded segment went
    data = _query(run_folio, root, "memory.swap.max")
    assert not [n for n in data["notices"] if "older rules" in n]
    assert data["results"][0]["path"] == "spec/params.md"
    # and the next run has nothing to do again
    rep = json.loads(run_folio("index", "--json", cwd=root).stdout)
    assert rep["reused"] == 0 and not any("read again" in n for n in rep["notices"]), rep

    # with no server at all, the lexical plane is rebuilt the same (nothing needed embedding)
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM meta WHERE key = 'analysis'")
    srv.stop()
    rep = json.loads(run_folio("index", "--json", cwd=root).stdout)
    assert rep["embedded"] == 0 and rep["reused"] == sections and rep["waiting"] == 0, rep
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone() == (ANALYSIS_VERSION,)
        assert c.execute("SELECT COUNT(*) FROM records WHERE vec = 0").fetchone()[0] == 0


def test_a_half_built_index_ranks_sections_without_a_vector_by_their_words(
        tmp_path, write_tree, fake_server, run_folio):
    # 60 files x 9 records: the server fails from its 12th good answer on, so the first commit
    # holds vectors and the later files wait for theirs (their words are in the lexical plane)
    srv = fake_server(fail_after=12)
    root = tmp_path / "c"
    write_tree(root, many_files(60, 8))
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 1 and "wait for vectors" in r.stderr, r.stderr
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        waiting = {p for (p,) in c.execute(
            "SELECT DISTINCT f.path FROM records r JOIN files f ON f.id = r.file_id WHERE r.vec = 0")}
    assert "bulk/f059.md" in waiting and len(waiting) < 60
    srv.control(fail_after=None)
    # gadget3 is in every file's fourth section; widget59x3 only in the last file's, which has no vector
    q = "gadget3 widget59x3"
    lex = _query(run_folio, root, q, "--lexical", "--no-refresh")
    assert lex["results"][0]["path"] == "bulk/f059.md"
    data = _query(run_folio, root, q, "--no-refresh")
    assert data["mode"] == "hybrid"
    top3 = [(h["path"], h["ranks"]) for h in data["results"][:3]]
    assert ("bulk/f059.md", {"semantic": None, "lexical": 1}) in top3, data["results"]
    assert any("only their words rank them" in n for n in data["notices"]), data["notices"]
    # the semantic mode still leaves them out
    sem = _query(run_folio, root, q, "--mode", "semantic", "--no-refresh", "-l", "50")
    assert not [h for h in sem["results"] if h["path"] in waiting]


def test_a_question_or_path_starting_with_a_dash_is_told_to_go_after_double_dash(tmp_path, write_tree, run_folio):
    """`folio query "--dry-run-mode"` (SKILL.md lists such flags among the identifiers to ask for) and
    `folio show -x.md:1-3` said only "No such option": the sentence says to put it after `--`, and
    doing as it says works. An option click finds near the name is still named first."""
    root = tmp_path / "c"
    write_tree(root, {**_corpus("kebab"), "-x.md": "# Dash\n\nA file whose name starts with a dash.\n"})
    assert run_folio("index", "--endpoint", "http://127.0.0.1:9/v1/embeddings", cwd=root).returncode == 0
    r = run_folio("query", "--dry-run-mode", "--paths-only", cwd=root)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert ("No such option '--dry-run-mode'. Did you mean '--mode'? A question that starts with '-' goes after "
            "`--`, the options before it: folio query [OPTIONS] -- --dry-run-mode") in r.stderr, r.stderr
    r = run_folio("query", "--paths-only", "--", "--dry-run-mode", cwd=root)
    assert r.returncode == 0 and r.stdout.startswith("spec/params.md:"), (r.stdout, r.stderr)
    r = run_folio("show", "-x.md:1-3", cwd=root)
    assert r.returncode == 2 and "folio show [OPTIONS] -- -x.md:1-3" in r.stderr, r.stderr
    r = run_folio("show", "--", "-x.md:1-3", cwd=root)
    assert r.returncode == 0 and r.stdout.startswith("# Dash\n"), r.stderr
    r = run_folio("query", "x", "--jsn", cwd=root)
    assert r.returncode == 2 and "Did you mean '--json'?" in r.stderr
