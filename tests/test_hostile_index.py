"""A `.folio/` folio cannot vouch for, and one it cannot write (issue 15, items 1 and 2).

folio writes, truncates, renames and deletes only names it makes itself inside `.folio/`, and
never through a symbolic link: a link inside `.folio/` (git stores them; a clone can carry one) is
refused with a sentence naming it and the fix, whatever it points to stays byte for byte as it
was. `.folio` itself may be a link to a directory (a cache kept elsewhere): folio works inside it
and touches nothing there but its own names, `--rebuild` included.

A read-only index (a read-only mount, another user's corpus) is read, not called damaged: queries
answer with `stale` where files moved and one notice saying why they were not refreshed; `folio
index` says in one sentence that it cannot write there. Root writes through any chmod, so these
tests make paths read-only with a read-only bind mount in a private mount namespace (`unshare -m`);
as another user plain chmod does it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import folio_command, run_folio, write_tree

DOCS = {
    "a.md": "# Alpha\n\nThe lighthouse keeper trims the wick.\n\n## Storms\n\nWaves break on the rocks.\n",
    "b.md": "# Beta\n\nA kettle of tea on the stove.\n",
    "sub/c.md": "# Gamma\n\nOwls hunt at night in the barn.\n",
}


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under root (not following links) with what it holds: what must not change."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def one_sentence(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture
def indexed(tmp_path, fake_server):
    """A corpus indexed with vectors, and a neighbour directory full of things that are not folio's."""
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    elsewhere = tmp_path / "elsewhere"
    write_tree(elsewhere, {"keep1/notes.txt": "mine\n", "keep2/deep/more.txt": "also mine\n",
                           "important.db": os.urandom(300_000), "plain.txt": "x\n"})
    return root, elsewhere


def _edit(root: Path) -> None:
    with open(root / "a.md", "a") as fh:
        fh.write("\n## Fog\n\nThe horn sounds twice in the fog.\n")


# ---------------------------------------------------------------- item 1: links and foreign files


