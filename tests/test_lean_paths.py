"""The paths that run most often stay lean: a `folio index` with nothing to do reads the stat
of every file and the index's own bookkeeping, and loads neither numpy nor httpx nor markdown-it
(their imports alone cost more than the rest of a no-op run on 16k files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from helpers import REPO

DOCS = {
    "a.md": "---\nid: a\n---\n# Alpha\n\nApples.\n\n## Orchard\n\nTrees.\n",
    "b/c.md": "# Beta\n\nBananas.\n",
}


def heavy_modules(args, cwd, env):
    """The heavy modules `folio ARGS` has loaded when it ends (folio.entry ends `index` with os._exit:
    the report is printed there)."""
    code = ("import os, sys\nfrom folio.entry import main\nsys.argv = ['folio', *sys.argv[1:]]\n"
            "def report():\n"
            "    heavy = sorted(m for m in ('numpy', 'httpx', 'markdown_it') if m in sys.modules)\n"
            "    print('HEAVY=' + ','.join(heavy), file=sys.stderr, flush=True)\n"
            "real_exit = os._exit\n"
            "os._exit = lambda code: (report(), real_exit(code))\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('EXIT', e.code, file=sys.stderr)\n"
            "report()\n")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env={**env, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True)
    return r.stderr


def test_a_no_op_index_imports_neither_numpy_nor_httpx(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "c", DOCS)
    past = time.time() - 10
    for p in (root / "a.md", root / "b" / "c.md"):
        os.utime(p, (past, past))
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    err = heavy_modules(["index"], root, dict(os.environ))
    assert "HEAVY=\n" in err, err
    assert "0 embedded" in run_folio("index", cwd=root).stdout
    # the same run after one file changed does need them: the check above is not vacuous
    (root / "b" / "c.md").write_text("# Beta\n\nBananas and plantains.\n")
    err = heavy_modules(["index"], root, dict(os.environ))
    assert "HEAVY=httpx,markdown_it,numpy" in err, err


def test_the_listing_started_before_click_is_the_corpus_named(tmp_path, write_tree, run_folio):
    """`folio index` starts listing the tree from argv before click loads (folio.entry); whatever
    argv holds, the run lists the corpus click resolves: the root named after options that take a
    value, else the corpus stood in."""
    a = write_tree(tmp_path / "a", {"folio.yaml": "endpoint: http://127.0.0.1:9/v1/embeddings\n",
                                    "a1.md": "# A1\n\nx\n", "a2.md": "# A2\n\ny\n"})
    b = write_tree(tmp_path / "b", {"b1.md": "# B1\n\nz\n", "sub/b2.md": "# B2\n\nw\n", "sub/b3.md": "# B3\n"})
    r = run_folio("index", "--jobs", "1", "--max-chars", "500", str(b), "--json", cwd=a)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"] == 3
    r = run_folio("index", "--json", cwd=a)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"] == 2
    r = run_folio("index", "--json", "sub", cwd=b)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"] == 2


def test_index_options_read_before_click_match_the_command():
    """The early listing reads index's options without click: the ones that take a value must be
    the command's, or a value would be taken for the root (and the listing started again)."""
    import click

    from folio.cli import index
    from folio.readahead import INDEX_FLAGS, INDEX_VALUE_OPTIONS

    options = [p for p in index.params if isinstance(p, click.Option)]
    assert {o for p in options if not p.is_flag for o in p.opts} == INDEX_VALUE_OPTIONS
    assert {o for p in options if p.is_flag for o in p.opts} == INDEX_FLAGS
