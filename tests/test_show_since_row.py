"""`folio show REF --sha SHA [--trail TRAIL]` (and the show tool's `sha`, `trail`): the lines a query
row named, judged against that row rather than against the index as it is when show runs. A watcher,
`folio mcp` or another query may re-index the file between the query and the show; the row's line
numbers may then hold another section, and show must say so (and where the section went), never
`current` alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import free_port

GUIDE = ("# Guide\n\nIntro text.\n\n"
         "## Setup\n\nInstall the lighthouse widget.\nRun it daily.\n\n"
         "## Usage\n\nCall the kettle function.\n")
SETUP = "## Setup\n\nInstall the lighthouse widget.\nRun it daily."
ABOVE = "# Guide\n\nA paragraph written\nabove the rest,\nafter the query.\n\nIntro text.\n\n"


def lexical_corpus(tmp_path: Path, write_tree, run_folio) -> Path:
    """docs/guide.md indexed with no embeddings server (the lexical plane is all show needs)."""
    root = write_tree(tmp_path / "c", {"docs/guide.md": GUIDE,
                                      "folio.yaml": f"endpoint: http://127.0.0.1:{free_port()}/v1/embeddings\n"})
    reindex(root, run_folio)
    return root


def reindex(root: Path, run_folio) -> None:
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr


def setup_row(root: Path, run_folio) -> dict:
    r = run_folio("query", "install the lighthouse widget", "--mode", "lexical", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["results"][0]
    assert (row["ref"], row["trail"]) == ("docs/guide.md:5-8", ["Guide", "Setup"])
    return row


def insert_above(root: Path) -> None:
    """Four lines inserted above the Setup section: it is at 9-12 now."""
    path = root / "docs" / "guide.md"
    path.write_text(ABOVE + path.read_text().split("Intro text.\n\n", 1)[1])


def test_a_row_reindexed_since_says_where_its_section_went(tmp_path, write_tree, run_folio):
    root = lexical_corpus(tmp_path, write_tree, run_folio)
    row = setup_row(root, run_folio)
    sha = row["citation"]["sha"]
    insert_above(root)
    reindex(root, run_folio)  # as a watcher would, between the query and the show

    # Without --sha: the old lines, called current against the index as it is now (no way to tell).
    plain = run_folio("show", row["ref"], cwd=root)
    assert plain.returncode == 0 and SETUP not in plain.stdout

    # With the row's sha and trail: the section the row named, where it is now, and said so.
    r = run_folio("show", row["ref"], "--sha", sha, "--trail", json.dumps(row["trail"]), cwd=root)
    assert r.returncode == 0, r.stderr
    body, citation = r.stdout.rsplit("\n", 2)[0], r.stdout.splitlines()[-1]
    assert body == SETUP
    assert citation.startswith("-- docs/guide.md:L9-L12 (sha ") and citation.endswith(
        "current; the row's section, moved here since the row from L5-L8)"), citation
    assert "is at lines 9-12 now, not 5-8" in r.stderr

    # The trail as `folio query` prints it under the row does as well, and --json says it in since_row.
    r = run_folio("show", row["ref"], "--sha", sha, "--trail", "Guide > Setup", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["ref"], data["start"], data["end"], data["text"]) == ("docs/guide.md:9-12", 9, 12, SETUP)
    assert data["since_row"] == {"sha": sha, "state": "moved", "start": 5, "end": 8, "trail": ["Guide", "Setup"]}
    assert data["freshness"] == "current" and data["sha"] != sha

    # The sha alone: the file changed since the row and nothing says which section it named: exit 1,
    # the lines and the object all the same, and one sentence saying what to do.
    r = run_folio("show", row["ref"], "--sha", sha, "--json", cwd=root)
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["since_row"]["state"] == "changed" and data["start"] == 5
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("folio: docs/guide.md changed since the query row") and "--trail" in last, r.stderr


def test_a_row_whose_file_changed_on_disk_finds_its_section_by_the_index_it_came_from(tmp_path, write_tree,
                                                                                    run_folio):
    """Not re-indexed yet (`stale`): the index still holds the row's copy, so the sha alone finds the
    section (its trail read from that copy) in the file as it is now."""
    root = lexical_corpus(tmp_path, write_tree, run_folio)
    row = setup_row(root, run_folio)
    insert_above(root)
    r = run_folio("show", row["ref"], "--sha", row["citation"]["sha"], "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["freshness"], data["start"], data["end"], data["text"]) == ("stale", 9, 12, SETUP)
    assert data["since_row"]["state"] == "moved" and data["since_row"]["trail"] == ["Guide", "Setup"]
    assert not any("may have moved" in n for n in data["notices"]), data["notices"]


def test_a_rows_section_renamed_since_is_one_sentence_and_exit_1(tmp_path, write_tree, run_folio):
    root = lexical_corpus(tmp_path, write_tree, run_folio)
    row = setup_row(root, run_folio)
    guide = root / "docs" / "guide.md"
    guide.write_text(guide.read_text().replace("## Setup", "## Installation"))
    reindex(root, run_folio)
    r = run_folio("show", row["ref"], "--sha", row["citation"]["sha"], "--trail", "Guide > Setup", cwd=root)
    assert r.returncode == 1
    assert r.stdout.splitlines()[-1].endswith("changed since the row, which named a section not in it now)")
    assert r.stderr.strip().splitlines()[-1] == (
        f"folio: docs/guide.md changed since the query row (its sha {row['citation']['sha']}), and no section "
        "'Guide > Setup' is in it now (its heading renamed, or the section deleted): run `folio query` again for "
        "a current reference")


def test_the_rows_own_sha_changes_nothing_and_a_malformed_one_is_a_usage_error(tmp_path, write_tree, run_folio):
    root = lexical_corpus(tmp_path, write_tree, run_folio)
    row = setup_row(root, run_folio)
    sha = row["citation"]["sha"]
    plain = run_folio("show", row["ref"], cwd=root)
    given = run_folio("show", row["ref"], "--sha", sha, "--trail", "Guide > Setup", cwd=root)
    assert given.returncode == 0 and given.stdout == plain.stdout and given.stderr == plain.stderr == ""
    data = json.loads(run_folio("show", row["ref"], "--sha", sha.upper(), "--json", cwd=root).stdout)
    assert data["since_row"] == {"sha": sha, "state": "same", "start": 5, "end": 8, "trail": None}
    assert json.loads(run_folio("show", row["ref"], "--json", cwd=root).stdout)["since_row"] is None

    for bad in ("516bef", "not-a-sha-at-all", ""):
        r = run_folio("show", row["ref"], "--sha", bad, cwd=root)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip().splitlines() == [
            f"folio: --sha {bad!r} is not a sha: give the query row's citation.sha, 12 hex digits "
            "(e.g. --sha 516bef067812)"], r.stderr


def test_the_show_tool_takes_the_rows_sha_and_trail(tmp_path, write_tree, run_folio):
    import anyio
    from helpers_mcp import stdio, text_of

    root = lexical_corpus(tmp_path, write_tree, run_folio)

    async def body():
        async with stdio(root, env={"FOLIO_WATCH": "off"}) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert {"sha", "trail"} <= set(tools["show"].input_schema["properties"])
            q = await c.call_tool("query", {"query": "install the lighthouse widget", "mode": "lexical"})
            row = q.structured_content["results"][0]
            assert row["trail"] == ["Guide", "Setup"]
            insert_above(root)
            reindex(root, run_folio)  # `folio mcp`'s live index, or a watcher, does this between the calls
            s = await c.call_tool("show", {"ref": row["ref"], "sha": row["citation"]["sha"], "trail": row["trail"]})
            assert not s.is_error, text_of(s)
            assert (s.structured_content["ref"], s.structured_content["text"]) == ("docs/guide.md:9-12", SETUP)
            assert s.structured_content["since_row"]["state"] == "moved"
            assert "moved here since the row from L5-L8" in text_of(s)
            bad = await c.call_tool("show", {"ref": row["ref"], "sha": "xyz"})
            assert bad.is_error and 'sha: "xyz" is not a sha' in text_of(bad)
            gone = await c.call_tool("show", {"ref": row["ref"], "sha": row["citation"]["sha"],
                                              "trail": ["Guide", "Nowhere"]})
            assert gone.is_error and gone.structured_content["since_row"]["state"] == "not_found"
            assert "call the query tool again" in text_of(gone)

    anyio.run(body)
    assert os.path.isdir(root / ".folio")


def test_a_row_that_was_part_of_a_section_divided_by_tokens_moves_as_that_part(tmp_path, write_tree, run_folio,
                                                                            fake_server):
    """A section longer than the server takes in tokens is indexed as several records, and a row can
    name one. With lines added above it (not re-indexed yet), show parsed the file anew, found the
    section whole, and printed all of it, "its text changed too", where the section had only moved:
    an agent read and cited lines the row never named. Now it prints the row's part, moved."""
    srv = fake_server(n_ctx=128)
    long = "\n\n".join(f"Paragraph {i} about the {w} of the harbour, told at some length here." for i, w in
                       enumerate(["lighthouse", "tides", "cranes", "ropes", "gulls", "fog", "boats", "nets"]))
    root = write_tree(tmp_path / "c", {"docs/port.md": f"# Port\n\nIntro.\n\n## Harbour\n\n{long}\n\n## End\n\nBye.\n",
                                      "folio.yaml": f"endpoint: {srv.url}\n"})
    reindex(root, run_folio)
    r = run_folio("query", "lighthouse", "--mode", "lexical", "--json", cwd=root)
    row = json.loads(r.stdout)["results"][0]
    assert row["trail"] == ["Port", "Harbour"] and row["end"] < 21, row  # one part of the Harbour section
    path = root / "docs" / "port.md"
    path.write_text(path.read_text().replace("Intro.\n", "Intro.\n\nTwo lines\nadded above.\n", 1))
    r = run_folio("show", row["ref"], "--sha", row["citation"]["sha"], "--trail", json.dumps(row["trail"]),
                  "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["since_row"]["state"], got["start"], got["end"]) == ("moved", row["start"] + 3, row["end"] + 3), got
    assert not any("text changed too" in n for n in got["notices"]), got["notices"]
    assert got["text"].startswith("## Harbour\n\nParagraph 0 about the lighthouse"), got["text"]