def test_a_linked_lex_dir_is_refused_and_what_it_points_to_is_untouched(indexed):
    root, elsewhere = indexed
    before = tree_digest(elsewhere)
    shutil.rmtree(root / ".folio" / "lex")
    os.symlink("../../elsewhere", root / ".folio" / "lex")  # relative, as git stores it
    _edit(root)
    for args in (["index"], ["query", "lighthouse", "--lexical"], ["status"]):
        line = one_sentence(run_folio(*args, cwd=root), ".folio/lex", "symbolic link", "rm ", "--rebuild")
        assert "damaged" not in line
        assert tree_digest(elsewhere) == before, args
    # --rebuild removes the link itself, never what it points to, and builds anew
    r = run_folio("index", "--rebuild", cwd=root)
    assert r.returncode == 0, r.stderr
    assert tree_digest(elsewhere) == before
    assert (root / ".folio" / "lex").is_dir() and not (root / ".folio" / "lex").is_symlink()
    r = run_folio("query", "horn in the fog", "--lexical", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["path"] == "a.md", r.stderr


LINKS = {  # a name folio writes or removes -> what the link points at (relative to .folio/)
    "vectors.1.f32": "../../elsewhere/important.db",   # the matrix a fresh build writes
    "vectors.2.f32": "../../elsewhere/important.db",   # the next generation's name
    "index.db-wal": "../../elsewhere/important.db",    # SQLite writes it
    "write.lock": "../../elsewhere/created-by-folio",  # O_CREAT would make it out there
    "lex/SEGMENT": "../../../elsewhere/keep1",          # a segment dir the next merge removes
}


@pytest.mark.parametrize("name", list(LINKS))
def test_a_link_at_any_name_folio_writes_is_refused_and_its_target_kept(indexed, name):
    root, elsewhere = indexed
    d = root / ".folio"
    if name == "lex/SEGMENT":
        seg = next(p for p in (d / "lex").iterdir())
        shutil.rmtree(seg)
        name = f"lex/{seg.name}"
    (d / name).unlink(missing_ok=True)
    os.symlink(LINKS[name if not name.startswith("lex/") else "lex/SEGMENT"], d / name)
    before = tree_digest(elsewhere)
    _edit(root)
    r = run_folio("index", cwd=root)
    one_sentence(r, f".folio/{name}", "symbolic link", f"rm {root / '.folio' / name}")
    r2 = run_folio("query", "horn in the fog", cwd=root)  # its refresh writes too
    assert tree_digest(elsewhere) == before, (r.stderr, r2.stderr)
    assert "Traceback" not in r2.stderr
    assert not (elsewhere / "created-by-folio").exists()
    # the sentence's fix works
    (d / name).unlink()
    r = run_folio("index", "--rebuild", cwd=root)
    assert r.returncode == 0, r.stderr
    assert tree_digest(elsewhere) == before


def test_a_folio_dir_linked_to_a_cache_is_used_and_only_folios_names_are_touched(tmp_path, fake_server):
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    cache = write_tree(tmp_path / "cache", {"precious.txt": "not folio's\n", "sub/x.bin": b"\x00\x01",
                                            "vectors-backup.f32": b"1234", "index.db.bak": b"old", "lexicon/a": "b"})
    foreign = tree_digest(cache)
    os.symlink(cache, root / ".folio")
    for args in (["index", "--endpoint", srv.url], ["index"], ["index", "--rebuild", "--endpoint", srv.url]):
        r = run_folio(*args, cwd=root)
        assert r.returncode == 0, (args, r.stderr)
        now = tree_digest(cache)
        assert {k: now.get(k) for k in foreign} == foreign, args
        assert (cache / "index.db").is_file() and (cache / "lex").is_dir()
    _edit(root)
    r = run_folio("query", "horn in the fog", "--json", cwd=root)  # refreshes through the link
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["path"] == "a.md"
    for args in (["status"], ["query", "owls", "--lexical"], ["show", "b.md:1-3"]):
        assert run_folio(*args, cwd=root).returncode == 0, args
    # compaction and segment merges through the link remove only folio's names too
    for i in range(10):
        (root / "a.md").write_text(f"# Alpha {i}\n\n" + "\n\n".join(f"## S{j}\n\nround {i} text {j}" for j in range(40)))
        assert run_folio("index", cwd=root).returncode == 0
    now = tree_digest(cache)
    assert {k: now.get(k) for k in foreign} == foreign
    assert root.joinpath(".folio").is_symlink()


@pytest.mark.parametrize("kind", ["file", "dangling link", "link to a file"])
def test_a_folio_that_is_not_a_directory_gets_one_sentence(tmp_path, kind):
    root = write_tree(tmp_path / "repo", DOCS)
    target = tmp_path / "target"
    if kind == "file":
        (root / ".folio").write_text("not a directory\n")
    elif kind == "dangling link":
        os.symlink(target, root / ".folio")
    else:
        target.write_text("a file\n")
        os.symlink(target, root / ".folio")
    before = target.read_bytes() if target.exists() else None
    for args in (["index", str(root), "--endpoint", "http://127.0.0.1:9/v1/embeddings"], ["index", str(root), "--rebuild"]):
        one_sentence(run_folio(*args, cwd=tmp_path), str(root / ".folio"))
    assert (target.read_bytes() if target.exists() else None) == before
    if kind == "file":
        assert (root / ".folio").read_text() == "not a directory\n"


def test_segment_names_from_the_database_never_reach_outside_lex(tmp_path, fake_server):
    """index.db is data from wherever the clone came from: a segment it names is a folio name or
    the index is refused, so no compaction removes `../../../victim`."""
    srv = fake_server(dim=16)
    big = "# Big\n\n" + "\n\n".join(f"## Part {j}\n\npart {j} of the big file" for j in range(120))
    root = write_tree(tmp_path / "repo", {**DOCS, "big.md": big})
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    d = root / ".folio"
    seg = next((d / "lex").iterdir())
    victim = tmp_path / "victim"
    shutil.copytree(seg, victim)  # a whole segment's arrays: every check of its contents passes
    (victim / "mine.txt").write_text("the user's own file\n")
    with sqlite3.connect(d / "index.db") as c:
        c.execute("UPDATE lexseg SET name = ? WHERE name = ?", ("../../../victim", seg.name))
    shutil.rmtree(seg)
    before = tree_digest(victim)
    (root / "big.md").unlink()  # 120 dead rows against 4 live: the run compacts, removing old segments
    r = run_folio("index", cwd=root)
    assert tree_digest(victim) == before, r.stderr
    one_sentence(r, "../../../victim", "--rebuild")
    one_sentence(run_folio("query", "owls", "--lexical", cwd=root), "../../../victim")
    assert run_folio("index", "--rebuild", cwd=root).returncode == 0
    assert tree_digest(victim) == before


# ---------------------------------------------------------------- item 2: read-only indexes


_PROBE: list[bool] = []


def _ro_mount_works(tmp: Path) -> bool:
    if not _PROBE:
        probe = tmp / "ro-probe"
        probe.mkdir()
        r = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1"'
                            ' && ! touch "$1/x" 2>/dev/null', "sh", str(probe)], capture_output=True)
        _PROBE.append(r.returncode == 0 and not (probe / "x").exists())
    return _PROBE[0]


