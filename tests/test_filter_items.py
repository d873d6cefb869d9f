"""`--where key~=value` (one item of a comma-separated value), the note when `key=value` missed such
documents, and the count of `--exclude-pointed-by` pointers that name no document. Through the
real CLI, lexically (no server needed)."""

from __future__ import annotations

import json

import pytest

EIPS = {
    "eip-1559.md": "---\neip: 1559\ntitle: Fee market\n---\n# Fee market\n\nA base fee per gas, burned.\n",
    "eip-2718.md": "---\neip: 2718\nrequires: 1559\n---\n# Typed envelope\n\nA fee market transaction type.\n",
    "eip-4844.md": "---\neip: 4844\nrequires: 1559, 2718, 2930\n---\n# Blobs\n\nA blob fee market.\n",
    "eip-7702.md": "---\neip: 7702\nrequires: [2718, '1559, 2930']\n---\n# Set code\n\nA fee market for code.\n",
    "eip-9999.md": "---\neip: 9999\nrequires: 15590\n---\n# Other\n\nA fee market of its own.\n",
}


@pytest.fixture
def eips(tmp_path, write_tree, run_folio):
    root = tmp_path / "eips"
    write_tree(root, {**EIPS, "folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n"})
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    return root


def listed(run_folio, root, *args) -> tuple[list[str], str]:
    r = run_folio("ls", *args, cwd=root)
    assert r.returncode == 0, r.stderr
    return r.stdout.split(), r.stderr


def test_tilde_equals_matches_one_item_of_a_comma_separated_value(eips, run_folio):
    got, _ = listed(run_folio, eips, "--where", "requires~=1559")
    assert got == ["eip-2718.md", "eip-4844.md", "eip-7702.md"]  # not 15590: items match whole
    got, _ = listed(run_folio, eips, "--where", "requires~=2930")
    assert got == ["eip-4844.md", "eip-7702.md"]
    r = run_folio("query", "fee market", "--lexical", "--where", "requires~=1559", "--json", cwd=eips)
    assert sorted(row["path"] for row in json.loads(r.stdout)["results"]) == ["eip-2718.md", "eip-4844.md",
                                                                              "eip-7702.md"]


def test_equals_says_when_it_missed_a_comma_separated_item(eips, run_folio):
    got, err = listed(run_folio, eips, "--where", "requires=1559")
    assert got == ["eip-2718.md"]
    assert ("note: 2 documents hold '1559' as one item of a comma-separated 'requires' (e.g. '1559, 2718, 2930'), "
            "which requires=1559 does not match (it compares whole values): --where 'requires~=1559' matches one "
            "item") in err
    r = run_folio("query", "fee market", "--lexical", "--where", "requires=1559", "--json", cwd=eips)
    assert any("requires~=1559" in n for n in json.loads(r.stdout)["notices"])
    _, err = listed(run_folio, eips, "--where", "requires=15590")
    assert "note:" not in err  # nothing missed: nothing said


def test_pointers_that_name_no_document_are_counted(tmp_path, write_tree, run_folio):
    root = tmp_path / "keps"
    write_tree(root, {
        "keps/sig-a/1-old/README.md": "---\ntitle: Old\n---\n# Old\n\nThe old routing.\n",
        "keps/sig-a/2-new/README.md": "---\ntitle: New\nreplaces: [keps/sig-a/1-old, keps/sig-z/404-gone]\n---\n"
                                      "# New\n\nThe new routing.\n",
        "keps/sig-b/3-other/README.md": "---\ntitle: Other\nreplaces: /keps/sig-q/77-elsewhere\n---\n# Other\n\n"
                                        "Other routing.\n",
        "folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n"})
    assert run_folio("index", cwd=root).returncode == 0
    got, err = listed(run_folio, root, "--exclude-pointed-by", "replaces", "--identity", "@path")
    assert got == ["keps/sig-a/2-new/README.md", "keps/sig-b/3-other/README.md"]
    assert "note: 2 of the 3 replaces values name no document in the index (e.g. '/keps/sig-q/77-elsewhere'), so " \
           "they drop nothing" in err
    assert "(1 document dropped by --exclude-pointed-by replaces, --identity @path)" in err
