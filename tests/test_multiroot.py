"""Several corpora at once (`--root A --root B`, `folio mcp --root A --root B`): one corpus's trouble
(another writer holding its index, ...) must neither take the others down nor go unnamed. Through
the real CLI and the MCP SDK's client, against the fake embeddings server."""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio
import pytest
from helpers import indexed
from helpers_mcp import HttpServer, stdio, text_of, until

pytest.importorskip("mcp.client")

A = {"README.md": "# Alpha\n\nRetries back off exponentially in alpha.\n",
     "docs/a.md": "# Alpha doc\n\n## Retries\n\nThe alpha client retries three times.\n"}
B = {"README.md": "# Beta\n\nRetries in beta use a fixed delay.\n",
     "docs/a.md": "# Beta doc\n\n## Retries\n\nThe beta client never retries.\n"}


@pytest.fixture
def two(tmp_path, fake_server, run_folio):
    """Two indexed corpora with the same relative paths, on one fake server."""
    srv = fake_server()
    return indexed(tmp_path / "A", A, srv, run_folio), indexed(tmp_path / "B", B, srv, run_folio)


@contextlib.contextmanager
def writer_holding(root: Path):
    """Another folio's write lock on `root`'s index (as a long `folio index` holds it)."""
    from folio.store import acquire_lock

    lock = acquire_lock(root, wait=False)
    try:
        yield
    finally:
        lock.release()


def paths_of(result) -> list[str]:
    return [(Path(r["root"]).name, r["path"]) for r in result.structured_content["results"]]


def test_the_index_tool_indexes_every_corpus_another_writer_does_not_hold(two):
    """The index tool over two corpora, one held by another writer: it stopped at that one, and the
    other's new file was never indexed."""
    a, b = two
    (b / "new.md").write_text("# Wombat\n\nWombatword lives in beta.\n")

    async def body():
        async with stdio(a, "--root", str(a), "--root", str(b), env={"FOLIO_WATCH": "off"}) as c:
            with writer_holding(a):
                got = await c.call_tool("index", {})
            assert got.is_error  # one corpus could not be indexed: said, naming it
            assert f"another folio is writing the index at {a}" in text_of(got)
            found = await c.call_tool("query", {"query": "wombatword", "mode": "lexical", "no_refresh": True})
            assert ("B", "new.md") in paths_of(found), text_of(found)

    anyio.run(body)


def test_a_live_index_over_two_corpora_goes_on_while_another_writer_holds_one(two):
    """`folio mcp` following two corpora: a change in one whose index another writer held (a long
    `folio index --rebuild`) stopped every other corpus's changes from being indexed until it ended."""
    a, b = two

    async def body():
        async with stdio(a, "--root", str(a), "--root", str(b), env={"FOLIO_WATCH": "events"}) as c:
            async def lexical(q):
                got = await c.call_tool("query", {"query": q, "mode": "lexical", "no_refresh": True})
                assert not got.is_error, text_of(got)
                return paths_of(got)

            await anyio.sleep(1.5)  # its catch-up runs are done
            with writer_holding(a):
                (a / "held.md").write_text("# Quokka\n\nQuokkaword lives in alpha.\n")
                await anyio.sleep(1)  # the burst for A meets the lock
                (b / "free.md").write_text("# Wombat\n\nWombatword lives in beta.\n")

                async def b_indexed():
                    return ("B", "free.md") in await lexical("wombatword")
                await until(b_indexed, 20, "B's new file indexed while A's index is held by another writer")
            # the writer gone, A's change is indexed too, with no further change to it

            async def a_indexed():
                return ("A", "held.md") in await lexical("quokkaword")
            await until(a_indexed, 20, "A's held change indexed once the writer let go")

    anyio.run(body)


