"""`folio ls` (issue 29.2): the documents the filters keep, in one call, through the CLI. A document
is kept exactly when `folio query` with the same filters keeps its sections; the join's count is of
documents, one number whatever the mode (issue 29.4); no server is needed."""

from __future__ import annotations

import json
import os

import pytest

DOCS = {
    "eips/eip-1.md": "---\neip: 1\ntitle: Accounts\nstatus: Review\ncategory: Core\ntags: [aa, accounts]\n"
                     "milestone:\n  alpha: v1\n---\n# Account abstraction\n\nSmart accounts.\n\n"
                     "## Motivation\n\nWallets want it.\n\n## Spec\n\nA new entry point.\n",
    "eips/eip-2.md": "---\neip: 2\ntitle: Gas\nstatus: Last Call\ncategory: Core\ntags: [gas]\n---\n# Gas\n\n"
                     "Gas costs.\n\n## Spec\n\nCheaper storage.\n",
    "eips/eip-3.md": "---\neip: 3\ntitle: Peers\nstatus: Final\ncategory: Networking\n---\n# Peers\n\n"
                     "Discovery.\n\n## Spec\n\nA table of peers.\n",
    "eips/eip-5.md": "---\neip: 5\ntitle: Peers again\nstatus: Review\ncategory: Networking\nsupersedes: [3]\n"
                     "---\n# Peers, revised\n\nDiscovery, again.\n",
    "docs/new/README.md": "---\nreplaces:\n  - /docs/old\n  - /docs/never-written\n---\n# Layout\n\nThe layout.\n",
    "docs/old/README.md": "# Layout (old)\n\nThe old layout.\n\n## More\n\nAnd more.\n",
    "docs/old/extra.md": "# Layout extra\n\nAn appendix.\n",
    "notes.md": "# Notes\n\nNo frontmatter here.\n\n## Second\n\nAnother section.\n",
}

WHERES = [
    ["status=Review"],
    ["status=Review|status=Last Call", "category=Core"],
    ["tags=aa"],
    ["status!=Final"],
    ["!status"],
    ["milestone"],
    ["milestone.alpha=v1"],
    ["eip=1"],
    ["status=review"],  # case-sensitive: nothing
]


