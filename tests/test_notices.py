"""What a newcomer is told, through the CLI: which config files exist, why a join dropped nothing,
what values a frontmatter key holds, and a reference that opens from where it was printed."""

from __future__ import annotations

import json

from helpers import free_port

DOCS = {
    "keps/net/536-routing/README.md": "---\ntitle: Routing\nstatus: replaced\n---\n# Routing\n\nTopology aware routing.\n",
    "keps/net/2433-hints/README.md": ("---\ntitle: Hints\nstatus: implemented\nreplaces:\n  - /keps/net/536-routing\n"
                                      "---\n# Hints\n\nTopology aware hints replace routing.\n"),
    "keps/node/1-other/README.md": "---\ntitle: Other\nid: 1\nstatus: implemented\n---\n# Other\n\nNode things.\n",
}


def lexical_index(run_folio, root):
    r = run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": f"http://127.0.0.1:{free_port()}/v1/embeddings"})
    assert r.returncode == 0, r.stderr


def test_config_says_which_files_do_not_exist(tmp_path, write_tree, run_folio):
    root = write_tree(tmp_path / "c", {"a.md": "# A\n"})
    lexical_index(run_folio, root)
    r = run_folio("config", cwd=root)
    lines = {ln.split("  ")[0].strip(): ln for ln in r.stdout.splitlines()}
    assert "does not exist yet: `folio config set KEY VALUE` creates it" in lines["user config"]
    assert "does not exist yet: `folio config set --project KEY VALUE` creates it" in lines["project file"]
    data = json.loads(run_folio("config", "--json", cwd=root).stdout)
    assert data["project_file_exists"] is False and data["user_file_exists"] is False
    assert run_folio("config", "set", "--project", "mode", "lexical", cwd=root).returncode == 0
    r = run_folio("config", cwd=root)
    project = next(ln for ln in r.stdout.splitlines() if ln.startswith("project file"))
    assert "does not exist" not in project and project.endswith("folio.yaml")


def test_a_join_on_path_pointers_that_matched_no_identity_suggests_identity_path(tmp_path, write_tree, run_folio):
    root = write_tree(tmp_path / "c", DOCS)
    lexical_index(run_folio, root)
    r = run_folio("query", "topology routing", "--exclude-pointed-by", "replaces", "--paths-only", cwd=root)
    assert r.returncode == 0
    assert "(0 documents dropped by --exclude-pointed-by replaces, --identity id)" in r.stderr
    note = [ln for ln in r.stderr.splitlines() if ln.startswith("note:")]
    assert len(note) == 1 and "look like file paths" in note[0] and "'/keps/net/536-routing'" in note[0]
    assert "--identity @path" in note[0]
    # following the advice drops the replaced KEP
    r = run_folio("query", "topology routing", "--exclude-pointed-by", "replaces", "--identity", "@path",
                  "--paths-only", cwd=root)
    assert "536-routing" not in r.stdout and "(1 document dropped" in r.stderr and "note:" not in r.stderr
    # a key no document has: said too
    r = run_folio("query", "topology routing", "--exclude-pointed-by", "superseded-by", cwd=root)
    assert "no document in the index has a 'superseded-by' key" in r.stderr


def test_status_shows_sample_values_per_key_and_lists_one_key(tmp_path, write_tree, run_folio):
    root = write_tree(tmp_path / "c", DOCS)
    lexical_index(run_folio, root)
    r = run_folio("status", cwd=root)
    lines = [ln.strip() for ln in r.stdout.splitlines()]
    assert 'status (3): "implemented", "replaced"' in lines
    assert 'replaces (1): "/keps/net/536-routing"' in lines
    data = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert data["frontmatter_samples"]["status"] == ["implemented", "replaced"]
    r = run_folio("status", "--key", "status", cwd=root)
    assert r.stdout.splitlines() == ['     2  "implemented"', '     1  "replaced"']
    r = run_folio("status", "--key", "nope", cwd=root)
    assert r.returncode == 0 and r.stdout.startswith("no document has a value for 'nope'")
    r = run_folio("status", "--key", "stauts", cwd=root)  # a typo: the key meant, as --where names it
    assert r.returncode == 0 and r.stdout.startswith("no document has a value for 'stauts' (did you mean 'status'?)")


def test_a_reference_printed_with_root_opens_from_where_it_was_printed(tmp_path, write_tree, run_folio):
    src = write_tree(tmp_path / "proj" / "src", DOCS)
    lexical_index(run_folio, src)
    here = tmp_path / "proj"  # no index here: --root names the corpus
    r = run_folio("query", "topology hints", "--root", "src", "--paths-only", "-l", "1", cwd=here)
    ref = r.stdout.splitlines()[0]
    assert ref.startswith("src/keps/")
    r = run_folio("show", ref, cwd=here)
    assert r.returncode == 0, r.stderr
    assert "Topology aware hints" in r.stdout and "(sha " in r.stdout
    assert not (here / ".folio").exists()
    # outside any corpus: one sentence that does not tell you to index where you stand
    r = run_folio("show", "nowhere/a.md:1-2", cwd=here)
    assert r.returncode == 1 and "no folio index holds nowhere/a.md" in r.stderr
    assert "at its root" in r.stderr