def test_the_live_index_log_names_the_corpus_of_each_line_when_it_follows_several(two, run_folio):
    """`folio mcp --root A --root B` logged `12:00:00  new.md: 1 new; ...` for each corpus alike."""
    import json
    import time

    a, b = two
    srv = HttpServer(a, "--root", str(a), "--root", str(b), env={"FOLIO_WATCH": "events"})

    def until_both(word: str) -> None:
        end = time.monotonic() + 60
        while True:
            r = run_folio("query", word, "--mode", "lexical", "--no-refresh", "--json", "--root", str(a),
                          "--root", str(b), cwd=a)
            rows = json.loads(r.stdout)["results"] if r.returncode == 0 else []
            if {(str(a), "new.md"), (str(b), "new.md")} <= {(row["root"], row["path"]) for row in rows}:
                return
            assert time.monotonic() < end, f"{word!r} not indexed in both corpora within 60 s: {r.stdout}"
            time.sleep(0.2)

    try:
        srv.wait_ready()
        (a / "new.md").write_text("# New\n\nNew in alpha, zebra.\n")
        (b / "new.md").write_text("# New\n\nNew in beta, zebra.\n")
        until_both("zebra")  # indexed: by the server's catch-up run when it was still walking, else live
        # written again once the catch-up run has surely passed them: the live index logs these
        (a / "new.md").write_text("# New\n\nNew in alpha, quagga.\n")
        (b / "new.md").write_text("# New\n\nNew in beta, quagga.\n")
        until_both("quagga")
    finally:
        _rc, _out, err = srv.stop()
    lines = [s for s in err.splitlines() if "new.md" in s]
    assert any(f"new.md in {a}:" in s for s in lines), err
    assert any(f"new.md in {b}:" in s for s in lines), err


def _moved_lines(root: Path, rel: str) -> None:
    """Lines inserted above the file's sections, their text unchanged: no vector needed to re-index."""
    p = root / rel
    p.write_text("\n\n" + p.read_text())


def test_a_refresh_another_writer_holds_back_names_that_index_and_not_the_server(two, run_folio, fake_server):
    """`folio ls` (and a query whose server did not answer) over a root another folio was writing
    said its changed files `need the embeddings server, which this command does not ask`, of files
    with only their lines moved (no server needed): the writer held them back, and its root went
    unnamed; a query's own refresh said `another folio is updating the index` without naming which."""
    a, b = two
    _moved_lines(a, "docs/a.md")
    _moved_lines(b, "docs/a.md")
    with writer_holding(b):
        r = run_folio("ls", "--root", str(a), "--root", str(b), cwd=a)
        assert r.returncode == 0, r.stderr
        assert f"another folio is updating the index at {b / '.folio'}" in r.stderr, r.stderr
        assert "need the embeddings server" not in r.stderr, r.stderr
        assert "docs/a.md (stale)" in r.stdout and r.stdout.count("(stale)") == 1, r.stdout  # A's moved lines re-indexed
        (b / "docs" / "a.md").write_text((b / "docs" / "a.md").read_text() + "\nRetries added.\n")
        q = run_folio("query", "the beta client retries", "--root", str(a), "--root", str(b), "--lexical", cwd=a)
        assert q.returncode == 0, q.stderr
        assert f"another folio is updating the index at {b / '.folio'}" in q.stderr, q.stderr


def test_similar_over_a_corpus_and_one_nested_in_it_ranks_each_shared_file_once_and_never_the_source(
        tmp_path, fake_server, run_folio):
    """`folio similar` over `--root outer --root outer/sub` listed a file both indexes hold twice
    (once from each), and a source in the inner corpus found itself, at 1.000, in the outer index."""
    import json

    srv = fake_server()
    outer = indexed(tmp_path / "O", {"o.md": "# Outer\n\nRetries outer.\n\n## More\n\nInner thing retries.\n",
                                      "sub/i.md": "# Inner\n\nRetries inner thing.\n"}, srv, run_folio)
    inner = outer / "sub"
    (inner / "folio.yaml").write_text((outer / "folio.yaml").read_text())
    assert run_folio("index", str(inner), cwd=outer).returncode == 0

    def rows(*args, input=None):
        r = run_folio("similar", *args, "--root", str(outer), "--root", str(inner), "--json", cwd=outer, input=input)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        return [(x["root"], x["path"]) for x in got["results"]], got["notices"]

    got, notices = rows("-", input="retries inner thing")
    assert got.count((str(inner), "i.md")) == 1 and (str(outer), "sub/i.md") not in got, got
    assert any("held by both" in n for n in notices), notices
    got, _ = rows("sub/i.md")
    assert (str(inner), "i.md") not in got and (str(outer), "sub/i.md") not in got, got


