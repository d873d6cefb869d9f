"""A damaged `.folio/` (truncated, overwritten or missing parts of index.db, the matrix, the lexical
segments) gives one sentence naming the fix, `folio index --rebuild`, for query, status and index —
never a traceback — and the rebuild brings back an index that answers."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

DOCS = {f"n{i:02}.md": f"# Note {i}\n\n" + "\n\n".join(f"## Item {j}\n\nabout apples{i} and pears{j}" for j in range(15))
        for i in range(30)}
SECTIONS = 30 * 16
FIX = "run `folio index --rebuild` to build it anew"


def _matrix(d):
    return next(d.glob("vectors*.f32"))


def _overwrite(path, start, length):
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(os.urandom(length))


def _npys(d):
    return sorted((d / "lex").rglob("*.npy"))


DAMAGE = {
    "db truncated to half": lambda d: os.truncate(d / "index.db", os.path.getsize(d / "index.db") // 2),
    "db truncated to 100 bytes": lambda d: os.truncate(d / "index.db", 100),
    "db overwritten": lambda d: (d / "index.db").write_bytes(os.urandom(os.path.getsize(d / "index.db"))),
    "db header overwritten": lambda d: _overwrite(d / "index.db", 16, 84),
    "db second page overwritten": lambda d: _overwrite(d / "index.db", 4096, 4096),
    "db last page overwritten": lambda d: _overwrite(d / "index.db", os.path.getsize(d / "index.db") - 4096, 4096),
    "matrix truncated": lambda d: os.truncate(_matrix(d), os.path.getsize(_matrix(d)) // 2),
    "matrix emptied": lambda d: os.truncate(_matrix(d), 0),
    "matrix deleted": lambda d: _matrix(d).unlink(),
    "lexical segment deleted": lambda d: shutil.rmtree(d / "lex"),
    "lexical array deleted": lambda d: _npys(d)[0].unlink(),
    "lexical arrays overwritten": lambda d: [p.write_bytes(os.urandom(64)) for p in _npys(d)],
    "lexical arrays truncated": lambda d: [os.truncate(p, os.path.getsize(p) // 2) for p in _npys(d)],
}
# What a command may legitimately still do with the damage: the lexical plane needs no matrix.
# (A semantic `query --json` reads the lexical plane too, for its confidence block.)
STILL_WORKS = {("matrix truncated", "lexical"), ("matrix emptied", "lexical"), ("matrix deleted", "lexical")}
# SQLite keeps no checksums: a page no command reads (the last page may hold an index the command
# does not use) goes unnoticed until one does. Either outcome is fine there, a traceback is not.
EITHER = {"db last page overwritten"}
COMMANDS = {
    "query": ["query", "apples3 pears4", "--json"],
    "lexical": ["query", "apples3 pears4", "--lexical", "--json"],
    "status": ["status", "--json"],
    "index": ["index"],
}


@pytest.fixture
def indexed(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=64)
    root = write_tree(tmp_path / "c", DOCS)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    return root, srv


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_gives_the_rebuild_sentence_and_the_rebuild_answers(indexed, run_folio, damage):
    root, srv = indexed
    DAMAGE[damage](root / ".folio")
    for name, args in COMMANDS.items():
        r = run_folio(*args, cwd=root)
        assert "Traceback" not in r.stderr, (damage, name, r.stderr)
        if (damage, name) in STILL_WORKS or (damage in EITHER and r.returncode == 0):
            assert r.returncode == 0, (damage, name, r.stderr)
            continue
        assert r.returncode == 1, (damage, name, r.returncode, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("folio: the index"), (damage, name, r.stderr)
        assert "is damaged" in lines[0] and lines[0].endswith(FIX), (damage, name, lines[0])
    # The endpoint came from a flag, and the damaged index cannot say which: name it again.
    r = run_folio("index", "--rebuild", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["sections"] == s["embedded"] == SECTIONS
    # semantic: the row expected is one section ranked by meaning (hybrid merges its alike neighbours)
    top = json.loads(run_folio("query", "apples3 pears4", "--json", "-l", "1", "--mode", "semantic",
                               cwd=root).stdout)["results"][0]
    assert (top["path"], top["start"]) == ("n03.md", 3 + 4 * 4)


def test_rows_overwritten_with_non_numbers_are_caught_by_the_query(indexed, run_folio):
    # Only a full scan could find this in status or index; the query's own product shows it for free.
    root, _srv = indexed
    m = _matrix(root / ".folio")
    m.write_bytes(b"\xff" * os.path.getsize(m))
    r = run_folio("query", "apples3 pears4", cwd=root)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "holds rows that are not numbers" in r.stderr and r.stderr.strip().endswith(FIX)
    assert run_folio("query", "apples3 pears4", "--lexical", cwd=root).returncode == 0


def test_an_index_from_another_format_names_the_rebuild(indexed, run_folio):
    import sqlite3

    root, _srv = indexed
    with sqlite3.connect(root / ".folio" / "index.db") as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'format'")
    for args in COMMANDS.values():
        r = run_folio(*args, cwd=root)
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert "format 99" in r.stderr and "folio index --rebuild" in r.stderr
    # --rebuild is the way out even here: it does not read what it discards
    assert run_folio("index", "--rebuild", cwd=root).returncode == 0
    assert run_folio("status", cwd=root).returncode == 0


# ------------------------------------------------------------- values edited by hand (issue 30)

NOTES = {f"n{i}.md": f"---\nlevel: {i}\nid: note{i}\ntags: [a]\n---\n# Note {i}\n\nabout apples{i}\n\n## More\n\npears {i}\n"
         for i in range(1, 4)}
# An edit of index.db's values (SQL) -> the commands that read the value, each of which must say
# "damaged" with the fix; every other command may answer, and none may show a traceback.
EDITS = {
    "frontmatter a JSON list": ("UPDATE files SET frontmatter = '[1,2]' WHERE path = 'n1.md'",
                                {"status", "status --key", "query", "query --where", "join", "index"}),
    "frontmatter JSON null": ("UPDATE files SET frontmatter = 'null' WHERE path = 'n1.md'",
                              {"status", "query", "query --where", "index"}),
    "frontmatter a blob": ("UPDATE files SET frontmatter = X'7b7d' WHERE path = 'n1.md'",
                           {"status", "query --where", "join", "index"}),
    "records.start not a number": ("UPDATE records SET start = 'abc'", {"query", "query --where", "lexical"}),
    "records.trail a list of numbers": ("UPDATE records SET trail = '[1,2]'", {"query", "lexical"}),
    "records.file_id not a number": ("UPDATE records SET file_id = 'abc' WHERE slot = 0", {"query", "lexical"}),
    "files.size not a number": ("UPDATE files SET size = 'big'", {"status", "show", "index", "query"}),
    "files.path a blob": ("UPDATE files SET path = X'6e312e6d64' WHERE path = 'n1.md'", {"status", "query", "index"}),
    "meta roles a JSON list": ("UPDATE meta SET value = '[1]' WHERE key = 'roles'", {"status", "query", "index"}),
    "meta fingerprint not hex": ("UPDATE meta SET value = 'zz' WHERE key = 'fingerprint'", {"query"}),
    "meta endpoint a blob": ("UPDATE meta SET value = X'41' WHERE key = 'endpoint'",
                             {"status", "query", "lexical", "show", "index"}),
}
HAND_COMMANDS = {
    "status": ["status", "--json"],
    "status --key": ["status", "--key", "level"],
    "query": ["query", "apples1", "--mode", "semantic", "--json"],
    "lexical": ["query", "apples1", "--mode", "lexical"],
    "query --where": ["query", "apples1", "--mode", "lexical", "--where", "level=1"],
    "join": ["query", "apples1", "--mode", "lexical", "--exclude-pointed-by", "tags"],
    "show": ["show", "n1.md:1-5"],
    "index": ["index"],
}


@pytest.mark.parametrize("aged", [False, True], ids=["just written", "written 20 s before"])
@pytest.mark.parametrize("edit", list(EDITS))
def test_a_value_edited_by_hand_is_damage_with_the_fix_wherever_it_is_read(tmp_path, write_tree, fake_server,
                                                                           run_folio, edit, aged):
    import sqlite3

    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "c", NOTES)
    if aged:  # stamped clean by the first run: `index` keeps the clean set from the files table, unchecked
        past = time.time() - 20
        for name in NOTES:
            os.utime(root / name, (past, past))
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    sql, readers = EDITS[edit]
    with sqlite3.connect(root / ".folio" / "index.db") as db:
        db.execute(sql)
    for name, args in HAND_COMMANDS.items():
        r = run_folio(*args, cwd=root)
        assert "Traceback" not in r.stderr, (edit, name, r.stderr)
        if name not in readers:
            continue
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1, (edit, name, r.returncode, r.stderr)
        assert lines[0].startswith("folio: the index") and "is damaged (" in lines[0], (edit, name, lines[0])
        assert lines[0].endswith(FIX), (edit, name, lines[0])
    # the fix works
    r = run_folio("index", "--rebuild", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    r = run_folio("query", "apples1", "--mode", "lexical", "--where", "level=1", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["path"] == "n1.md", r.stderr