@contextlib.contextmanager
def read_only(tmp: Path, *paths: Path):
    """A runner for folio that sees `paths` (directories or files) read-only, even as root."""
    if os.geteuid() != 0:
        modes = {}
        for p in paths:
            for q in [p, *(p.rglob("*") if p.is_dir() else [])]:
                if not q.is_symlink():
                    modes[q] = q.stat().st_mode
                    q.chmod(stat.S_IMODE(modes[q]) & ~0o222)
        try:
            yield run_folio
        finally:
            for q, m in modes.items():
                q.chmod(stat.S_IMODE(m))
        return
    if not shutil.which("unshare") or not _ro_mount_works(tmp):
        pytest.skip("running as root, and no private mount namespace (unshare -m) for a read-only bind mount: "
                    "nothing here can deny root a write")
    script = "".join(f'mount --bind "${i + 1}" "${i + 1}" && mount -o remount,bind,ro "${i + 1}" "${i + 1}" && '
                     for i in range(len(paths))) + f'shift {len(paths)} && exec "$@"'

    def run(*args, cwd, env=None):
        full = dict(os.environ)
        for k, v in (env or {}).items():
            full[k] = str(v)
        return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *map(str, paths), *folio_command(),
                               *map(str, args)], cwd=str(cwd), env=full, capture_output=True, text=True, timeout=120)

    yield run