def test_the_show_tools_citation_names_the_corpus_when_several_are_served(two):
    """The show tool's citation is root-relative (`-- docs/a.md:L3-L5 (sha ...)`): over two corpora
    holding docs/a.md, quoting it could not say which one the lines came from."""
    a, b = two

    async def body():
        async with stdio(a, "--root", str(a), "--root", str(b), env={"FOLIO_WATCH": "off"}) as c:
            got = await c.call_tool("show", {"ref": f"{b}/docs/a.md:3-5"})
            assert not got.is_error, text_of(got)
            assert "The beta client never retries." in text_of(got)
            assert f"-- docs/a.md:L3-L5 in {b} (sha " in text_of(got), text_of(got)
            assert got.structured_content["root"] == str(b)

    anyio.run(body)


def _damage(root: Path, how: str) -> None:
    """root's index damaged as a hand edit or a bad disk leaves it (every kind is found at another step)."""
    import sqlite3

    db = root / ".folio" / "index.db"
    if how == "not a database":
        db.write_bytes(b"\x00garbage" * 600)
        for side in ("index.db-wal", "index.db-shm"):
            (root / ".folio" / side).unlink(missing_ok=True)
        return
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        if how == "meta":
            c.execute("UPDATE meta SET value = 'x' WHERE key = 'dim'")
        elif how == "frontmatter":
            c.execute("UPDATE files SET frontmatter = '[1]'")
        elif how == "fingerprint":  # read as the space's, by the query (space.py), not as the store opens it
            c.execute("UPDATE meta SET value = 'zz' WHERE key = 'fingerprint'")
        elif how == "roles":
            c.execute("UPDATE meta SET value = '[1' WHERE key = 'roles'")
        elif how == "a bad page":  # the files table's first page unreadable: SQLite's error, mid-read, names no file
            page = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'files'").fetchone()[0]
            size = c.execute("PRAGMA page_size").fetchone()[0]
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if how == "a bad page":
        with open(db, "r+b") as fh:
            fh.seek((page - 1) * size)
            fh.write(b"\xee" * size)
    if how == "matrix":
        [matrix] = (root / ".folio").glob("vectors*.f32")
        with open(matrix, "r+b") as fh:
            fh.truncate(100)
    elif how == "lexical":
        import shutil

        for seg in (root / ".folio" / "lex").iterdir():
            shutil.rmtree(seg)


