"""A user's files, environment or server doing something legal or common (issue 41): each gets one
sentence and an intact index, never a traceback, a lost record or all the machine's memory. Through
the real CLI; the cases that could take memory run under an address-space cap."""

from __future__ import annotations

import json

from helpers import run_folio, write_tree

C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}  # Python decodes names as ASCII unless told


def test_a_c_locale_keeps_files_with_non_ascii_names(tmp_path, fake_server):
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {
        "café.md": "---\nlieu: café\n---\n# Café\n\nThe kettle in the café.\n",
        "naïve/résumé.md": "# Résumé\n\nA lighthouse keeper's résumé.\n",
        "plain.md": "# Plain\n\nPlain words.\n",
    })
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    r = run_folio("index", "--json", cwd=root, env=C_LOCALE)
    assert r.returncode == 0 and r.stderr == "", r.stderr  # no "not UTF-8 ... skipped"
    d = json.loads(r.stdout)
    assert d["deleted"] == 0 and d["removed"] == 0, d
    r = run_folio("status", "--json", cwd=root, env=C_LOCALE)
    assert json.loads(r.stdout)["files"] == 3
    # UTF-8 arguments are read as UTF-8, and names print as they are.
    r = run_folio("query", "résumé", "--lexical", "-l", "1", cwd=root, env=C_LOCALE)
    assert r.returncode == 0, r.stderr
    assert "naïve/résumé.md:1-3" in r.stdout
    r = run_folio("show", "café.md:4-6", cwd=root, env=C_LOCALE)
    assert r.returncode == 0 and "The kettle in the café." in r.stdout, r.stderr
    r = run_folio("ls", "--where", "lieu=café", cwd=root, env=C_LOCALE)
    assert r.returncode == 0 and r.stdout.split() == ["café.md"], (r.stdout, r.stderr)
