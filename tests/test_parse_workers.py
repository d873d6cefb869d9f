"""Big runs parse in worker processes ahead of the loop that plans, embeds and commits
(readahead.read_ahead; FOLIO_PARSE_WORKERS sets how many, 0 none). The index a user gets must be
the same either way: same records, line ranges, trails, frontmatter, vectors and lexical plane,
the same warnings, and the same records divided by the server's token counts."""

from __future__ import annotations

import json
import shutil

from helpers_index import assert_same_index

EXTRA = {
    "zz/long-line.md": "# Long\n\n" + "x" * 9000 + "\n\n## After\n\ntail text.\n",
    "zz/bad-yaml.md": "---\ntitle: [unclosed\n---\n# Heading\n\nbody.\n",
    "zz/latin1.md": "# Caf\xe9\n\nna\xefve bytes.\n".encode("latin-1"),
    "zz/binary.md": b"\x00\x01\x02\xff\xfe" * 400,
}


def both(tmp_path, corpus, write_tree, run_folio, url, extra_args=()):
    """The same tree indexed without workers and with two; returns the two roots and reports."""
    out = []
    for workers in (0, 2):
        root = tmp_path / f"w{workers}"
        shutil.copytree(corpus("rust-book"), root)
        write_tree(root, EXTRA)
        r = run_folio("index", "--endpoint", url, "--json", *extra_args, cwd=root,
                      env={"FOLIO_PARSE_WORKERS": workers}, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        # the warnings and notices, not the progress lines a slow run prints off a terminal
        said = sorted(ln for ln in r.stderr.splitlines() if not ln.startswith("indexing:"))
        out.append((root, json.loads(r.stdout), said))
    return out


def test_workers_build_the_same_index(tmp_path, corpus, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    (a, ra, ea), (b, rb, eb) = both(tmp_path, corpus, write_tree, run_folio, srv.url)
    assert ra["sections"] == rb["sections"] > 500 and ra["files"] == rb["files"]
    assert ea == eb and any("bad-yaml.md" in line for line in ea) and any("binary.md" in line for line in ea)
    assert_same_index(b, a)


def test_records_divided_by_the_servers_counts_are_alike_with_workers(tmp_path, corpus, write_tree, fake_server,
                                                                        run_folio):
    # The server takes 300 tokens an input (its batch): workers divide by characters ahead of the
    # loop, and the loop divides by the server's counts whatever divided the file; both runs alike.
    srv = fake_server(dim=32, max_tokens=300)
    (a, ra, ea), (b, rb, eb) = both(tmp_path, corpus, write_tree, run_folio, srv.url)
    assert ra["budget"] == rb["budget"] == 8000 and ra["tokens"] == rb["tokens"] == 300
    assert ra["sections"] == rb["sections"] > 500
    assert_same_index(b, a)
