"""The paths that run most often stay lean: a `folio index` with nothing to do reads the stat
of every file and the index's own bookkeeping, and loads neither numpy nor httpx nor markdown-it
(their imports alone cost more than the rest of a no-op run on 16k files), nor the lexical
analysis it has nothing to analyse with; a run or a query that asks a server on this machine does
so without httpx."""

from __future__ import annotations

import importlib.util
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


def heavy_modules(args, cwd, env, names=("numpy", "httpx", "markdown_it", "markdown_it_pyrs")):
    """Which of the heavy modules `names` `folio ARGS` has loaded when it ends (folio.entry ends
    `index` with os._exit: the report is printed there), a line `HEAVY=a,b`; a process it forked
    (the walking child) reports its own as `CHILD HEAVY=...`."""
    code = ("import os, sys\nfrom folio.entry import main\nsys.argv = ['folio', *sys.argv[1:]]\n"
            "MAIN = os.getpid()\n"
            "def report():\n"
            f"    heavy = sorted(m for m in {tuple(names)!r} if m in sys.modules)\n"
            "    tag = '' if os.getpid() == MAIN else 'CHILD '\n"
            "    os.write(2, (tag + 'HEAVY=' + ','.join(heavy) + '\\n').encode())  # one write: never split by the other's\n"
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
    assert "HEAVY=" in err.splitlines(), err
    # nor the lexical rules (OpenSSL's hashlib and typing come with them: ~7 ms of the run's critical path)
    err = heavy_modules(["index"], root, dict(os.environ), names=("hashlib", "folio.lexical.analysis"))
    assert "HEAVY=" in err.splitlines(), err
    assert "0 embedded" in run_folio("index", cwd=root).stdout
    # the same run after one file changed does need numpy: the check above is not vacuous. The
    # walking child parses the file (a block parser loads there, while numpy loads in the run: the
    # compiled one alone where it is installed), and a server on this machine is asked without httpx
    # (folio/wire.py)
    (root / "b" / "c.md").write_text("# Beta\n\nBananas and plantains.\n")
    err = heavy_modules(["index"], root, dict(os.environ))
    parser = "HEAVY=markdown_it_pyrs" if importlib.util.find_spec("markdown_it_pyrs") else "HEAVY=markdown_it"
    assert "HEAVY=numpy" in err.splitlines() and f"CHILD {parser}" in err.splitlines(), err
    # a query embeds its question without httpx too; with a proxy configured, httpx (which reads
    # NO_PROXY) carries the request
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "all_proxy", "no_proxy")}
    err = heavy_modules(["query", "bananas", "--json"], root, env)
    assert "HEAVY=numpy" in err.splitlines(), err
    assert '"mode": "hybrid"' in _query(root, env)
    proxied = {**env, "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
    err = heavy_modules(["query", "bananas"], root, proxied)
    assert "HEAVY=httpx,numpy" in err.splitlines(), err
    assert '"mode": "hybrid"' in _query(root, proxied)


def _query(root, env) -> str:
    return subprocess.run([sys.executable, "-m", "folio", "query", "bananas", "--json"], cwd=root,
                          env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True).stdout


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


def test_index_options_read_without_click_are_the_commands():
    """`folio index` with a plain argv runs without click (index_command.plain): what it reads must
    be what click's parse of the same argv gives, and anything else must be left to click."""
    import click

    from folio.cli import index
    from folio.index_command import FLAGS, VALUE_OPTIONS, plain

    options = [p for p in index.params if isinstance(p, click.Option)]
    assert {o: p.type.name for p in options if not p.is_flag for o in p.opts} == \
        {o: {str: "text", int: "integer"}[t] for o, t in VALUE_OPTIONS.items()}
    assert {o: p.name for p in options if p.is_flag for o in p.opts} == FLAGS
    read = [[], ["--json"], ["sub"], ["--jobs", "2", "sub", "--json"], ["--jobs=3", "--rebuild", "--no-wait"],
            ["--endpoint", "http://127.0.0.1:9/v1/embeddings", "--model=m", "--max-chars", " 900 "],
            ["--endpoint=", "--jobs", "1", "--jobs", "4"], ["sub/../sub"]]
    for argv in read:
        got = plain(argv)
        assert got is not None, argv
        assert got == index.make_context("index", list(argv)).params, argv
    for argv in (["--help"], ["-h"], ["--jobs", "x"], ["--max-chars"], ["--endpoint", "--json"], ["a", "b"],
                 ["--json=1"], ["--", "sub"], ["-"], ["--jobs", "-1"], ["--verbose"]):
        assert plain(argv) is None, argv


def test_a_plain_index_never_loads_click_and_a_bad_one_gets_its_usage_error(tmp_path, write_tree, run_folio):
    root = write_tree(tmp_path / "c", DOCS)
    assert run_folio("index", cwd=root).returncode == 0
    err = heavy_modules(["index", "--json"], root, dict(os.environ), names=("click",))
    assert "HEAVY=" in err.splitlines(), err
    err = heavy_modules(["index", "--jobs", "x"], root, dict(os.environ), names=("click",))
    assert "HEAVY=click" in err.splitlines() and "Invalid value for '--jobs'" in err, err
    assert run_folio("index", "--jobs", "x", cwd=root).returncode == 2
    r = run_folio("index", "a.md", cwd=root)
    assert r.returncode == 2 and "is a file" in r.stderr, r.stderr
