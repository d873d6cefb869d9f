"""`folio similar` and the MCP `similar` tool: the sections nearest to an indexed section, a file's
sections or a text, by the stored vectors (the real CLI and the SDK client against the fake server)."""

from __future__ import annotations

import json

import anyio
import pytest
from helpers import indexed
from helpers_mcp import stdio, text_of

NOTE = """\
---
status: live
---
# Deploys

## Rollback

To roll back a deploy, run the release tool with the previous tag and watch the canary for ten minutes.

## Owners

The platform team owns the release tool.
"""

# The planted near-duplicate: the Rollback section said again, a few words changed.
DUPLICATE = """\
---
status: draft
---
# Incident notes

## Undoing a release

To roll back a deploy, run the release tool with the previous tag, then watch the canary for ten minutes.
"""

OTHERS = {
    "garden.md": "# Garden\n\nTomatoes want sun, water at the roots and a stake by July.\n",
    "meals.md": "# Meals\n\nTravel meals are booked when incurred, with receipts kept for a year.\n",
    "release.md": "# Release tool\n\nThe release tool tags builds and pushes them to the canary first.\n",
}


def make(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    return indexed(tmp_path / "c", {"deploys.md": NOTE, "incidents/notes.md": DUPLICATE, **OTHERS}, srv,
                   run_folio), srv


def requests(srv) -> int:
    return srv.stats()["requests"]


def test_a_planted_near_duplicate_comes_first_and_the_server_is_not_asked(tmp_path, fake_server, write_tree,
                                                                          run_folio):
    root, srv = make(tmp_path, fake_server, write_tree, run_folio)
    before = requests(srv)
    r = run_folio("similar", "deploys.md:6-8", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    top = got["results"][0]
    assert (top["path"], top["trail"][-1]) == ("incidents/notes.md", "Undoing a release")
    assert top["score"] > 0.9 > got["results"][1]["score"]  # near-duplicates first, with their similarity
    assert top["like"] == "deploys.md:6-8"
    assert got["source"]["embedded"] == 0 and got["source"]["sections"] == ["deploys.md:6-8"]
    assert "deploys.md:6-8" not in [row["ref"] for row in got["results"]]  # the source itself is left out
    assert requests(srv) == before  # stored vectors only: nothing sent to the server

    # The plain output: the same rows, best first.
    r = run_folio("similar", "deploys.md:6-8", cwd=root)
    assert r.stdout.splitlines()[0].endswith("incidents/notes.md:6-8"), r.stdout


def test_a_whole_file_ranks_by_its_nearest_section_and_names_it(tmp_path, fake_server, write_tree, run_folio):
    root, srv = make(tmp_path, fake_server, write_tree, run_folio)
    before = requests(srv)
    r = run_folio("similar", "deploys.md", "--json", "-l", "3", cwd=root)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [row["path"] for row in got["results"]][0] == "incidents/notes.md"
    assert got["results"][0]["like"] == "deploys.md:6-8"
    assert all(row["path"] != "deploys.md" for row in got["results"])  # none of its own sections
    assert len(got["results"]) == 3
    assert requests(srv) == before
    text = run_folio("similar", "deploys.md", cwd=root).stdout
    assert "(like deploys.md:6-8)" in text.splitlines()[1]


def test_like_opens_from_where_you_stand_as_the_rows_do(tmp_path, fake_server, write_tree, run_folio):
    """The text form's `(like PATH:START-END)` was root-relative while its rows open from the current
    directory: from a subdirectory, `folio show` of it named no file. It opens from there now, as the
    rows do (`--json`'s `like` stays root-relative, as `path` and `source.sections` are)."""
    root, _srv = make(tmp_path, fake_server, write_tree, run_folio)
    sub = root / "incidents"
    r = run_folio("similar", "../deploys.md", "-l", "1", cwd=sub)
    assert r.returncode == 0, r.stderr
    row, trail = r.stdout.splitlines()[:2]
    assert row.endswith("  notes.md:6-8"), r.stdout
    assert trail.endswith("(like ../deploys.md:6-8)"), r.stdout
    shown = run_folio("show", "../deploys.md:6-8", cwd=sub)
    assert shown.returncode == 0 and "To roll back a deploy" in shown.stdout, shown.stderr
    r = run_folio("similar", str(root / "deploys.md"), "-l", "1", "--root", str(root), cwd=tmp_path)
    assert r.stdout.splitlines()[1].endswith("(like c/deploys.md:6-8)"), r.stdout
    got = json.loads(run_folio("similar", "../deploys.md", "-l", "1", "--json", cwd=sub).stdout)
    assert got["results"][0]["like"] == "deploys.md:6-8"


def test_filters_apply_as_for_a_query(tmp_path, fake_server, write_tree, run_folio):
    root, _srv = make(tmp_path, fake_server, write_tree, run_folio)
    r = run_folio("similar", "deploys.md:6-8", "--where", "!status", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    paths = [row["path"] for row in json.loads(r.stdout)["results"]]
    assert "incidents/notes.md" not in paths and paths[0] == "release.md"


def test_a_draft_on_stdin_is_embedded_and_finds_the_note_that_says_it(tmp_path, fake_server, write_tree, run_folio):
    root, srv = make(tmp_path, fake_server, write_tree, run_folio)
    before = requests(srv)
    draft = "# Draft\n\nRoll back a deploy: the release tool with the previous tag, then watch the canary.\n"
    r = run_folio("similar", "-", "--json", cwd=root, input=draft)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert {got["results"][0]["path"], got["results"][1]["path"]} == {"deploys.md", "incidents/notes.md"}
    assert got["source"]["embedded"] == 1
    assert requests(srv) == before + 1  # one request: the draft's section, with the fingerprint probe


def test_a_draft_on_stdin_that_is_not_utf8_is_read_as_a_file_would_be(tmp_path, fake_server, write_tree,
                                                                       run_folio):
    """Latin-1 bytes on stdin ended in a UnicodeEncodeError traceback (lone surrogates sent to the
    server); they are replaced and said, as in a file."""
    import os
    import subprocess

    from helpers import REPO, folio_command

    root, _srv = make(tmp_path, fake_server, write_tree, run_folio)
    draft = "# Caf\xe9 draft\n\nRoll back a deploy: the release tool with the previous tag.\n".encode("latin-1")
    r = subprocess.run([*folio_command(), "similar", "-", "--json"], cwd=root, input=draft, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err, err
    assert "warning: the text on stdin: line 1: invalid UTF-8" in err
    assert json.loads(r.stdout)["results"][0]["path"] in ("deploys.md", "incidents/notes.md")


def test_a_file_not_in_the_index_is_one_sentence(tmp_path, fake_server, write_tree, run_folio):
    root, _srv = make(tmp_path, fake_server, write_tree, run_folio)
    write_tree(root, {"new.md": "# New\n\nNot indexed yet.\n"})
    r = run_folio("similar", "new.md", cwd=root)
    assert r.returncode == 1
    assert r.stderr.startswith("folio: new.md is not in the index") and "folio similar - <" in r.stderr
    assert "Traceback" not in r.stderr
    r = run_folio("similar", "deploys.md:100-120", cwd=root)
    assert r.returncode == 1 and "deploys.md:100-120 lies past the end of deploys.md" in r.stderr


def one_sentence(r) -> str:
    """The one `folio:` line a refused source gets (no traceback, nothing on stdout)."""
    assert not r.stdout and "Traceback" not in r.stderr, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("folio: "), r.stderr
    return lines[0]


def test_a_source_that_is_not_an_indexed_section_says_which_and_the_fix(tmp_path, fake_server, write_tree,
                                                                         run_folio):
    # Each was told something untrue: a .txt file to run `folio index` (which never indexes it), a
    # directory and a range START > END that they were "not in the index, nor on disk", a range past
    # the end to pick a range a query row gives, a file deleted after indexing that it was never there.
    root, _srv = make(tmp_path, fake_server, write_tree, run_folio)
    write_tree(root, {"notes.txt": "plain notes on rolling back a deploy\n"})
    line = one_sentence(run_folio("similar", "notes.txt", cwd=root))
    assert "notes.txt is not a file folio indexes (only .md files" in line
    assert line.endswith("compare its text instead, with `folio similar - < notes.txt`"), line
    for spec in ("incidents", "incidents/"):
        r = run_folio("similar", spec, cwd=root)
        assert r.returncode == 1
        assert one_sentence(r) == ("folio: incidents is a directory, and `folio similar` starts from one file or "
                                   "section: name one of its files (`folio ls` lists them) as `folio query` prints it")
    r = run_folio("similar", "deploys.md:50-10", cwd=root)
    assert r.returncode == 2
    assert "`deploys.md:50-10`: lines are numbered from 1 and START must not exceed END (did you mean " \
           "deploys.md:10-50?)" in one_sentence(r)
    line = one_sentence(run_folio("similar", "deploys.md:50-60", cwd=root))
    assert line == ("folio: deploys.md:50-60 lies past the end of deploys.md, whose sections end at line 12: give a "
                    "range within 1-12, as `folio query` prints it, or the path alone for all of its sections")
    write_tree(tmp_path, {"outside.md": "# Outside\n\nrolling back a deploy\n"})
    r = run_folio("similar", "../outside.md", cwd=root)
    assert r.returncode == 1
    assert one_sentence(r) == (f"folio: ../outside.md lies in none of the corpora searched ({root}): name a file "
                               "under one of them, or add its corpus with --root")
    (root / "release.md").unlink()
    r = run_folio("similar", "release.md", cwd=root)
    assert r.returncode == 1
    assert one_sentence(r) == ("folio: release.md no longer exists: it was deleted after it was indexed; name a file "
                               "that exists, as `folio query` prints it, or restore it and run `folio index`")


def test_a_range_in_lines_added_since_indexing_is_refreshed_before_it_is_looked_for(tmp_path, fake_server,
                                                                                     write_tree, run_folio):
    root, _srv = make(tmp_path, fake_server, write_tree, run_folio)
    write_tree(root, {"garden.md": OTHERS["garden.md"] + "\n## Roses\n\nRoll back the roses' canary deploy.\n"})
    r = run_folio("similar", "garden.md:5-7", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "re-embedded before answering" in r.stderr


def test_a_source_whose_refresh_failed_after_a_commit_ranks_from_what_was_committed(tmp_path, fake_server,
                                                                                      write_tree, run_folio):
    """A source file changed since indexing is re-indexed first; a big one (more sections than one commit
    holds) whose server stopped mid-way is left with its first part committed. `folio similar` read the
    source's rows in that new state and the matrix at the size it had before the refresh: a traceback
    (IndexError, exit 1). Now it reads the rows and the vectors they name in one snapshot and ranks."""
    srv = fake_server()
    big = "# Big\n" + "".join(f"\n## Part {i}\n\nPart {i} of the ledger, word{i} and entry{i % 7}.\n"
                               for i in range(600))
    root = indexed(tmp_path / "c", {"big.md": big, "ledger.md": "# Ledger\n\n## Entries\n\nword5 entry3.\n"},
                   srv, run_folio)
    # every section changed; one in the second commit's part (not the longest: that one is sent first)
    # makes the server drop the connection
    changed = big.replace(" of the ledger", " of a ledger").replace("Part 550 of a ledger", "Part 550 of a POISON")
    write_tree(root, {"big.md": changed})
    srv.control(fail_input_containing="POISON", fail_input_fault="disconnect")
    r = run_folio("similar", "big.md", "--json", "-l", "3", cwd=root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    got = json.loads(r.stdout)
    assert "of the source changed and could not be re-indexed" in got["notices"][0], got["notices"]
    assert {(row["path"], row["freshness"]) for row in got["results"]} == {("ledger.md", "current")}


# A sitecustomize for the folio under test: the source is there when folio looks for it, and deleted at
# once, as an editor deleting and writing it anew does (os.path.exists wrapped for one file name).
DELETED_AS_LOOKED_AT = '''\
import os

_exists = os.path.exists


def exists(path):
    found = _exists(path)
    if found and os.fspath(path).endswith(os.sep + os.environ["FOLIO_TEST_DELETED_AS_LOOKED_AT"]):
        os.unlink(path)
    return found


os.path.exists = exists
'''


def test_a_source_deleted_as_its_sections_without_vectors_are_read_is_one_sentence(tmp_path, fake_server,
                                                                                   write_tree, run_folio):
    """A source with a section still waiting for its vector is embedded from the file's lines; a file
    deleted between folio's look at it and that read (an editor deleting and writing it anew) ended
    `folio similar` in a traceback (FileNotFoundError). The file is read once now, and its absence said."""
    import os
    import time

    srv = fake_server()
    root = write_tree(tmp_path / "c", {"folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n",
                                       "draft.md": "# Draft\n\n## Kept\n\nRollback steps.\n\n## Refused\n\nREFUSEME\n",
                                       "deploys.md": NOTE})
    t = time.time() - 60
    for p in root.glob("*.md"):
        os.utime(p, (t, t))
    srv.control(fail_input_containing="REFUSEME", fail_input_fault="500")  # that section waits for its vector
    run_folio("index", cwd=root)
    assert json.loads(run_folio("status", "--json", cwd=root).stdout)["waiting"] == 1
    site = write_tree(tmp_path / "site", {"sitecustomize.py": DELETED_AS_LOOKED_AT})
    r = run_folio("similar", "draft.md", "--json", cwd=root,
                  env={"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
                       "FOLIO_TEST_DELETED_AS_LOOKED_AT": "draft.md"})
    assert not (root / "draft.md").exists()  # the wrapper did delete it
    assert (r.returncode, r.stdout) == (1, ""), (r.returncode, r.stderr)
    assert r.stderr.splitlines() == ["folio: draft.md no longer exists: it was deleted after it was indexed; name a "
                                     "file that exists, as `folio query` prints it, or restore it and run `folio "
                                     "index`"], r.stderr


# A sitecustomize for the folio under test: as it first opens the index's matrix, another `folio index`
# runs to its end (compacting the index: a new matrix generation, the old one removed), as a watcher may.
COMPACTED_AS_OPENED = '''\
import os
import subprocess
import sys

_open = os.open


def opened(path, *args, **kwargs):
    flag = os.environ.get("FOLIO_TEST_COMPACT_ONCE")
    if flag and "vectors" in os.fspath(path) and not _open_flag(flag):
        env = {k: v for k, v in os.environ.items() if k != "FOLIO_TEST_COMPACT_ONCE"}
        subprocess.run([sys.executable, "-m", "folio", "index"], env=env, check=True, capture_output=True)
    return _open(path, *args, **kwargs)


def _open_flag(flag):
    try:
        _open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return True
    return False


os.open = opened
'''


def test_a_source_read_while_another_run_compacts_the_index_is_read_again(tmp_path, fake_server, write_tree,
                                                                         run_folio):
    """A writer that compacts the index (a watcher, another `folio index`) between `folio similar`'s look at
    the index and its read of the source's vectors removes the matrix that look named: similar said the index
    was damaged (`vectors.f32 is missing`, exit 1). It reads the source again, as a query ranks again."""
    import os

    srv = fake_server()

    def big(v):
        return "# Big\n" + "".join(f"\n## Part {i}\n\nPart {i} version {v}, word{i}.\n" for i in range(70))

    root = indexed(tmp_path / "c", {"big.md": big(1), "deploys.md": NOTE, "incidents/notes.md": DUPLICATE, **OTHERS},
                   srv, run_folio)
    write_tree(root, {"big.md": big(2)})
    assert run_folio("index", cwd=root).returncode == 0  # 70 dead rows beside 70 live ones
    write_tree(root, {"big.md": big(3)})  # the next run leaves 140 dead rows: it compacts
    site = write_tree(tmp_path / "site", {"sitecustomize.py": COMPACTED_AS_OPENED})
    r = run_folio("similar", "deploys.md:6-8", "--json", "--no-refresh", cwd=root,
                  env={"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
                       "FOLIO_TEST_COMPACT_ONCE": str(tmp_path / "compacted")})
    assert (tmp_path / "compacted").exists()  # the other run did run, as the matrix was first opened
    assert json.loads(run_folio("status", "--json", cwd=root).stdout)["dead_rows"] == 0  # and compacted
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)["results"][0]
    assert (top["path"], top["freshness"]) == ("incidents/notes.md", "current"), top


def test_the_mcp_tool_answers_as_the_cli_and_sends_nothing(tmp_path, fake_server, write_tree, run_folio):
    root, srv = make(tmp_path, fake_server, write_tree, run_folio)
    cli = json.loads(run_folio("similar", "deploys.md:6-8", "--json", cwd=root).stdout)

    async def body():
        async with stdio(root) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert "similar" in tools and "near-duplicates" in tools["similar"].description
            before = requests(srv)
            got = await c.call_tool("similar", {"ref": "deploys.md:6-8"})
            assert not got.is_error, text_of(got)
            assert got.structured_content == cli
            assert requests(srv) == before
            assert text_of(got).splitlines()[0].endswith("incidents/notes.md:6-8")
            both = await c.call_tool("similar", {"ref": "deploys.md", "text": "x"})
            assert both.is_error and "either ref" in text_of(both)

    anyio.run(body)


def test_the_mcp_tools_errors_name_its_arguments_not_the_clis_syntax(tmp_path, fake_server, write_tree, run_folio):
    """Over MCP the similar tool's refusals told an agent to pipe a file into `folio similar - <`, to
    run `folio index`, to name a file "as `folio query` prints it" and that START must not exceed
    END: syntax it cannot type. They name the tool's arguments (`ref`, `text`) and tools instead."""
    root, srv = make(tmp_path, fake_server, write_tree, run_folio)
    write_tree(root, {"notes.txt": "plain notes on rolling back a deploy\n", "new.md": "# New\n\nNot indexed yet.\n"})
    (root / "release.md").unlink()
    cli_only = ("`folio ", "folio similar", "stdin", "START", "END", "--", "exit")
    said = {
        "new.md": "new.md is not in the index at {root} yet: call the index tool (this server indexes a file as it "
                  "is written unless its `watch` setting is off), or give the file's text as `text` instead of `ref`",
        "notes.txt": "notes.txt is not a file folio indexes (only .md files, `extensions` in folio.yaml, and no hidden "
                     "names): compare its text instead, given as `text` instead of `ref`",
        "incidents": "incidents is a directory, and the similar tool starts from one file or section: give one of its "
                     "files as `ref` (the ls tool lists them), as a query row gives it",
        "deploys.md:50-10": 'ref: "deploys.md:50-10": lines are numbered from 1 and the start must not exceed the end '
                            '(did you mean ref: "deploys.md:10-50"?)',
        "deploys.md:50-60": "deploys.md:50-60 lies past the end of deploys.md, whose sections end at line 12: give a "
                            "range within 1-12, as a query row gives it, or the path alone as `ref` for all of its "
                            "sections",
        "deploys.md:2-3": "deploys.md holds no indexed section at lines 2-3: give a range a query row gives, or the "
                          "path alone as `ref` for all of its sections",
        "release.md": "release.md no longer exists: it was deleted after it was indexed; give as `ref` a file that "
                      "exists, as a query row gives it, or restore it and call the index tool",
        "nothere.md": "nothere.md is not in the index at {root}, nor on disk: give `ref` as a query row gives it",
    }

    async def body():
        async with stdio(root, env={"FOLIO_WATCH": "off"}) as c:
            texts = []
            for ref, want in said.items():
                got = await c.call_tool("similar", {"ref": ref})
                assert got.is_error
                assert text_of(got) == "folio: " + want.format(root=root), text_of(got)
                texts.append(text_of(got))
            got = await c.call_tool("similar", {"text": "---\nstatus: draft\n---\n"})
            assert got.is_error
            assert text_of(got) == ("folio: `text` holds no section to compare (only frontmatter, or blank lines): "
                                    "give the draft's Markdown"), text_of(got)
            texts.append(text_of(got))
            for text in texts:
                assert not [w for w in cli_only if w in text], text
            srv.stop()
            write_tree(root, {"fresh.md": "# Fresh\n\nNo vector yet.\n"})
            got = await c.call_tool("index", {})  # its sentence on the server says how to start one: that stays
            assert got.is_error and text_of(got).endswith(": call the index tool again once the server answers")
            got = await c.call_tool("similar", {"ref": "fresh.md"})
            assert got.is_error and text_of(got).endswith("; call the index tool once the server is up"), text_of(got)

    anyio.run(body)


@pytest.mark.parametrize("draft", ["", "  \n\n", "---\ntitle: x\n---\n"])
def test_an_empty_draft_on_stdin_is_a_usage_error_as_an_empty_question_is(tmp_path, fake_server, write_tree,
                                                                          run_folio, draft):
    """`folio similar -` with nothing on stdin exited 1, where `folio query ''` exits 2: both are usage
    errors now, one sentence, and no request reaches the server."""
    root, srv = make(tmp_path, fake_server, write_tree, run_folio)
    before = requests(srv)
    r = run_folio("similar", "-", cwd=root, input=draft)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == ["folio: the text given on stdin holds no section (it is empty, or only "
                                     "frontmatter or blank lines): give the draft to compare, e.g. `folio similar "
                                     "- < note.md`"], r.stderr
    assert requests(srv) == before
    assert run_folio("query", "", cwd=root).returncode == 2
