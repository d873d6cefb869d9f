"""What folio sends to the embeddings server: a record as its reader sees it (folio/reader.py).

Unit tests for the transformation, then the CLI: the server receives reader text while line
ranges, `show` and the lexical plane keep the source; an index embedded from an older record
text is re-embedded once by `folio index` when the server answers, and left alone when not.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_core_cli import backdate

from folio.reader import VERSION, reader_text


def test_links_keep_their_text_and_lose_their_targets():
    src = ("As you saw in [Chapter\n2][comparing-the-guess]<!-- ignore -->, see [the docs](https://x.org/a)\n"
           "and ![a diagram](img/d.png) or [this][].")
    assert reader_text(src) == "As you saw in Chapter\n2, see the docs\nand a diagram or this."


def test_comments_tags_directives_refdefs_and_heading_marks_go():
    src = ("### Shadowing\n\n<span class=\"filename\">Filename: src/main.rs</span>\n\n"
           "<!-- a note for editors,\nover two lines -->\nText.\n\n"
           "[comparing-the-guess]: ch02-00.html#comparing\n[data-types]: ch03-02.html")
    assert reader_text(src) == "Shadowing\n\nFilename: src/main.rs\n\nText."


def test_code_is_content_and_is_kept_as_written():
    src = ("Use `Vec<T>` and `[x](y)` here.\n\n```rust\nlet v: Vec<i32> = v[0](1); // <!-- no -->\n```\n"
           "~~~\n# not a heading\n~~~")
    assert reader_text(src) == src
    # a fence holding only an mdBook include directive says nothing to a reader
    inc = "Before.\n\n```rust\n{{#rustdoc_include ../listings/ch03/src/main.rs}}\n```\n\nAfter."
    assert reader_text(inc) == "Before.\n\nAfter."


def test_a_record_that_is_only_markup_is_sent_as_written():
    assert reader_text("<!-- nothing for a reader -->") == "<!-- nothing for a reader -->"
    assert reader_text("[a]: https://example.org") == "[a]: https://example.org"
    plain = "No markup at all: 3 < 4 and a {brace}."
    assert reader_text(plain) is plain


def test_an_unclosed_fence_runs_to_the_end_of_the_record():
    src = "Intro with [a link](u).\n\n```\ncode <b>kept</b>\nmore"
    assert reader_text(src) == "Intro with a link.\n\n```\ncode <b>kept</b>\nmore"


DOCS = {
    "guide.md": "# Guide\n\nSee [the setup page](setup.html)<!-- ignore --> before you start.\n\n"
                "## Install\n\n<kbd>pip</kbd> installs it; read [Chapter 2][ch2].\n\n[ch2]: ch02.html\n",
}


def test_server_receives_reader_text_while_citations_keep_the_source(tmp_path, write_tree, fake_server,
                                                                     run_folio):
    srv = fake_server(dim=32, record=True)
    root = write_tree(tmp_path / "c", DOCS)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    sent = srv.inputs()
    assert "Guide\n\nSee the setup page before you start." in sent
    assert "Install\n\npip installs it; read Chapter 2." in sent
    assert not any("ignore" in t or "ch02.html" in t or "<kbd>" in t for t in sent)
    data = json.loads(run_folio("query", "installing with pip", "--json", cwd=root).stdout)
    top = data["results"][0]
    assert (top["path"], top["start"], top["end"]) == ("guide.md", 5, 9)  # the source's own lines
    # the lexical plane indexes the source: a link target is still a term it knows
    lex = json.loads(run_folio("query", "ch02.html", "--lexical", "--json", cwd=root).stdout)
    assert lex["results"][0]["start"] == 5


@pytest.fixture
def older_index(tmp_path, write_tree, fake_server, run_folio):
    """(root, server): an index as one built before folio/reader.py existed (no `text` in meta,
    record keys that are not this version's)."""
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", DOCS)
    backdate(root)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        c.execute("DELETE FROM meta WHERE key = 'text'")
        c.execute("UPDATE records SET text_hash = 'source:' || text_hash")  # keys of another version
    return root, srv


def test_an_index_from_an_older_record_text_is_reembedded_once(older_index, run_folio):
    root, _srv = older_index
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["text"] == "source" and "older record text" in " ".join(s["config_differs"])
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "embedded from an older record text" in r.stderr and "re-embedding every section" in r.stderr
    assert json.loads(r.stdout)["embedded"] == 2
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["text"] == VERSION and not s["config_differs"]
    again = run_folio("index", "--json", cwd=root)
    assert json.loads(again.stdout)["embedded"] == 0 and "older record text" not in again.stderr
    assert json.loads(run_folio("query", "pip", "--json", cwd=root).stdout)["mode"] == "hybrid"


def test_with_the_server_down_an_older_index_is_kept_as_it_is(older_index, run_folio):
    root, srv = older_index
    srv.stop()
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "kept for now" in r.stderr and "Traceback" not in r.stderr
    assert json.loads(r.stdout)["embedded"] == 0
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["embedded"] == s["sections"] == 2  # nothing was dropped


def test_a_model_change_and_an_older_record_text_cost_one_re_embedding(older_index, fake_server, run_folio):
    root, _srv = older_index
    other = fake_server(dim=16, space="b", record=True)
    r = run_folio("index", "--endpoint", other.url, "--model", "other", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "this run uses other at" in r.stderr and "older record text" not in r.stderr
    assert json.loads(r.stdout)["embedded"] == 2
    assert json.loads(run_folio("status", "--json", cwd=root).stdout)["text"] == VERSION


def test_a_re_embedding_cut_short_keeps_the_older_vectors_answering(older_index, run_folio):
    root, srv = older_index
    srv.control(reset_stats=True, fail_after=1)  # the upgrade's probe answers, then the server fails
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["embedded"] == s["sections"] == 2 and s["text"] == "source"  # nothing lost; still due
    srv.control(fail_after=None)
    q = json.loads(run_folio("query", "installing with pip", "--json", "--mode", "semantic", cwd=root).stdout)
    assert q["mode"] == "semantic" and q["results"][0]["start"] == 5
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 2
