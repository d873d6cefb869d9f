"""An agent's facets (issue 40): `folio query --words/--passage` and the MCP query tool's `words` and
`passage`, through the real CLI and the MCP SDK's client against the fake embeddings server (which
counts the requests it receives, and maps synonyms to one token so a paraphrase is near by meaning).
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from helpers_index import backdate
from helpers_mcp import stdio, text_of

# Six sections that reuse the question's words (each diluted a little more, so both planes rank them
# 1 to 6), and one that answers it in its own terms (ccache): the question alone ranks the six above it.
BUILD_Q = "how do I make the build faster"
BUILD = {f"notes{i}.md": f"# Build note {i}\n\nThe build is faster when this step of the build is skipped."
                         f"{' Lunch, weather, parking and the office plants.' * i}\n" for i in range(6)}
BUILD["cache.md"] = "# Compiler cache\n\nSet CCACHE_DIR so every checkout shares one ccache directory.\n"

# The question's words lead to "Stop words"; the section that answers it says so in other words.
STOP_Q = "how do I stop the daemon"
STOP = {
    "stopwords.md": "# Stop words\n\nThe daemon drops stop words before it indexes a document.\n",
    "shutdown.md": "# Shutdown\n\nTo halt the daemon, send it a signal: it flushes its queue and shuts down "
                   "cleanly.\n",
    "queue.md": "# Queue\n\nThe queue flushes to disk every second, and once more when it shuts down.\n",
    "signals.md": "# Signals\n\nEach signal has its handler: one reloads the config, another flushes the queue.\n",
    "ports.md": "# Ports\n\nThe daemon listens on port 8080 unless told otherwise.\n",
}
STOP_PASSAGE = ("Send the daemon a signal to halt it: it finishes the work at hand, flushes its queue and shuts "
                "down cleanly.")


@pytest.fixture
def indexed(tmp_path, write_tree, fake_server, run_folio):
    def make(files: dict) -> tuple[Path, object]:
        srv = fake_server()
        root = write_tree(tmp_path / "c", {**files, "folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n"})
        backdate(root)
        r = run_folio("index", cwd=root)
        assert r.returncode == 0, r.stderr
        return root, srv

    return make


def ask(run_folio, root: Path, *args) -> dict:
    r = run_folio("query", *args, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def paths(answer: dict) -> list[str]:
    return [r["path"] for r in answer["results"]]


def test_a_keyword_facet_brings_the_section_holding_the_exact_term_into_the_top_rows(indexed, run_folio):
    root, _srv = indexed(BUILD)
    alone = ask(run_folio, root, BUILD_Q)
    assert "cache.md" not in paths(alone) and alone["facets"] == []
    worded = ask(run_folio, root, BUILD_Q, "--words", '"compiler cache" ccache')
    assert "cache.md" in paths(worded), paths(worded)
    assert worded["facets"] == ["words"]
    row = next(r for r in worded["results"] if r["path"] == "cache.md")
    assert row["ranks"]["words"] == 1 and row["ranks"]["lexical"] is None  # the question's words miss it


def test_repeated_words_all_count_as_the_mcp_tools_list_does(indexed, run_folio):
    # `--words` was a single option: a second one silently replaced the first, so `--words ccache
    # --words build` ranked by "build" alone; the MCP tool's list of words ranks them all
    root, _srv = indexed(BUILD)
    once = ask(run_folio, root, BUILD_Q, "--words", "ccache build")
    twice = ask(run_folio, root, BUILD_Q, "--words", "ccache", "--words", "build")
    assert [(r["path"], r["ranks"]) for r in twice["results"]] == [(r["path"], r["ranks"]) for r in once["results"]]
    row = next((r for r in twice["results"] if r["path"] == "cache.md"), None)
    assert row is not None and row["ranks"]["words"] is not None, twice["results"]
    r = run_folio("query", BUILD_Q, "--words", "ccache", "--words", " ", cwd=root)
    assert r.returncode == 2 and "--words is empty" in r.stderr


def test_a_passage_facet_lifts_the_paraphrased_section(indexed, run_folio):
    # In five sections both of the question's planes single out "Stop words" (the lexical plane far
    # ahead), so one passage does not overturn them here; it lifts the section that answers, most of
    # all. Among 640 more sections it ranks it first (the test below).
    root, _srv = indexed(STOP)
    alone = ask(run_folio, root, STOP_Q)
    assert paths(alone)[0] == "stopwords.md"  # the question's own words lead elsewhere
    answered = ask(run_folio, root, STOP_Q, "--passage", STOP_PASSAGE)
    assert answered["facets"] == ["passage"]
    before = {r["path"]: r["score"] for r in alone["results"]}
    gain = {r["path"]: r["score"] - before[r["path"]] for r in answered["results"]}
    assert max(gain, key=gain.get) == "shutdown.md", gain
    row = next(r for r in answered["results"] if r["path"] == "shutdown.md")
    assert row["ranks"]["passage"] == 1
    assert answered["results"][0]["score"] - row["score"] < (before["stopwords.md"] - before["shutdown.md"]) / 2


def test_a_passage_facet_ranks_the_paraphrased_section_first_in_a_matrix_scanned_by_several_threads(
        indexed, run_folio):
    # 640 other sections ahead of the five (in a/, listed first): the question's and the passage's
    # vectors scan the matrix in blocks split between threads, and the answer is the small corpus's.
    filler = {f"a/topic{i:02d}.md": "".join(f"# Garden {i} bed {j}\n\nTomatoes, basil and marigolds in row {j}.\n\n"
                                            for j in range(16)) for i in range(40)}
    root, _srv = indexed({**filler, **{f"zz/{k}": v for k, v in STOP.items()}})
    answered = ask(run_folio, root, STOP_Q, "--passage", STOP_PASSAGE)
    assert paths(answered)[0] == "zz/shutdown.md", paths(answered)
    assert answered["results"][0]["ranks"]["passage"] == 1
    assert paths(ask(run_folio, root, STOP_Q))[0] == "zz/stopwords.md"


def test_one_embedding_request_per_query_whatever_the_facets(indexed, run_folio):
    root, srv = indexed(STOP)
    for facets in ([], ["--words", "halt signal"], ["--passage", STOP_PASSAGE],
                   ["--words", "halt", "--passage", STOP_PASSAGE, "--passage", "Stop it with a signal."]):
        srv.control(reset_stats=True)
        got = ask(run_folio, root, STOP_Q, *facets)
        assert got["mode"] == "hybrid"
        stats = srv.stats()
        assert stats["requests"] == 1, (facets, stats)
        assert stats["inputs"] == 2 + facets.count("--passage")  # the probe, the question, each passage


def test_an_empty_question_or_facet_is_a_usage_error(indexed, run_folio):
    """An empty question (an unset variable in a script) would rank every section alike and answer
    with confident rows: refused, with or without facets, as are output forms that cannot mix."""
    root, srv = indexed(STOP)
    srv.control(reset_stats=True)
    for args, said in (([""], "the question is empty"), ([" \t "], "the question is empty"),
                       ([STOP_Q, "--json", "--paths-only"], "choose one"),
                       (["", "--words", "halt"], "the question is empty"),
                       (["  ", "--passage", STOP_PASSAGE], "the question is empty"),
                       ([STOP_Q, "--words", ""], "--words is empty"),
                       ([STOP_Q, "--passage", " "], "a --passage is empty")):
        r = run_folio("query", *args, cwd=root)
        assert r.returncode == 2, (args, r.stderr)
        assert said in r.stderr and "Traceback" not in r.stderr
    assert srv.stats()["requests"] == 0  # refused before any request


def test_a_facet_the_mode_cannot_rank_is_left_out_with_a_notice(indexed, run_folio):
    root, srv = indexed(STOP)
    lexical = ask(run_folio, root, STOP_Q, "--lexical", "--passage", STOP_PASSAGE, "--words", "halt signal")
    assert lexical["facets"] == ["words"] and lexical["mode"] == "lexical"
    assert any("passage was left out" in n for n in lexical["notices"])
    semantic = ask(run_folio, root, STOP_Q, "--mode", "semantic", "--words", "halt")
    assert semantic["facets"] == [] and any("words were left out" in n for n in semantic["notices"])


def test_the_mcp_query_tool_takes_words_and_passages_in_one_request(indexed):
    root, srv = indexed({**BUILD, **STOP})

    async def body():
        async with stdio(root, "--root", str(root)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            props = tools["query"].input_schema["properties"]
            assert {"words", "passage"} <= set(props) and "facet" not in tools["query"].input_schema["required"]
            await c.call_tool("query", {"query": "warm up"})
            srv.control(reset_stats=True)
            got = await c.call_tool("query", {"query": BUILD_Q, "words": ["compiler cache", "ccache"],
                                              "passage": [STOP_PASSAGE, "The compiler cache keeps objects."]})
            assert not got.is_error, text_of(got)
            assert srv.stats()["requests"] == 1
            obj = got.structured_content
            assert obj["facets"] == ["words", "passage"]
            assert "cache.md" in paths(obj)
            bad = await c.call_tool("query", {"query": "", "passage": STOP_PASSAGE})
            assert bad.is_error and "the question is empty" in text_of(bad)
            bad = await c.call_tool("query", {"query": "  "})
            assert bad.is_error and "the question is empty" in text_of(bad) and "folio query" not in text_of(bad)
            assert srv.stats()["requests"] == 1

    anyio.run(body)


@pytest.mark.parametrize("words", ['"""', "-- ...", "the of and"])
def test_words_that_analyse_to_no_term_are_a_usage_error_as_empty_words_are(indexed, run_folio, words):
    """`--words '\"\"\"'` (no term once analysed: punctuation, or stop words only) ranked nothing, yet
    `facets` named the words as ranking beside the question: refused as `--words ''` is, before any
    request (and in MCP a tool error with the same sentence)."""
    root, srv = indexed(STOP)
    srv.control(reset_stats=True)
    r = run_folio("query", STOP_Q, "--words", words, "--json", cwd=root)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "--words holds no word to rank by" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert srv.stats()["requests"] == 0
    kept = ask(run_folio, root, STOP_Q, "--words", words, "--words", "halt")  # another word ranks: as before
    assert kept["facets"] == ["words"]

    async def body():
        async with stdio(root, "--root", str(root)) as c:
            bad = await c.call_tool("query", {"query": STOP_Q, "words": words})
            assert bad.is_error and "words holds no word to rank by" in text_of(bad), text_of(bad)
            assert "--words" not in text_of(bad)

    anyio.run(body)
