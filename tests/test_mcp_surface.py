"""`folio mcp` speaks for itself (issue 29.3), through the MCP SDK's own stdio client and a real
`folio mcp` subprocess: `show` takes the `path` a query row gives whatever the server's working
directory; `status` takes `key` and `truncated`; `ls` lists what a filter keeps; no answer, error
or notice names a CLI flag; a wrongly typed argument gets folio's sentence; every tool declares
the object it answers with as its output schema; the descriptions say what SKILL.md says."""

from __future__ import annotations

import re

import anyio
import jsonschema
import pytest
from test_mcp import FILES, QUESTION, backdate, cli_json, connect, index_while_locked, text_of

FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z-]*")  # a CLI flag named on its own (not inside a `folio ...` command)

MORE = {
    "keps/new/README.md": "---\nstatus: implementable\nreplaces:\n  - /keps/old\n---\n# Routing, new\n\n"
                          "Topology aware routing, the new way.\n",
    "keps/old/README.md": "---\nstatus: replaced\n---\n# Routing, old\n\nTopology aware routing, the old way.\n",
    "data/wide.md": "# Wide\n\n" + "word " * 3000 + "\n",  # one line past the budget: cut
}


@pytest.fixture
def served(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    root = tmp_path / "c"
    write_tree(root, {**FILES, **MORE, "folio.yaml": f"endpoint: {srv.url}\nmodel: fake\nmax_chars: 2000\n"})
    backdate(root)
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    return root, srv


def run(body) -> None:
    anyio.run(body)


def test_show_takes_a_query_rows_path_whatever_the_servers_working_directory(served, tmp_path):
    root, _srv = served
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def body():
        async with connect(elsewhere, "--root", str(root)) as c:
            top = (await c.call_tool("query", {"query": QUESTION, "mode": "semantic"})).structured_content["results"][0]
            assert top["path"] == "finance/revenue.md" and top["ref"] != top["path"]  # ref: from the server's cwd
            for given in (f"{top['path']}:{top['start']}-{top['end']}", top["ref"]):
                s = await c.call_tool("show", {"ref": given})
                assert not s.is_error, text_of(s)
                assert "Revenue is recognised when" in s.structured_content["text"]
                assert s.structured_content["loc"] == top["citation"]["loc"]  # one name for one file
                assert s.structured_content["path"] == top["path"]
                assert text_of(s).splitlines()[-1].startswith(f"-- {top['path']}:L{top['start']}-L{top['end']} ")
            gone = await c.call_tool("show", {"ref": "finance/nothere.md:1-3"})
            assert gone.is_error and text_of(gone).startswith("folio: finance/nothere.md")

    run(body)


def test_status_takes_key_and_truncated_as_the_cli_does(served, run_folio):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            st = await c.call_tool("status", {"key": "status"})
            assert not st.is_error, text_of(st)
            want = cli_json(run_folio, root, "status", "--key", "status")
            assert st.structured_content == want
            assert st.structured_content["frontmatter_values"] == {
                "status": {"implementable": 1, "live": 1, "replaced": 1, "retired": 1}}
            assert text_of(st).splitlines() == run_folio("status", "--key", "status", cwd=root).stdout.splitlines()
            cut = await c.call_tool("status", {"truncated": True})
            assert not cut.is_error, text_of(cut)
            assert cut.structured_content == cli_json(run_folio, root, "status", "--truncated")
            assert [r["path"] for r in cut.structured_content["truncated"]] == ["data/wide.md"]
            plain = await c.call_tool("status", {})
            assert "the status tool's `key` argument lists them all" in text_of(plain)
            # what the CLI refuses (an empty --key, --key with --truncated) the tool refuses in its own terms
            empty = await c.call_tool("status", {"key": " "})
            assert empty.is_error and text_of(empty) == ('folio: key is empty: name a frontmatter key (the status '
                                                          'tool without key lists them), e.g. key: "status"')
            both = await c.call_tool("status", {"key": "status", "truncated": True})
            assert both.is_error and text_of(both) == ("folio: truncated lists cut records; key lists a key's values: "
                                                       "give one of them")

    run(body)


def test_ls_answers_what_folio_ls_prints(served, run_folio):
    root, _srv = served
    asks = [({}, []),
            ({"where": "status=live|status=retired"}, ["--where", "status=live|status=retired"]),
            ({"where": ["status", "!id"], "key": "status"}, ["--where", "status", "--where", "!id", "--key", "status"]),
            ({"exclude_pointed_by": "replaces", "identity": "@path"},
             ["--exclude-pointed-by", "replaces", "--identity", "@path"]),
            ({"exclude_pointed_by": ["supersedes"]}, ["--exclude-pointed-by", "supersedes"])]

    async def body():
        async with connect(root) as c:
            for args, flags in asks:
                got = await c.call_tool("ls", args)
                assert not got.is_error, text_of(got)
                want = cli_json(run_folio, root, "ls", *flags)
                assert {k: v for k, v in got.structured_content.items() if k != "notices"} == {
                    k: v for k, v in want.items() if k != "notices"}, args
                text = run_folio("ls", *flags, cwd=root).stdout.splitlines()
                assert text_of(got).splitlines()[:len(text)] == text
            pointed = (await c.call_tool("ls", {"exclude_pointed_by": "replaces", "identity": "@path"})).structured_content
            assert "keps/old/README.md" not in {d["path"] for d in pointed["documents"]} and pointed["dropped"] == 1

    run(body)


def test_no_answer_error_or_notice_over_mcp_names_a_cli_flag(served, run_folio):
    root, _srv = served

    async def body():
        said = []
        async with connect(root) as c:
            calls = [("query", {"query": "topology routing", "exclude_pointed_by": "replaces", "mode": "lexical"}),
                     ("query", {"query": "topology routing", "where": "status=Replaced", "mode": "lexical"}),
                     ("query", {"query": QUESTION, "where": "status=live|draft", "mode": "semantic"}),
                     ("query", {"query": QUESTION, "where": ["=draft"]}),
                     ("query", {"query": QUESTION, "exclude_pointed_by": "a=b"}),
                     ("query", {"query": QUESTION, "exclude_pointed_by": "replaces", "identity": "@what"}),
                     ("query", {"query": QUESTION, "exclude_pointed_by": "replaces", "identity": "no-such-key"}),
                     ("ls", {"where": "status=Replaced"}),
                     ("ls", {"exclude_pointed_by": "replaces"}),
                     ("status", {})]
            for name, args in calls:
                got = await c.call_tool(name, args)
                said.append(text_of(got))
                if not got.is_error:
                    said += got.structured_content.get("notices", [])
            busy = await index_while_locked(c, root)
            assert busy.is_error
            said.append(text_of(busy))
        flags = sorted({m for s in said for m in FLAG.findall(s)})
        assert not flags, f"MCP answers name CLI flags {flags}: {said}"
        text = "\n".join(said)
        # what the CLI says with flags, said with the tool's arguments
        assert 'identity: "@path"' in text  # path pointers read as ids
        assert '(0 documents dropped by exclude_pointed_by: "replaces", identity: "id")' in text
        assert 'where: "status=Replaced" matches no section on its own' in text
        assert 'where: "=draft" cannot be read' in text and "where: [" in text  # the grammar, as arguments
        assert "call the index tool again after it finishes" in text

    run(body)



def test_a_ref_that_is_no_range_names_the_argument_not_the_clis_syntax(served, run_folio):
    """show's refusal of a `ref` named the CLI's positional PATH:START-END and `folio query`."""
    root, _srv = served
    cli = run_folio("show", "finance/revenue.md", cwd=root)
    assert cli.returncode == 2 and cli.stderr.strip() == (
        "folio: `finance/revenue.md` is not PATH:START-END (e.g. docs/setup.md:12-40, as `folio query` prints it)")

    async def body():
        async with connect(root) as c:
            got = await c.call_tool("show", {"ref": "finance/revenue.md"})
            assert got.is_error and text_of(got) == (
                'folio: ref: "finance/revenue.md" is not path:start-end (e.g. ref: "docs/setup.md:12-40", as a query '
                'row gives it)')
            got = await c.call_tool("show", {"ref": "finance/revenue.md:9-3"})
            assert got.is_error and text_of(got) == (
                'folio: ref: "finance/revenue.md:9-3": lines are numbered from 1 and the start must not exceed the end '
                '(did you mean ref: "finance/revenue.md:3-9"?)')

    run(body)

WRONG = [
    ("query", {"query": QUESTION, "limit": "many"}, "limit \"many\" is not a whole number"),
    ("query", {"query": QUESTION, "limit": True}, "limit true is not a whole number"),
    ("query", {"query": QUESTION, "limit": 0}, "limit 0 is not a whole number from 1 to 1000"),
    ("query", {"query": QUESTION, "limit": 2.5}, "limit 2.5 is not a whole number"),
    ("query", {"query": QUESTION, "where": 5}, "where 5 is neither a string nor a list of strings"),
    ("query", {"query": QUESTION, "where": {"status": "live"}}, "where {\"status\": \"live\"} is neither"),
    ("query", {"query": QUESTION, "exclude_pointed_by": 3}, "exclude_pointed_by 3 is neither"),
    ("query", {"query": QUESTION, "identity": ["id"]}, "identity [\"id\"] is not a string"),
    ("query", {"query": QUESTION, "mode": 3}, "mode 3 is not one of semantic, lexical, hybrid"),
    ("query", {"query": QUESTION, "mode": "Semantic"}, "mode \"Semantic\" is not one of"),
    ("query", {"query": QUESTION, "no_refresh": "yes"}, "no_refresh \"yes\" is not true or false"),
    ("query", {"query": 42}, "query 42 is not a string"),
    ("query", {"limit": 3}, "query is missing"),
    ("show", {}, "ref is missing"),
    ("show", {"ref": 7}, "ref 7 is not a string"),
    ("status", {"key": ["status"]}, "key [\"status\"] is not a string"),
    ("status", {"truncated": "yes"}, "truncated \"yes\" is not true or false"),
    ("ls", {"key": 5}, "key 5 is neither"),
    ("ls", {"where": [1, 2]}, "where [1, 2] is neither"),
]


def test_a_wrongly_typed_argument_gets_folios_sentence_and_every_shape_taken_is_in_the_schema(served, run_folio):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            for name, args, sentence in WRONG:
                got = await c.call_tool(name, args)
                assert got.is_error, (name, args)
                assert text_of(got).startswith(f"folio: {sentence}"), (args, text_of(got))
                assert "validation error" not in text_of(got) and "Error executing tool" not in text_of(got)
                if name == "query" and "limit" in args:  # what the tool refuses, the schema refuses too
                    with pytest.raises(jsonschema.ValidationError):
                        jsonschema.validate(args, tools["query"].input_schema)
            # what the tool takes, the schema takes: a bare string or a list for where and
            # exclude_pointed_by (and the answers are the CLI's)
            for args, flags in (({"where": "status=live"}, ["--where", "status=live"]),
                                ({"where": ["status=live"]}, ["--where", "status=live"]),
                                ({"exclude_pointed_by": "supersedes"}, ["--exclude-pointed-by", "supersedes"]),
                                ({"exclude_pointed_by": ["supersedes"]}, ["--exclude-pointed-by", "supersedes"]),
                                ({"limit": 2.0}, ["-l", "2"])):
                full = {"query": "interviews", "mode": "lexical", **args}
                jsonschema.validate(full, tools["query"].input_schema)
                got = await c.call_tool("query", full)
                assert not got.is_error, text_of(got)
                want = cli_json(run_folio, root, "query", "interviews", "--mode", "lexical", *flags)
                assert {k: v for k, v in got.structured_content.items() if k != "notices"} == {
                    k: v for k, v in want.items() if k != "notices"}
            # a question that reads as JSON stays the question
            assert (await c.call_tool("query", {"query": "null", "mode": "lexical"})).structured_content["query"] == "null"
            for name, args in (("ls", {"where": "status=live", "key": "status"}), ("ls", {"key": ["id", "status"]}),
                               ("status", {"key": "id", "truncated": False}), ("show", {"ref": "ops/oncall.md:1-3"})):
                jsonschema.validate(args, tools[name].input_schema)
                assert not (await c.call_tool(name, args)).is_error, args

    run(body)


def test_five_thousand_copies_of_one_where_give_one_notice(served):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            for name, args in (("query", {"query": QUESTION, "mode": "lexical"}), ("ls", {})):
                got = await c.call_tool(name, {**args, "where": ["status=live|draft"] * 5000})
                assert not got.is_error, text_of(got)
                hints = [n for n in got.structured_content["notices"] if "'draft' is a whole predicate" in n]
                assert len(hints) == 1, got.structured_content["notices"][:3]
                assert len(text_of(got).splitlines()) < 10

    run(body)


def test_every_tool_declares_its_answer_as_its_output_schema(served, write_tree):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert all(t.output_schema and t.output_schema["type"] == "object" for t in tools.values()), tools
            write_tree(root, {"finance/revenue.md": FILES["finance/revenue.md"] + "\nA new line.\n"})
            calls = [("query", {"query": QUESTION, "mode": m}) for m in ("semantic", "lexical", "hybrid")]
            calls += [("query", {"query": QUESTION, "no_refresh": True}), ("query", {"query": "zzzz nothing"}),
                      ("show", {"ref": "ops/oncall.md:1-3"}), ("status", {}), ("status", {"key": "status"}),
                      ("status", {"truncated": True}), ("ls", {}), ("ls", {"key": "status"}), ("index", {})]
            for name, args in calls:
                got = await c.call_tool(name, args)  # the SDK client checks the answer against the schema too
                assert not got.is_error, (name, args, text_of(got))
                jsonschema.validate(got.structured_content, tools[name].output_schema)
            required = set(tools["query"].output_schema["required"])
            assert {"mode", "notices", "results", "dropped"} <= required
            row = tools["query"].output_schema["properties"]["results"]["items"]
            assert row["properties"]["freshness"]["enum"] == ["current", "stale", "missing"]

    run(body)


def test_the_descriptions_say_what_skill_md_says_to_check(served):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            q = tools["query"].description
            for must in ("`mode`", "`freshness`", "`notices`", "exactly and case-sensitively", "dotted",
                         'mode "lexical"', '"hybrid"', "show tool", "ls tool"):
                assert must in q, must
            mode = tools["query"].input_schema["properties"]["mode"]["description"]
            assert "leaves out sections with no vector yet" in mode and "ranked by its words" in mode
            assert "the default mode" in mode
            assert "relative to the corpus root" in tools["show"].description
            assert "`key`" in tools["status"].description and "`truncated`" in tools["status"].description
            assert "exactly what they mean for the query tool" in tools["ls"].description

    run(body)


def test_mcp_and_cli_answers_agree_on_a_query_with_every_filter(served, run_folio):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            got = await c.call_tool("query", {"query": "topology routing", "mode": "lexical", "limit": 3,
                                              "where": ["status"], "exclude_pointed_by": "replaces",
                                              "identity": "@path"})
            want = cli_json(run_folio, root, "query", "topology routing", "--mode", "lexical", "-l", "3",
                            "--where", "status", "--exclude-pointed-by", "replaces", "--identity", "@path")
            assert got.structured_content == want and want["dropped"] == 1
            assert text_of(got).splitlines()[-1] == (  # the count, said with the tool's arguments
                '(1 document dropped by exclude_pointed_by: "replaces", identity: "@path")')

    run(body)
