"""`folio status` against the real CLI and the fake embeddings server: what it counts as changed,
and frontmatter keys that flatten alike."""

from __future__ import annotations

import json
import os
import time

from helpers import indexed


def _status(run_folio, root) -> dict:
    r = run_folio("status", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_file_touched_with_its_bytes_unchanged_is_not_counted_as_changed(tmp_path, fake_server, run_folio):
    """status compared the stat only, so a file touched (a checkout, `touch`) was "changed since
    indexing" while `folio show` on it said current. Now the bytes decide, as they do for show and
    a query; a file edited to the same size is still changed, and status writes nothing."""
    srv = fake_server()
    root = indexed(tmp_path / "c", {"a.md": "# A\n\nalpha text\n", "b.md": "# B\n\nbeta text\n",
                                    "c.md": "# C\n\ngamma text\n"}, srv, run_folio)
    later = time.time() - 30
    os.utime(root / "a.md", (later, later))  # touched: a new mtime, the same bytes
    assert _status(run_folio, root)["changed"] == 0
    r = run_folio("show", "a.md:1-3", cwd=root)
    assert r.returncode == 0 and "current)" in r.stderr + r.stdout, r.stdout + r.stderr
    assert _status(run_folio, root)["changed"] == 0  # still: status restamps nothing, and needs not
    (root / "b.md").write_text("# B\n\nbetA text\n")  # the same size, other bytes
    os.utime(root / "b.md", (later, later))
    (root / "c.md").write_text("# C\n\ngamma text, longer\n")
    data = _status(run_folio, root)
    assert (data["changed"], data["unindexed"], data["deleted"]) == (2, 0, 0), data
    r = run_folio("status", cwd=root)
    assert "3 (2 changed since indexing)" in r.stdout, r.stdout


def test_a_dotted_key_beside_a_nested_one_keeps_both_values_and_warns(tmp_path, fake_server, run_folio):
    """`a.b: x` and `a: {b: y}` both flatten to `a.b`: one value was dropped without a word, so
    `--where a.b=x` found nothing and status listed only y. Both are kept (a list), and `folio index`
    warns naming the file and the line to rename."""
    srv = fake_server()
    files = {"one.md": "---\ntitle: One\na.b: x\na:\n  b: y\n---\n# One\n\nalpha beta text\n",
             "two.md": "---\na:\n  b: y\n---\n# Two\n\ngamma delta text\n"}
    root = tmp_path / "c"
    root.mkdir()
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\nmodel: fake\n")
    for rel, text in files.items():
        (root / rel).write_text(text)
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == ["warning: one.md: line 3: frontmatter `a.b: ...` and `a: {b: ...}` both read as the key "
                        "`a.b`; both values are kept under it (`--where a.b=...` matches either): rename one to "
                        "tell them apart"], r.stderr
    r = run_folio("status", "--key", "a.b", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["frontmatter_values"] == {"a.b": {"y": 2, "x": 1}}, data["frontmatter_values"]
    assert data["frontmatter_keys"]["a.b"] == 2
    for value, paths in (("x", ["one.md"]), ("y", ["one.md", "two.md"])):
        r = run_folio("query", "alpha gamma text", "--where", f"a.b={value}", "--paths-only", cwd=root)
        assert r.returncode == 0, r.stderr
        assert sorted(p.split(":")[0] for p in r.stdout.split()) == paths, r.stdout


def test_key_held_with_no_value_says_so_and_names_the_keys_under_it(tmp_path, write_tree, run_folio):
    """`folio status --key superseded-by` where documents carry the key empty said "no document has a
    value for 'superseded-by' (did you mean 'superseded-by'?)": the key offered as its own fix. A key
    whose values sit under dotted keys (a list of maps) was met the same way. Now each is said as it is."""
    root = write_tree(tmp_path / "c", {
        "folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n",
        "a.md": "---\nstatus: implemented\nsuperseded-by:\nfeature-gates:\n  - name: Fast\n    components: [api]\n---\n# A\n\nalpha\n",
        "b.md": "---\nstatus: implemented\nsuperseded-by:\nfeature-gates: []\n---\n# B\n\nbeta\n",
        "c.md": "---\nstatus: provisional\n---\n# C\n\ngamma\n",
    })
    assert run_folio("index", cwd=root).returncode == 0  # lexical only: nothing answers there
    r = run_folio("status", "--key", "superseded-by", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "did you mean 'superseded-by'" not in r.stdout
    assert r.stdout.strip() == ("2 documents hold 'superseded-by' with no value (empty); --where superseded-by "
                                "keeps them, --where '!superseded-by' the others"), r.stdout
    r = run_folio("status", "--key", "feature-gates", cwd=root)
    assert "did you mean" not in r.stdout, r.stdout
    assert "its values are under its keys 'feature-gates." in r.stdout, r.stdout
    assert "`folio status --key feature-gates." in r.stdout, r.stdout
    r = run_folio("status", "--key", "statsu", cwd=root)  # a typo still gets the closest key
    assert "no document has a value for 'statsu' (did you mean 'status'?)" in r.stdout, r.stdout


def test_status_lists_a_key_held_empty_with_a_word_not_a_bare_colon(tmp_path, write_tree, run_folio):
    """`folio status` printed `feature-gates (50): ` and `superseded-by (2): `, nothing after the
    colon, as if the values had failed to print; it says the key is held empty, and where a map's
    values are."""
    root = write_tree(tmp_path / "c", {
        "folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n",
        "a.md": "---\nsuperseded-by:\nfeature-gates:\n  - name: Fast\n    components: [api]\n---\n# A\n\nalpha\n",
        "b.md": "---\nsuperseded-by:\nfeature-gates:\n---\n# B\n\nbeta\n",
    })
    assert run_folio("index", cwd=root).returncode == 0
    r = run_folio("status", cwd=root)
    lines = {ln.split(" (")[0].strip(): ln.strip() for ln in r.stdout.splitlines() if ln.startswith("          ")}
    assert lines["superseded-by"] == "superseded-by (2): (held empty)", r.stdout
    assert lines["feature-gates"] == ("feature-gates (1): (held empty; its values elsewhere are under "
                                      "feature-gates.components, feature-gates.name)"), r.stdout
    assert not any(ln.rstrip().endswith(":") for ln in r.stdout.splitlines()), r.stdout