def _answers_read_only(run, root: Path) -> None:
    r = run("status", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"] == 3 and "damaged" not in r.stderr
    for extra in ([], ["--lexical"]):
        r = run("query", "lighthouse keeper wick", "--json", *extra, cwd=root)
        assert r.returncode == 0, (extra, r.stderr)
        assert "damaged" not in r.stderr
        rows = json.loads(r.stdout)["results"]
        assert {row["path"]: row["freshness"] for row in rows}.get("a.md") == "stale", rows
        notices = [ln for ln in r.stderr.splitlines() if "not writable" in ln]
        assert len(notices) == 1 and str(root / ".folio") in notices[0], r.stderr
    r = run("query", "owls", "--lexical", "-l", "1", cwd=root)  # nothing stale among the rows: nothing to say
    assert r.returncode == 0 and "sub/c.md" in r.stdout and "not writable" not in r.stderr, r.stderr
    r = run("show", "a.md:1-3", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["freshness"] == "stale", r.stderr
    one_sentence(run("index", cwd=root), "not writable", str(root / ".folio"))
    one_sentence(run("index", "--rebuild", cwd=root), "not writable", str(root / ".folio"))


def test_an_index_on_a_read_only_mount_is_read_not_called_damaged(tmp_path, fake_server):
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    assert not (root / ".folio" / "index.db-wal").exists()  # checkpointed: no -wal, no -shm to read with
    _edit(root)
    before = tree_digest(root)
    with read_only(tmp_path, root) as run:
        _answers_read_only(run, root)
    assert tree_digest(root) == before


def test_an_index_whose_database_alone_is_read_only_is_read(tmp_path, fake_server):
    """Another user's index in a directory anyone may write: SQLite makes its -shm, folio writes nothing."""
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    _edit(root)
    db = root / ".folio" / "index.db"
    before = db.read_bytes()
    with read_only(tmp_path, db) as run:
        _answers_read_only(run, root)
    assert db.read_bytes() == before


def test_a_read_only_index_with_a_live_writers_log_is_read_with_it(tmp_path, fake_server):
    """A writer holding the database open keeps its -wal and -shm: a read-only reader reads through them."""
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    _edit(root)
    holder = sqlite3.connect(root / ".folio" / "index.db", isolation_level=None)
    try:
        holder.execute("PRAGMA wal_autocheckpoint=0")
        holder.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('note', 'x')")  # a commit left in the -wal
        assert (root / ".folio" / "index.db-wal").stat().st_size > 0
        with read_only(tmp_path, root) as run:
            _answers_read_only(run, root)
    finally:
        holder.close()


def test_a_read_only_corpus_without_an_index_gets_one_sentence(tmp_path):
    root = write_tree(tmp_path / "repo", DOCS)
    with read_only(tmp_path, root) as run:
        for args in (["index"], ["index", "--endpoint", "http://127.0.0.1:9/v1/embeddings"], ["index", str(root)]):
            one_sentence(run(*args, cwd=root), "not writable", str(root))
    assert not (root / ".folio").exists()


def _as_nobody() -> list[str] | None:
    """A command prefix running folio as the unprivileged user `nobody`, or None where none works
    (no setpriv, or nobody cannot run this interpreter and its packages)."""
    import site
    import sys

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    path = os.pathsep.join([*site.getsitepackages(), str(Path(__file__).resolve().parents[1])])
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, system):
        cmd = [*drop, "env", f"PYTHONPATH={path}", python]
        r = subprocess.run([*cmd, "-c", "import numpy, httpx, folio.cli"], capture_output=True)
        if r.returncode == 0:
            return [*cmd, "-m", "folio"]
    return None


@pytest.mark.parametrize("layout", ["directory 555, files 444", "directory 777, files 444"])
def test_another_users_index_is_read_by_an_unprivileged_user(fake_server, layout):
    """The realistic shared corpus: built by its owner, read by someone who may not write it
    (as root, run as `nobody`; other users run the chmod branch of read_only above)."""
    prefix = _as_nobody()
    if prefix is None:
        pytest.skip("needs root with setpriv and an interpreter the user nobody can run (as any other user the "
                    "read_only tests above already run unprivileged)")
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="folio-shared-"))
    try:
        base.chmod(0o755)
        srv = fake_server(dim=16)
        root = write_tree(base / "repo", DOCS)
        assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
        _edit(root)
        home = base / "home"
        home.mkdir(mode=0o777)
        home.chmod(0o777)
        d = root / ".folio"
        for p in d.rglob("*"):
            p.chmod(0o555 if p.is_dir() else 0o444)
        d.chmod(0o555 if layout.startswith("directory 555") else 0o777)
        for p in [root, *(p for p in root.rglob("*") if ".folio" not in p.parts)]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        before = {k: v for k, v in tree_digest(root).items() if "-wal" not in k and "-shm" not in k}

        def run(*args, cwd):
            env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
            return subprocess.run([*prefix, *map(str, args)], cwd=str(cwd), env=env, capture_output=True, text=True,
                                  timeout=120)

        _answers_read_only(run, root)
        after = {k: v for k, v in tree_digest(root).items() if "-wal" not in k and "-shm" not in k}
        assert after == before
    finally:
        for p in [base, *base.rglob("*")]:
            with contextlib.suppress(OSError):
                p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(base, ignore_errors=True)


def test_config_set_never_writes_through_a_link_a_clone_planted(tmp_path):
    """`folio config set --project` writes folio.yaml through a temporary name beside it: a link
    there (`folio.yaml.tmp -> ../victim.txt`) is removed as a link, never written through; the user
    config is owner-only from its first byte."""
    root = write_tree(tmp_path / "repo", DOCS)
    victim = write_tree(tmp_path, {"victim.txt": "the user's own file\n"}) / "victim.txt"
    os.symlink("../victim.txt", root / "folio.yaml.tmp")
    r = run_folio("config", "set", "--project", "max_chars", "4000", cwd=root)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "the user's own file\n"
    assert "max_chars: 4000" in (root / "folio.yaml").read_text() and not (root / "folio.yaml.tmp").exists()
    home = Path(os.environ["XDG_CONFIG_HOME"]) / "folio"
    home.mkdir(parents=True)
    os.symlink(victim, home / "config.yaml.tmp")
    r = run_folio("config", "set", "timeout", "30", cwd=root)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "the user's own file\n"
    assert stat.S_IMODE((home / "config.yaml").stat().st_mode) == 0o600


# ---------------------------------------------------------------- issue 30: files that are not folio's


