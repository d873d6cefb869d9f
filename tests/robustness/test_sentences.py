"""Failures that used to end in a traceback get one sentence with the fix (issue 15, item 7): a
full disk while indexing (what was committed stays queryable, and the next run resumes), and an
index.db edited by hand (a non-numeric `meta.dim`, bad JSON in a frontmatter or a heading trail)."""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import uuid

import pytest
from helpers import folio_command, run_folio, write_tree

DOCS = {f"n{i:02}.md": f"# Note {i}\n\n" + "\n\n".join(f"## Item {j}\n\nabout apples{i} and pears{j}" for j in range(30))
        for i in range(60)}
SECTIONS = 60 * 31


def _limit_file_size(limit: int):
    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing
    return pre


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (needs root and mount), else None."""
    mnt = tmp_path / f"mnt-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        yield None
        return
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("how", ["full disk", "file size limit"])
def test_a_full_disk_gives_a_sentence_and_keeps_what_was_committed(tmp_path, fake_server, small_disk, how):
    srv = fake_server(dim=256)  # 1 KiB a row: 1,860 rows outgrow 2 MiB, or the 1 MiB size limit
    if how == "full disk":
        if small_disk is None:
            pytest.skip("cannot mount a tmpfs here (needs root)")
        root, pre = small_disk / "c", None
    else:
        root, pre = tmp_path / "c", _limit_file_size(1 << 20)
    write_tree(root, DOCS)
    r = subprocess.run([*folio_command(), "index", "--endpoint", srv.url], cwd=root, capture_output=True,
                       text=True, preexec_fn=pre)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("folio: ")
    assert ("disk full" if how == "full disk" else "ulimit -f") in line
    assert str(root / ".folio") in line and "intact up to its last commit" in line
    # what was committed answers, queries read it, and freeing room lets the next run resume
    st = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert 0 < st["sections"] < SECTIONS and st["embedded"] == st["sections"]
    q = run_folio("query", "apples3 pears4", "--json", cwd=root)
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout)["results"][0]["ref"] == "n03.md:19-21"
    if how == "full disk":
        subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    st = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (st["files"], st["sections"], st["embedded"], st["changed"]) == (60, SECTIONS, SECTIONS, 0)


EDITS = {
    "meta.dim not a number": "UPDATE meta SET value = 'abc' WHERE key = 'dim'",
    "frontmatter not JSON": "UPDATE files SET frontmatter = '{bad' WHERE path = 'a.md'",
    "trail not JSON": "UPDATE records SET trail = '[bad'",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_hand_edited_index_names_the_rebuild(tmp_path, fake_server, edit):
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "c", {"a.md": "---\nid: a\n---\n# A\n\n## B\n\nlighthouse keeper\n",
                                       "b.md": "# C\n\nkettle\n"})
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        c.execute(EDITS[edit])
    c.close()
    for args in (["query", "lighthouse"], ["query", "lighthouse", "--lexical"], ["query", "x", "--where", "id=a"],
                 ["status"], ["status", "--json"]):
        r = run_folio(*args, cwd=root)
        if edit == "trail not JSON" and args[0] == "status":
            assert r.returncode == 0, r.stderr  # status reads no trail
            continue
        assert r.returncode == 1, (args, r.stderr)
        assert "Traceback" not in r.stderr
        assert r.stderr.startswith("folio: ") and "damaged" in r.stderr
        assert r.stderr.rstrip().endswith("run `folio index --rebuild` to build it anew"), r.stderr
    r = run_folio("index", "--rebuild", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    r = run_folio("query", "lighthouse", "--paths-only", "-l", "1", cwd=root)
    assert r.returncode == 0 and r.stdout.strip() == "a.md:6-8", r.stderr