def test_a_corpus_without_markdown_is_told_so_not_told_to_start_a_server(tmp_path, write_tree, fake_server,
                                                                         run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "c", {"notes.txt": "Plain text, not Markdown.\n"})
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    r = run_folio("query", "anything", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["notices"]
    assert len(said) == 1 and "no Markdown file was found" in said[0] and "add .md files" in said[0], said
    assert "server" not in said[0]


def test_status_refuses_an_empty_key_and_key_with_truncated(tmp_path, write_tree, run_folio):
    """Both were ignored: `--key ""` printed the whole status, `--key K --truncated` the cut records."""
    root = write_tree(tmp_path / "c", DOCS)
    lexical_index(run_folio, root)
    for args, said in ((["--key", ""], "--key is empty"), (["--key", "status", "--truncated"], "choose one")):
        r = run_folio("status", *args, cwd=root)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)
    assert run_folio("status", "--key", "status", cwd=root).returncode == 0


def test_show_json_carries_the_notes_the_text_output_prints(tmp_path, write_tree, run_folio):
    """`folio show --json` said a range past the file's end only in `end`, and a changed file only in
    `freshness`: the notes went to stderr alone. Now its `notices` holds them, as a query's does."""
    import os
    import time

    root = write_tree(tmp_path / "c", {"a.md": "# A\n\nOne.\n", "b.md": "# B\n\nTwo.\n"})
    t = time.time() - 60
    for p in root.glob("*.md"):
        os.utime(p, (t, t))
    lexical_index(run_folio, root)
    whole = run_folio("show", "a.md:1-3", "--json", cwd=root)
    assert whole.returncode == 0 and json.loads(whole.stdout)["notices"] == [], whole.stderr
    past = run_folio("show", "a.md:1-40", "--json", cwd=root)
    assert past.returncode == 0, past.stderr
    assert json.loads(past.stdout)["notices"] == ["a.md has 3 lines now; showed 1-3"]
    assert past.stderr.splitlines() == ["note: a.md has 3 lines now; showed 1-3"]
    (root / "b.md").write_text("# B\n\nTwo, and more now.\n")
    stale = run_folio("show", "b.md:1-3", "--json", cwd=root)
    got = json.loads(stale.stdout)
    assert got["freshness"] == "stale" and len(got["notices"]) == 1, got
    assert got["notices"][0].startswith("b.md changed since it was indexed: these lines may have moved")
    assert stale.stderr.splitlines() == [f"note: {got['notices'][0]}"]


def test_an_index_a_refusing_server_left_without_vectors_is_not_said_to_have_had_no_server(
        tmp_path, write_tree, fake_server, run_folio):
    # llama-server started with --api-key (or without --embeddings, or with --pooling none) answered
    # the run with a refusal: a server did answer, and the query and status must not say none did.
    srv = fake_server(api_key="the-key")
    root = write_tree(tmp_path / "c", {"a.md": "# Harbour\n\nThe pilot boards at dawn.\n"})
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 1 and "refused the credentials" in r.stderr, r.stderr
    r = run_folio("query", "pilot", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["notices"]
    assert len(said) == 1 and "no embeddings server gave it vectors when it was built" in said[0], said
    assert "answered" not in said[0] and "start a server" not in said[0], said
    st = run_folio("status", cwd=root).stdout
    assert "no embeddings server gave it vectors when it was built" in st and "answered" not in st, st


def test_config_names_the_endpoint_a_query_uses_when_the_index_recorded_another(tmp_path, write_tree, run_folio,
                                                                               fake_server):
    """An index built with `--endpoint`: `folio config` printed `endpoint http://127.0.0.1:8080/v1/embeddings
    (default)` while every query embedded through the recorded endpoint; with FOLIO_ENDPOINT set it
    printed that, which a query did not use either. Now config names the endpoint in force for queries
    and what moves it, and `--json` carries it as `recorded`."""
    srv = fake_server()
    root = write_tree(tmp_path / "c", {"a.md": "# A\n\nalpha\n"})
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    r = run_folio("config", cwd=root)
    lines = r.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("endpoint "))
    assert lines[at + 1].split()[:4] == ["in", "force", "for", "queries:"], r.stdout
    assert srv.url in lines[at + 1] and "`folio index --endpoint URL` moves it" in lines[at + 1], r.stdout
    other = "http://127.0.0.1:9/v1/embeddings"
    r = run_folio("config", cwd=root, env={"FOLIO_ENDPOINT": other})
    assert f"`folio index` moves it to {other}" in r.stdout, r.stdout
    data = json.loads(run_folio("config", "--json", cwd=root, env={"FOLIO_ENDPOINT": other}).stdout)
    assert data["recorded"] == {"endpoint": srv.url, "model": data["recorded"]["model"]}
    assert data["settings"]["endpoint"]["value"] == other
    r = run_folio("config", cwd=root, env={"FOLIO_ENDPOINT": srv.url})  # the same: nothing more to say
    assert "in force for queries" not in r.stdout