def _one_error(stderr: str, root: Path) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("folio: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert f"the index at {root}/.folio" in lines[0] and "is damaged" in lines[0], lines[0]
    assert "folio index --rebuild" in lines[0], lines[0]


@pytest.mark.parametrize(("as_json", "how"), [(False, "meta"), (True, "meta"), (False, "a bad page"),
                                             (True, "a bad page")])
def test_status_over_several_corpora_reports_the_others_when_one_index_is_damaged(two, run_folio, as_json, how):
    """`folio status --root A --root B` with A's index damaged printed only A's damage: B, whole, went
    unreported (a page SQLite could not read, met mid-read: a traceback-free sentence naming no index)."""
    import json

    a, b = two
    _damage(a, how)
    r = run_folio("status", *(["--json"] if as_json else []), "--root", str(a), "--root", str(b), cwd=b)
    assert r.returncode == 1, (r.stdout, r.stderr)
    _one_error(r.stderr, a)
    if as_json:  # the shape asked for: several roots, the readable ones listed
        assert [x["root"] for x in json.loads(r.stdout)["roots"]] == [str(b)]
    else:
        assert f"root      {b}" in r.stdout and str(a) not in r.stdout, r.stdout


@pytest.mark.parametrize("how", ["not a database", "meta", "frontmatter", "matrix", "lexical", "fingerprint", "roles",
                                 "a bad page"])
def test_a_query_over_several_corpora_answers_from_the_others_when_one_index_is_damaged(two, run_folio, how):
    """`folio query --root A --root B` with A's index damaged (found when it opens, reads its files or
    its vectors, or its lexical segments; a fingerprint or roles row the query reads as a space's; a page
    SQLite cannot read, whose error names no file) failed for B too: now B answers, and a notice names
    A's damage and the fix."""
    import json

    a, b = two
    _damage(a, how)
    r = run_folio("query", "the beta client retries", "--json", "--root", str(a), "--root", str(b), cwd=b)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert {x["root"] for x in got["results"]} == {str(b)}, got["results"]
    [said] = [n for n in got["notices"] if "is damaged" in n]
    assert f"the index at {a}/.folio" in said and "folio index --rebuild" in said, said
    assert f"leaves out the corpus at {a}" in said, said
    alone = run_folio("query", "the beta client retries", "--root", str(a), cwd=b)  # alone: its error, as before
    assert alone.returncode == 1
    _one_error(alone.stderr, a)


@pytest.mark.parametrize("how", ["not a database", "meta", "frontmatter", "a bad page"])
def test_ls_over_several_corpora_lists_the_others_when_one_index_is_damaged(two, run_folio, how):
    """`folio ls --root A --root B` with A's index damaged printed nothing but A's damage (exit 1),
    where a query over the same roots answers from B: B's documents are listed, a notice names A's
    damage and the fix. Alone, A's damage is the command's error as before."""
    import json

    a, b = two
    _damage(a, how)
    r = run_folio("ls", "--root", str(a), "--root", str(b), cwd=b)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["README.md", "docs/a.md"], r.stdout
    assert f"the index at {a}/.folio" in r.stderr and "folio index --rebuild" in r.stderr, r.stderr
    assert f"leaves out the corpus at {a}" in r.stderr and "Traceback" not in r.stderr, r.stderr
    got = json.loads(run_folio("ls", "--json", "--root", str(a), "--root", str(b), cwd=b).stdout)
    assert {d["root"] for d in got["documents"]} == {str(b)}
    assert any(f"leaves out the corpus at {a}" in n for n in got["notices"]), got["notices"]
    alone = run_folio("ls", "--root", str(a), cwd=b)
    assert alone.returncode == 1
    _one_error(alone.stderr, a)


@pytest.mark.parametrize("how", ["not a database", "meta", "frontmatter", "matrix", "fingerprint", "roles",
                                 "a bad page"])
def test_similar_over_several_corpora_ranks_the_others_when_one_index_is_damaged(two, run_folio, how):
    """`folio similar B/docs/a.md --root A --root B` with A's index damaged printed only A's damage
    (exit 1; a page SQLite could not read as `the index is damaged`, naming none), where a query over
    the same roots answers from B: B's sections rank, a notice names A's damage and the fix. A source
    in A itself cannot rank without A's index: one sentence naming it, exit 1."""
    import json

    a, b = two
    _damage(a, how)
    r = run_folio("similar", str(b / "docs/a.md"), "--json", "--root", str(a), "--root", str(b), cwd=b)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [(x["root"], x["path"]) for x in got["results"]] == [(str(b), "README.md")], got["results"]
    [said] = [n for n in got["notices"] if "is damaged" in n]
    assert f"the index at {a}/.folio" in said and "folio index --rebuild" in said, said
    assert f"leaves out the corpus at {a}" in said, said
    text = run_folio("similar", str(b / "docs/a.md"), "--root", str(a), "--root", str(b), cwd=b)
    assert text.returncode == 0 and "README.md:1-3" in text.stdout, (text.stdout, text.stderr)
    assert f"leaves out the corpus at {a}" in text.stderr and "Traceback" not in text.stderr, text.stderr
    own = run_folio("similar", str(a / "docs/a.md"), "--root", str(a), "--root", str(b), cwd=b)
    assert own.returncode == 1 and own.stdout == "", own.stdout
    _one_error(own.stderr, a)


def test_show_calls_over_several_corpora_race_no_index_replaced_under_them(two, run_folio):
    """`folio mcp --http --root A --root B`, eight agents showing a file of A while B's index.db is
    replaced again and again (as a `folio index --rebuild` of B replaces it; here by a copy renamed
    over it, so that no instant finds B without an index): a show call read B's store after another
    call had closed it for the new index.db, and answered `the index is damaged (Cannot operate on a
    closed database.)`, within the first few calls. Every call now shows A's lines."""
    import os
    import shutil
    import sqlite3
    import threading

    from helpers_mcp import http, serving

    a, b = two
    (a / "only.md").write_text("# Only\n\nOnly alpha holds this.\n")
    assert run_folio("index", cwd=a).returncode == 0
    db = b / ".folio" / "index.db"
    with contextlib.closing(sqlite3.connect(db)) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file alone is the whole index: a copy is one
    server = HttpServer(b, "--root", str(a), "--root", str(b), env={"FOLIO_WATCH": "off"})
    done = threading.Event()

    def replace_b() -> None:
        while not done.is_set():
            shutil.copyfile(db, db.with_name("index.db.new"))
            os.replace(db.with_name("index.db.new"), db)
            done.wait(0.01)

    wrong: list[str] = []
    swapper = threading.Thread(target=replace_b)
    try:
        serving(server)
        swapper.start()

        async def agent() -> None:
            async with http(server.url) as c:
                for _ in range(40):
                    got = await c.call_tool("show", {"ref": "only.md:1-3"})
                    if got.is_error or "Only alpha holds this." not in text_of(got):
                        wrong.append(text_of(got))
                        return

        async def body() -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(agent)

        anyio.run(body)
    finally:
        done.set()
        if swapper.is_alive():
            swapper.join()
        rc, _out, err = server.stop()
    assert wrong == [], wrong[0]
    assert rc == 0 and "Traceback" not in err, err


def test_the_mcp_tools_over_several_corpora_serve_the_others_when_one_index_is_damaged(two, run_folio):
    """`folio mcp --root A --root B` with A's index damaged: the status tool said only A's damage, and
    the query, ls, similar and show tools failed for B too (show of a file only B holds, by the path a
    query row gives)."""
    a, b = two
    (b / "only.md").write_text("# Only\n\nOnly beta holds this.\n")
    assert run_folio("index", cwd=b).returncode == 0
    _damage(a, "meta")

    async def body():
        async with stdio(b, "--root", str(a), "--root", str(b), env={"FOLIO_WATCH": "off"}) as c:
            status = await c.call_tool("status", {})
            assert status.is_error and f"root      {b}" in text_of(status), text_of(status)
            assert f"the index at {a}/.folio/index.db is damaged" in text_of(status), text_of(status)
            found = await c.call_tool("query", {"query": "the beta client retries", "no_refresh": True})
            assert not found.is_error, text_of(found)
            assert {root for root, _path in paths_of(found)} == {"B"}
            assert any(f"leaves out the corpus at {a}" in n for n in found.structured_content["notices"])
            listed = await c.call_tool("ls", {})
            assert not listed.is_error, text_of(listed)
            assert {d["root"] for d in listed.structured_content["documents"]} == {str(b)}
            assert any(f"leaves out the corpus at {a}" in n for n in listed.structured_content["notices"])
            shown = await c.call_tool("show", {"ref": "only.md:1-3"})
            assert not shown.is_error, text_of(shown)
            assert f"-- only.md:L1-L3 in {b} (sha " in text_of(shown), text_of(shown)
            like = await c.call_tool("similar", {"ref": str(b / "docs/a.md"), "no_refresh": True})
            assert not like.is_error, text_of(like)
            assert {root for root, _path in paths_of(like)} == {"B"}
            assert any(f"leaves out the corpus at {a}" in n for n in like.structured_content["notices"])

    anyio.run(body)
