"""The paths that run most often stay lean: a `folio index` with nothing to do reads the stat
of every file and the index's own bookkeeping, and loads neither numpy nor httpx nor markdown-it
(their imports alone cost more than the rest of a no-op run on 16k files)."""

from __future__ import annotations

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
    code = ("import sys\nfrom folio.cli import main\nsys.argv = ['folio', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('EXIT', e.code, file=sys.stderr)\n"
            "heavy = sorted(m for m in ('numpy', 'httpx', 'markdown_it') if m in sys.modules)\n"
            "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n")  # fmt: skip
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