@pytest.fixture
def corpus(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {srv.url}\n"})
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    return root, srv


def ls(run_folio, root, *args, env=None):
    r = run_folio("ls", *args, cwd=root, env=env)
    assert r.returncode == 0, r.stderr
    return r


def ls_json(run_folio, root, *args) -> dict:
    return json.loads(ls(run_folio, root, *args, "--json").stdout)


def query_json(run_folio, root, *args) -> dict:
    r = run_folio("query", "layout peers gas accounts notes", "--json", "-l", "1000", *args, cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_ls_lists_every_indexed_document_one_path_a_line(corpus, run_folio):
    root, _ = corpus
    r = ls(run_folio, root)
    assert r.stdout.splitlines() == sorted(DOCS)
    assert r.stderr == ""
    # from a subdirectory the paths open from there, as query's references do
    r = ls(run_folio, root / "eips")
    assert r.stdout.splitlines()[:2] == ["../docs/new/README.md", "../docs/old/README.md"]
    assert "eip-1.md" in r.stdout.splitlines()


@pytest.mark.parametrize("where", WHERES, ids=["|".join(w) for w in WHERES])
def test_where_keeps_exactly_the_documents_whose_sections_a_query_keeps(corpus, run_folio, where):
    root, _ = corpus
    flags = [x for w in where for x in ("--where", w)]
    listed = {d["path"] for d in ls_json(run_folio, root, *flags)["documents"]}
    # ranked by meaning with the limit past the corpus, a query returns every candidate section
    ranked = {r["path"] for r in query_json(run_folio, root, "--mode", "semantic", *flags)["results"]}
    assert listed == ranked
    if where == ["status=review"]:
        assert listed == set()


def test_the_join_drops_the_same_documents_and_counts_documents_in_every_mode(corpus, run_folio):
    root, _ = corpus
    for join, gone in ((["--exclude-pointed-by", "supersedes", "--identity", "eip"], {"eips/eip-3.md"}),
                       (["--exclude-pointed-by", "replaces", "--identity", "@path"],
                        {"docs/old/README.md", "docs/old/extra.md"})):
        got = ls_json(run_folio, root, *join)
        assert {d["path"] for d in got["documents"]} == set(DOCS) - gone
        assert got["dropped"] == len(gone)  # documents, though docs/old/README.md holds two sections
        for mode in ("semantic", "lexical", "hybrid"):
            q = query_json(run_folio, root, "--mode", mode, *join)
            assert q["dropped"] == len(gone), mode
            assert not {r["path"] for r in q["results"]} & gone
        r = ls(run_folio, root, *join)
        said = f"({len(gone)} document{'s' if len(gone) > 1 else ''} dropped by --exclude-pointed-by {join[1]}, "
        assert f"{said}--identity {join[3]})" in r.stderr


def test_json_gives_path_title_frontmatter_and_root(corpus, run_folio):
    root, _ = corpus
    got = ls_json(run_folio, root, "--where", "category=Core")
    assert got["root"] == str(root) and got["roots"] == [str(root)] and got["dropped"] == 0
    assert got["documents"][0] == {
        "path": "eips/eip-1.md", "root": str(root), "ref": "eips/eip-1.md", "title": "Accounts",
        "frontmatter": {"eip": "1", "title": "Accounts", "status": "Review", "category": "Core", "tags": ["aa", "accounts"],
                        "milestone.alpha": "v1"}, "freshness": "current"}
    assert [d["path"] for d in got["documents"]] == ["eips/eip-1.md", "eips/eip-2.md"]
    # --key: only those keys (and keys nested under them)
    got = ls_json(run_folio, root, "--where", "category=Core", "--key", "status", "--key", "milestone")
    assert [d["frontmatter"] for d in got["documents"]] == [{"status": "Review", "milestone.alpha": "v1"},
                                                            {"status": "Last Call"}]


def test_key_prints_values_after_each_path_and_null_ends_exact_paths_with_nul(corpus, run_folio, write_tree):
    root, _ = corpus
    r = ls(run_folio, root, "--where", "category=Core", "--key", "status", "--key", "tags")
    assert r.stdout.splitlines() == ['eips/eip-1.md  status=Review  tags=["aa", "accounts"]',
                                     "eips/eip-2.md  status=Last Call  tags=[\"gas\"]"]
    write_tree(root, {"odd\nname.md": "---\nstatus: Review\n---\n# Odd\n\nA name with a newline.\n"})
    assert run_folio("index", cwd=root).returncode == 0
    r = run_folio("ls", "--where", "status=Review", "-0", cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\0") == ["eips/eip-1.md", "eips/eip-5.md", "odd\nname.md", ""]
    assert '"odd\\nname.md"' in ls(run_folio, root, "--where", "status=Review").stdout.splitlines()
    bad = run_folio("ls", "-0", "--json", cwd=root)
    assert bad.returncode == 2 and "choose one" in bad.stderr


def test_a_key_no_listed_document_holds_is_said_with_the_closest(corpus, run_folio):
    """`--key stauts` printed the paths with nothing after them and said nothing: as if no document
    had a status. A key nested under the one given (`milestone` for `milestone.alpha`) is held."""
    root, _ = corpus
    r = ls(run_folio, root, "--where", "category=Core", "--key", "stauts", "--key", "milestone")
    assert r.stdout.splitlines() == ["eips/eip-1.md  milestone.alpha=v1", "eips/eip-2.md"]
    assert r.stderr.splitlines() == ["note: no listed document has a 'stauts' key (did you mean 'status'?)"]
    got = ls_json(run_folio, root, "--where", "category=Core", "--key", "stauts")
    assert got["notices"] == ["note: no listed document has a 'stauts' key (did you mean 'status'?)"]
    assert ls(run_folio, root, "--key", "status").stderr == ""


def test_works_with_no_server_at_all(tmp_path, write_tree, run_folio):
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n"})
    assert run_folio("index", cwd=root).returncode == 0  # lexical plane only: nothing answers there
    r = ls(run_folio, root, "--where", "status=Review")
    assert r.stdout.splitlines() == ["eips/eip-1.md", "eips/eip-5.md"]
    assert r.stderr == ""  # not a word about a server: ls asks it nothing


def test_a_listed_file_that_changed_is_brought_in_first_without_the_server(corpus, run_folio):
    """As a query refreshes the files behind its rows: a deleted file leaves the listing, an edited
    frontmatter is read anew, and a file whose text changed (its sections need the server, which
    ls never asks) keeps what the index holds, marked stale, with a notice."""
    root, srv = corpus
    (root / "eips/eip-1.md").write_text(DOCS["eips/eip-1.md"].replace("status: Review", "status: Withdrawn"),
                                        encoding="utf-8")
    (root / "eips/eip-2.md").unlink()
    (root / "eips/eip-5.md").write_text(DOCS["eips/eip-5.md"].replace("Discovery, again.", "Discovery, redone."),
                                        encoding="utf-8")
    srv.control(reset_stats=True)
    r = ls(run_folio, root, "--where", "status=Review|status=Last Call", "--key", "status")
    assert r.stdout.splitlines() == ["eips/eip-5.md (stale)  status=Review"]
    assert "(3 of the indexed files changed; 2 re-indexed without the server" in r.stderr, r.stderr
    got = ls_json(run_folio, root, "--where", "status=Withdrawn")
    assert [(d["path"], d["freshness"]) for d in got["documents"]] == [("eips/eip-1.md", "current")]
    assert srv.stats()["requests"] == 0
    # a query with the same filter agrees once it has refreshed eip-5 with the server
    q = query_json(run_folio, root, "--where", "status=Review|status=Last Call")
    assert {res["path"] for res in q["results"]} == {"eips/eip-5.md"}
    assert [d["freshness"] for d in ls_json(run_folio, root, "--where", "status=Review")["documents"]] == ["current"]


def test_a_frontmatter_edited_into_the_filter_is_listed_and_a_pointer_added_drops(corpus, run_folio):
    """Only the files the index's (old) frontmatter listed were looked at: eip-3 edited to
    `status: Review` was missing from `ls --where status=Review` (and from `status=Final`, refreshed
    there, so from both), and a `supersedes` written into a document outside the listing dropped
    nothing until some other command re-indexed it."""
    root, srv = corpus
    (root / "eips/eip-3.md").write_text(DOCS["eips/eip-3.md"].replace("status: Final", "status: Review"),
                                        encoding="utf-8")
    srv.control(reset_stats=True)
    r = ls(run_folio, root, "--where", "status=Review")
    assert r.stdout.splitlines() == ["eips/eip-1.md", "eips/eip-3.md", "eips/eip-5.md"], r.stderr
    assert "(1 of the indexed files changed; 1 re-indexed without the server" in r.stderr, r.stderr
    assert srv.stats()["requests"] == 0
    (root / "eips/eip-5.md").write_text(DOCS["eips/eip-5.md"].replace("supersedes: [3]", "supersedes: [3, 1]"),
                                        encoding="utf-8")  # eip-5 (Networking) is not among the Core listed
    got = ls_json(run_folio, root, "--where", "category=Core", "--exclude-pointed-by", "supersedes", "--identity", "eip")
    assert [d["path"] for d in got["documents"]] == ["eips/eip-2.md"] and got["dropped"] == 1, got


def test_an_empty_answer_says_which_filter_matched_nothing(corpus, run_folio):
    root, _ = corpus
    r = ls(run_folio, root, "--where", "status=final")
    assert r.stdout == ""
    assert "--where 'status=final' matches no document on its own" in r.stderr
    assert "status holds Review (2), Final (1), Last Call (1)" in r.stderr
    assert "no document matched" in r.stderr
    bad = run_folio("ls", "--where", "version>=2", cwd=root)
    assert bad.returncode == 2 and bad.stderr.startswith("folio: --where 'version>=2' cannot be read")


def test_several_roots_positional_or_root_and_one_join(tmp_path, write_tree, run_folio):
    old = write_tree(tmp_path / "old", {"eip-3.md": DOCS["eips/eip-3.md"]})
    new = write_tree(tmp_path / "new", {"eip-5.md": DOCS["eips/eip-5.md"]})
    for root in (old, new):
        assert run_folio("index", "--endpoint", "http://127.0.0.1:9/v1/embeddings", cwd=root).returncode == 0
    r = ls(run_folio, tmp_path, "old", "--root", "new")
    assert r.stdout.splitlines() == ["old/eip-3.md", "new/eip-5.md"]
    got = ls_json(run_folio, tmp_path, "old", "new", "--exclude-pointed-by", "supersedes", "--identity", "eip")
    assert [d["path"] for d in got["documents"]] == ["eip-5.md"] and got["dropped"] == 1
    assert got["root"] is None and got["roots"] == [str(old), str(new)]
    # a --where matching in one index only: no reason given for the other
    r = ls(run_folio, tmp_path, "old", "new", "--where", "status=Review")
    assert r.stdout.splitlines() == ["new/eip-5.md"] and "matches no document" not in r.stderr
    missing = run_folio("ls", str(tmp_path), cwd=tmp_path)
    assert missing.returncode == 1 and "no folio index at" in missing.stderr


def test_a_nested_corpus_listed_with_its_outer_one_lists_each_file_once(tmp_path, write_tree, run_folio):
    outer = write_tree(tmp_path / "o", {"a.md": "# A\n\nx\n", "inner/b.md": "# B\n\ny\n"})
    dead = ["--endpoint", "http://127.0.0.1:9/v1/embeddings"]
    assert run_folio("index", *dead, cwd=outer).returncode == 0
    assert run_folio("index", *dead, str(outer / "inner"), cwd=tmp_path).returncode == 0
    got = ls_json(run_folio, tmp_path, "o", os.path.join("o", "inner"))
    assert sorted((d["root"], d["path"]) for d in got["documents"]) == [(str(outer), "a.md"),
                                                                       (str(outer / "inner"), "b.md")]


def test_identity_without_exclude_pointed_by_is_noted_not_silently_dropped(corpus, run_folio):
    root, _ = corpus
    for cmd in (["ls"], ["query", "peers", "--lexical"]):
        r = run_folio(*cmd, "--identity", "eip", cwd=root)
        assert r.returncode == 0 and "without --exclude-pointed-by it changes nothing" in r.stderr, r.stderr
        r = run_folio(*cmd, "--identity", "eip", "--exclude-pointed-by", "supersedes", cwd=root)
        assert r.returncode == 0 and "changes nothing" not in r.stderr, r.stderr
        assert "changes nothing" not in run_folio(*cmd, cwd=root).stderr


def test_a_mistyped_join_key_is_offered_the_key_meant_not_one_pointing_the_other_way(tmp_path, write_tree, run_folio):
    """`--exclude-pointed-by replace` (the documents say `replaces`) dropped nothing with "no document in
    the index has a 'replace' key", and no word of the key meant, as `--where` gives. The closest key
    is offered now; but never one that is only alike (`supersedes` is not told `superseded-by`, the
    pointer that points the other way)."""
    docs = {**DOCS, "eips/eip-9.md": "---\neip: 9\nsuperseded-by: [10]\n---\n# Nine\n\nOld.\n"}
    root = write_tree(tmp_path / "c", {**docs, "folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n"})
    assert run_folio("index", cwd=root).returncode == 0
    r = ls(run_folio, root, "--exclude-pointed-by", "replace", "--identity", "@path")
    assert "no document in the index has a 'replace' key (did you mean 'replaces'?)" in r.stderr, r.stderr
    r = ls(run_folio, root, "--exclude-pointed-by", "supersede")
    assert "(did you mean 'supersedes'?)" in r.stderr, r.stderr
    (root / "eips/eip-5.md").unlink()  # the only `supersedes`: now the alike `superseded-by` is all there is
    assert run_folio("index", cwd=root).returncode == 0
    r = ls(run_folio, root, "--exclude-pointed-by", "supersedes")
    assert "no document in the index has a 'supersedes' key, so" in r.stderr, r.stderr