def test_another_programs_index_db_where_folio_points_is_never_written_or_removed(tmp_path, fake_server):
    """`.folio` linked to a cache directory that holds another program's SQLite `index.db`: every
    command refuses it in one sentence, `--rebuild` included, and its bytes stay as they were."""
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    cache = tmp_path / "cache"
    cache.mkdir()
    with sqlite3.connect(cache / "index.db") as db:
        db.execute("CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO photos(name) VALUES ('cat.jpg')")
    db.close()
    os.symlink(cache, root / ".folio")
    before = (cache / "index.db").read_bytes()
    for args in (["index", "--endpoint", srv.url], ["index", "--rebuild", "--endpoint", srv.url], ["status"],
                 ["query", "lighthouse", "--mode", "lexical"], ["show", "a.md:1-3"]):
        one_sentence(run_folio(*args, cwd=root), ".folio/index.db is not an index folio made",
                     "another program's SQLite database (tables photos)")
        assert (cache / "index.db").read_bytes() == before, args
    assert not (cache / "index.db-wal").exists() and not (cache / "lex").exists()
    # moved out of the way, as the sentence says: folio makes its own there
    (cache / "index.db").rename(tmp_path / "photos.db")
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    assert run_folio("query", "lighthouse", "--mode", "lexical", cwd=root).returncode == 0


def test_a_file_named_like_a_matrix_survives_unless_folios_index_names_it(tmp_path, fake_server):
    """In a cache directory `.folio` links to, files named like folio's matrix generations
    (`vectors.f32`, `vectors.2.f32`, `vectors.9.f32`) are the user's: no run, recovery, new vector
    space, compaction or `--rebuild` removes or writes them; a generation whose name is taken goes to
    the next free one."""
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    cache = write_tree(tmp_path / "cache", {"vectors.f32": "mine 0\n", "vectors.2.f32": "mine 2\n",
                                            "vectors.9.f32": "mine 9\n"})
    os.symlink(cache, root / ".folio")
    mine = tree_digest(cache)

    def kept():
        now = tree_digest(cache)
        assert {k: now.get(k) for k in mine} == mine

    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0  # generation 1
    kept()
    srv.restart(space="b")  # another model behind the same URL: a new vector space, generation 3
    r = run_folio("index", cwd=root)
    assert r.returncode == 0 and "re-embedding every section" in r.stderr, r.stderr
    kept()
    assert sorted(p.name for p in cache.glob("vectors*.f32")) == ["vectors.2.f32", "vectors.3.f32", "vectors.9.f32",
                                                                 "vectors.f32"]
    for i in range(8):  # dead rows pile up until the run compacts into a new generation
        (root / "a.md").write_text(f"# Alpha {i}\n\n" + "\n\n".join(f"## S{j}\n\nround {i} text {j}" for j in range(40)))
        assert run_folio("index", cwd=root).returncode == 0
        kept()
    assert run_folio("index", "--rebuild", "--endpoint", srv.url, cwd=root).returncode == 0
    kept()
    r = run_folio("query", "owls hunt at night", "--mode", "semantic", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["path"] == "sub/c.md", r.stderr
    # status counts only folio's own files
    size = json.loads(run_folio("status", "--json", cwd=root).stdout)["bytes"]
    everything = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert size == everything - sum(len(v) for v in ("mine 0\n", "mine 2\n", "mine 9\n"))


def test_rebuild_over_a_damaged_index_in_a_linked_directory_leaves_what_it_cannot_name(tmp_path, fake_server):
    """An `index.db` too damaged to read names no file: in a directory `.folio` links to, `--rebuild`
    leaves the matrix files there and says which (one of them may be the user's)."""
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "repo", DOCS)
    cache = write_tree(tmp_path / "cache", {"vectors.9.f32": "mine\n"})
    os.symlink(cache, root / ".folio")
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    (cache / "index.db").write_bytes(os.urandom(8192))
    r = run_folio("index", "--rebuild", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    [notice] = [ln for ln in r.stderr.splitlines() if "too damaged to say which files it names" in ln]
    assert "vectors.1.f32, vectors.9.f32" in notice and "remove them yourself" in notice
    assert (cache / "vectors.9.f32").read_text() == "mine\n"
    assert run_folio("query", "owls", "--mode", "semantic", cwd=root).returncode == 0
