"""`folio mcp`: the tools through the MCP SDK's own stdio client (the real protocol, a real
`folio mcp` subprocess), against the fake embeddings server and the real llama-server. Each test
keeps one server process across calls: what changes between calls (an edited file, an index run
by another process, the embeddings server gone) must be seen by the next call."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from helpers import folio_command

mcp_client = pytest.importorskip("mcp.client")
from mcp.client.stdio import StdioServerParameters  # noqa: E402

QUESTION = "when is revenue recognised"

REVENUE = """\
# Revenue

The finance handbook: how money comes in.

## Recognition

General rules for booking income.

### Timing

Revenue is recognised when the performance obligation is satisfied and control transfers.

## Expenses

Travel and meals are booked when incurred.
"""

FILES = {
    "finance/revenue.md": REVENUE,
    "people/hiring.md": "---\nid: hiring-v1\nstatus: retired\n---\n# Hiring\n\nHow we interview candidates.\n\n"
                        "## Offers\n\nOffers are approved by the lead.\n",
    "people/hiring-2.md": "---\nid: hiring-v2\nstatus: live\nsupersedes: hiring-v1\n---\n# Hiring, revised\n\n"
                          "How we interview candidates now: two rounds.\n",
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n\n## Paging\n\nPages go to the primary first.\n",
}


def backdate(root: Path, seconds: float = 60) -> None:
    t = time.time() - seconds
    for p in root.rglob("*.md"):
        os.utime(p, (t, t))


@pytest.fixture
def served(tmp_path, fake_server, write_tree, run_folio):
    """(corpus root, fake server): an indexed corpus whose folio.yaml names the fake server."""
    srv = fake_server()
    root = tmp_path / "c"
    write_tree(root, {**FILES, "folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n"})
    backdate(root)
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    return root, srv


@contextlib.asynccontextmanager
async def connect(cwd: Path, *args: str, env: dict | None = None):
    """A `folio mcp` subprocess and the SDK client talking to it. It does not follow the files
    (FOLIO_WATCH=off) unless `env` says so: these tests change files under it to see what a call
    does with them (tests/test_live.py has the live index)."""
    cmd = folio_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", *args], cwd=str(cwd),
                                   env={**os.environ, "FOLIO_WATCH": "off", **(env or {})})
    async with mcp_client.Client(params, read_timeout_seconds=120) as client:
        yield client


def run(body) -> None:
    anyio.run(body)


def cli_json(run_folio, root: Path, *args, env: dict | None = None) -> dict:
    r = run_folio(*args, "--json", cwd=root, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None)


def test_lists_the_five_tools_with_their_arguments_and_each_answers(served, run_folio, write_tree):
    root, _srv = served
    # The config names another server and model: the index tool keeps the index's own space.
    env = {"FOLIO_ENDPOINT": "http://127.0.0.1:9/v1/embeddings", "FOLIO_MODEL": "other"}

    async def body():
        async with connect(root, env=env) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == {"query", "show", "status", "ls", "similar", "index"}
            assert set(tools["query"].input_schema["properties"]) == {
                "query", "limit", "where", "exclude_pointed_by", "identity", "mode", "no_refresh", "words", "passage"}
            assert tools["query"].input_schema["required"] == ["query"]
            assert tools["query"].input_schema["properties"]["mode"]["enum"] == ["semantic", "lexical", "hybrid"]
            assert set(tools["show"].input_schema["properties"]) == {"ref", "sha", "trail"}
            assert set(tools["status"].input_schema["properties"]) == {"key", "truncated"}
            assert set(tools["ls"].input_schema["properties"]) == {"where", "exclude_pointed_by", "identity", "key"}
            assert not tools["index"].input_schema.get("properties")
            # Written for a model choosing a tool: when grep is the better tool, and that results are lines.
            assert "grep" in tools["query"].description and "read the lines" in tools["query"].description

            default = await c.call_tool("query", {"query": QUESTION})
            assert default.structured_content["mode"] == "hybrid", text_of(default)
            q = await c.call_tool("query", {"query": QUESTION, "mode": "semantic"})
            assert not q.is_error, text_of(q)
            top = q.structured_content["results"][0]
            assert (top["path"], top["trail"][-1]) == ("finance/revenue.md", "Timing")
            assert text_of(q).splitlines()[0].endswith(top["ref"])  # the plain rendering: `#1  score  ref`

            s = await c.call_tool("show", {"ref": top["ref"]})
            assert not s.is_error, text_of(s)
            assert s.structured_content == cli_json(run_folio, root, "show", top["ref"])
            assert "Revenue is recognised when" in s.structured_content["text"]
            assert text_of(s).splitlines()[-1].startswith(f"-- finance/revenue.md:L{top['start']}-L{top['end']}")

            st = await c.call_tool("status", {})
            assert not st.is_error, text_of(st)
            assert st.structured_content == cli_json(run_folio, root, "status", env=env)
            assert st.structured_content["config_differs"]  # and says the config names another server
            assert st.structured_content["files"] == len(FILES)

            write_tree(root, {"facilities/parking.md": "# Parking\n\nPermits come from reception.\n"})
            ix = await c.call_tool("index", {})
            assert not ix.is_error, text_of(ix)
            assert ix.structured_content["files"] == len(FILES) + 1
            assert (ix.structured_content["new"], ix.structured_content["embedded"]) == (1, 1)  # incremental
            assert (ix.structured_content["model"], ix.structured_content["endpoint"]) == ("fake", _srv.url)
            assert text_of(ix).startswith(f"indexed {len(FILES) + 1} files, 1 new")

    run(body)


def test_query_answers_equal_the_cli_json_for_the_same_questions(served, run_folio):
    root, _srv = served
    asks = [
        ({"query": QUESTION}, []),
        ({"query": "who approves offers", "limit": 2}, ["-l", "2"]),
        ({"query": "interviews", "where": ["status=live|status=retired", "id"]},
         ["--where", "status=live|status=retired", "--where", "id"]),
        ({"query": "interviews", "exclude_pointed_by": "supersedes"}, ["--exclude-pointed-by", "supersedes"]),
        ({"query": "pages on call", "mode": "lexical"}, ["--mode", "lexical"]),
        ({"query": "rota monday", "mode": "hybrid", "limit": 3}, ["--mode", "hybrid", "-l", "3"]),
    ]

    async def body():
        async with connect(root) as c:
            for args, flags in asks:
                got = await c.call_tool("query", args)
                assert not got.is_error, text_of(got)
                want = cli_json(run_folio, root, "query", args["query"], *flags)
                assert got.structured_content == want, args
                assert want["results"], args  # a question that finds nothing would prove little

    run(body)


def test_an_edited_file_between_calls_gives_the_fresh_range(served):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            before = (await c.call_tool("query", {"query": QUESTION, "mode": "semantic"})).structured_content["results"][0]
            path = root / "finance/revenue.md"
            lines = path.read_text().split("\n")
            lines[1:1] = ["", "A line someone added.", "And another."]
            path.write_text("\n".join(lines))
            after = await c.call_tool("query", {"query": QUESTION, "mode": "semantic"})
            top = after.structured_content["results"][0]
            assert (top["start"], top["end"]) == (before["start"] + 3, before["end"] + 3)
            assert top["freshness"] == "current"
            assert any("re-embedded before answering" in n for n in after.structured_content["notices"])
            assert path.read_text().split("\n")[top["start"] - 1] == "### Timing"

            # no_refresh checks without writing: the next edit is marked, not re-indexed.
            path.write_text("# Preface\n\nNew first lines.\n\n" + path.read_text())
            stale = (await c.call_tool("query", {"query": QUESTION, "no_refresh": True, "mode": "semantic"})).structured_content
            assert stale["results"][0]["freshness"] == "stale"
            assert stale["results"][0]["start"] == top["start"]

    run(body)


def test_an_index_run_by_another_process_is_seen_by_the_next_call(served, run_folio, write_tree):
    root, _srv = served
    question = "how are parking permits issued"

    async def body():
        async with connect(root) as c:
            first = (await c.call_tool("query", {"query": question})).structured_content
            assert all(r["path"] != "facilities/parking.md" for r in first["results"])
            assert "parking" in first["confidence"]["missing"]  # the server's kept word statistics

            write_tree(root, {"facilities/parking.md": "# Parking\n\nParking permits are issued by reception "
                                                       "on the first day.\n"})
            r = run_folio("index", cwd=root)
            assert r.returncode == 0, r.stderr
            seen = (await c.call_tool("query", {"query": question})).structured_content
            assert seen["results"][0]["path"] == "facilities/parking.md"
            # ... are those of the new index: the words it gained count, as in a fresh process
            assert seen["confidence"]["missing"] == [] and seen["confidence"]["support"] >= 1
            assert seen == cli_json(run_folio, root, "query", question)

            # A compaction renumbers the slots into a new matrix generation and removes the old file.
            big = "".join(f"## Topic {i}\n\nNotes on subject number {i} of the archive.\n\n" for i in range(80))
            write_tree(root, {"archive/big.md": "# Archive\n\n" + big})
            assert run_folio("index", cwd=root).returncode == 0
            assert not (await c.call_tool("query", {"query": "subject number 7"})).is_error  # maps it
            (root / "archive/big.md").unlink()
            r = run_folio("index", "--json", cwd=root)
            assert json.loads(r.stdout)["compacted"] > 0
            compacted = await c.call_tool("query", {"query": question, "limit": 10})
            assert compacted.structured_content == cli_json(run_folio, root, "query", question, "-l", "10")
            assert compacted.structured_content["results"][0]["path"] == "facilities/parking.md"

            # A rebuild replaces the whole index (a new index.db, a new matrix file under the same
            # name): the server reads the new one, not the mapping of the removed one.
            (root / "ops/oncall.md").unlink()
            (root / "finance/revenue.md").unlink()
            r = run_folio("index", "--rebuild", cwd=root)
            assert r.returncode == 0, r.stderr
            rebuilt = await c.call_tool("query", {"query": QUESTION, "limit": 10})
            assert not rebuilt.is_error, text_of(rebuilt)
            assert rebuilt.structured_content == cli_json(run_folio, root, "query", QUESTION, "-l", "10")
            paths = {res["path"] for res in rebuilt.structured_content["results"]}
            assert paths == {"facilities/parking.md", "people/hiring.md", "people/hiring-2.md"}

    run(body)


def test_a_bad_where_or_argument_is_a_tool_error_with_the_cli_sentence_and_the_next_call_works(served,
                                                                                             run_folio):
    root, _srv = served
    cli = run_folio("query", QUESTION, "--where", "=draft", cwd=root)
    assert cli.returncode == 2
    sentence = cli.stderr.strip().splitlines()[-1]
    assert sentence.startswith("folio: --where")

    async def body():
        async with connect(root) as c:
            bad = await c.call_tool("query", {"query": QUESTION, "where": ["=draft"]})
            assert bad.is_error
            # the CLI's sentence, naming the tool's argument where the CLI names its flag
            said = sentence.replace("--where '=draft'", 'where: "=draft"')
            assert text_of(bad).split(": write ")[0] == said.split(": write ")[0]
            assert "--where" not in text_of(bad)
            assert (await c.call_tool("query", {"query": QUESTION, "mode": "fuzzy"})).is_error
            assert (await c.call_tool("query", {"query": QUESTION, "limit": 0})).is_error
            missing = await c.call_tool("show", {"ref": "finance/nothere.md:1-3"})
            assert missing.is_error and text_of(missing).startswith("folio: finance/nothere.md")
            # an argument the tool does not take is named, never dropped without a word
            odd = await c.call_tool("query", {"query": QUESTION, "root": "/etc"})
            assert odd.is_error and "takes no `root`" in text_of(odd) and "started on" in text_of(odd)
            odd = await c.call_tool("query", {"query": QUESTION, "limt": 3})
            assert odd.is_error and "did you mean `limit`" in text_of(odd)
            odd = await c.call_tool("show", {"path": "finance/revenue.md:1-3"})
            assert odd.is_error and "did you mean `ref`" in text_of(odd) and "--root" not in text_of(odd)
            for args, said in (({}, "or text (a draft to compare)"), ({"text": " "}, "text is empty")):
                bad = await c.call_tool("similar", args)
                assert bad.is_error and said in text_of(bad), text_of(bad)
                assert "not both" not in text_of(bad) and "folio similar" not in text_of(bad)
            good = await c.call_tool("query", {"query": QUESTION})
            assert not good.is_error
            assert good.structured_content["results"][0]["path"] == "finance/revenue.md"

    run(body)


def test_the_embeddings_server_killed_between_calls_gives_lexical_answers_with_the_notice(served, run_folio):
    root, srv = served

    async def body():
        async with connect(root) as c:
            warm = (await c.call_tool("query", {"query": QUESTION})).structured_content
            assert warm["mode"] == "hybrid"
            srv.kill()
            down = await c.call_tool("query", {"query": QUESTION})
            assert not down.is_error, text_of(down)
            want = cli_json(run_folio, root, "query", QUESTION)
            assert want["mode"] == "lexical"
            assert down.structured_content == want
            notice = next(n for n in want["notices"] if "does not answer" in n)
            assert notice in text_of(down).splitlines()
            assert down.structured_content["results"][0]["path"] == "finance/revenue.md"

            srv.restart()  # back on the same port: the next call ranks by meaning again
            again = (await c.call_tool("query", {"query": QUESTION})).structured_content
            assert again["mode"] == "hybrid" and not again["notices"]

    run(body)


async def index_while_locked(c, root: Path):
    """The index tool called while another writer holds the index's lock."""
    from folio.store import acquire_lock

    lock = acquire_lock(root, wait=False)
    try:
        return await c.call_tool("index", {})
    finally:
        lock.release()


def test_the_index_tool_refuses_while_another_writer_holds_the_lock(served):
    root, _srv = served

    async def body():
        async with connect(root) as c:
            busy = await index_while_locked(c, root)
            assert busy.is_error
            assert text_of(busy).startswith("folio: ") and "another folio" in text_of(busy)
            done = await c.call_tool("index", {})
            assert not done.is_error, text_of(done)

    run(body)


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_end_of_input_or_sigterm_exits_0_quietly(served, how):
    root, _srv = served
    proc = subprocess.Popen([*folio_command(), "mcp"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    proc.stdin.write((json.dumps(hello) + "\n").encode())
    proc.stdin.flush()
    line = proc.stdout.readline()  # answered: the server is up and serving
    assert json.loads(line)["id"] == 1
    if how == "eof":
        proc.stdin.close()
    else:
        proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    out, err = proc.stdout.read(), proc.stderr.read()
    if how != "eof":
        proc.stdin.close()
    assert rc == 0, err
    assert err.decode().strip() == ""
    assert out.strip() == b""  # nothing but protocol ever reaches stdout


def test_a_line_that_is_not_a_json_rpc_message_gets_its_error_and_the_server_goes_on(served):
    """JSON-RPC 2.0: a line that is not JSON is answered -32700 with id null, JSON that is not a
    JSON-RPC message -32600 (with its id when it has one); the SDK dropped both without a word, and
    a client waiting on the id it sent waited for ever. The session goes on either way."""
    import selectors

    root, _srv = served
    proc = subprocess.Popen([*folio_command(), "mcp"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "FOLIO_WATCH": "off"})

    def send(line: str) -> None:
        proc.stdin.write((line + "\n").encode())
        proc.stdin.flush()

    def answer(timeout: float = 30) -> dict:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        try:
            assert sel.select(timeout), f"no answer on stdout within {timeout} s"
            return json.loads(proc.stdout.readline())
        finally:
            sel.close()

    try:
        send("{not json")  # before the handshake, too
        assert answer() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": (
            "Parse error: line 1 of the input is not JSON (key must be a string at column 2): send each message "
            "as one line of JSON")}}
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))
        assert answer()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send("")  # a blank line is no message: nothing to answer
        send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "query"')  # cut short
        got = answer()
        assert got["id"] is None and got["error"]["code"] == -32700
        assert got["error"]["message"].startswith("Parse error: line 5 of the input is not JSON (")
        send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": 42}))
        got = answer()
        assert got["id"] == 3 and got["error"]["code"] == -32600, got
        assert got["error"]["message"].startswith("Invalid Request: line 6 of the input is JSON but not")
        send("[1, 2]")
        got = answer()
        assert got["id"] is None and got["error"]["code"] == -32600, got
        send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                         "params": {"name": "query", "arguments": {"query": QUESTION}}}))
        got = answer()
        assert got["id"] == 4 and got["result"]["structuredContent"]["results"][0]["path"] == "finance/revenue.md"
        proc.stdin.close()
        rc = proc.wait(timeout=60)
        assert rc == 0 and proc.stderr.read().decode().strip() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_cli_the_installed_package_and_the_mcp_server_report_one_version(served, run_folio):
    root, _srv = served
    r = run_folio("--version", cwd=root)
    assert r.returncode == 0, r.stderr
    said = r.stdout.strip().removeprefix("folio, version ")
    # the distribution's name on PyPI (`folio` there is another project); its metadata is what
    # pip, pipx and uv show
    assert said == importlib.metadata.version("folio-sections")

    async def body():
        async with connect(root) as c:
            assert c.server_info is not None and c.server_info.version == said

    run(body)


def test_mcp_without_an_index_says_so(tmp_path, run_folio):
    r = run_folio("mcp", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("folio: no folio index here")


def test_real_llama_server_answers_equal_the_cli(tmp_path, llama, write_tree, run_folio):
    root = tmp_path / "c"
    write_tree(root, {**FILES, "folio.yaml": f"endpoint: {llama.url}\nmodel: minilm\n"})
    backdate(root)
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr

    async def body():
        async with connect(root) as c:
            for q in (QUESTION, "who approves a job offer", "when does the on-call rota change"):
                got = await c.call_tool("query", {"query": q})
                assert not got.is_error, text_of(got)
                assert got.structured_content["mode"] == "hybrid"
                assert got.structured_content == cli_json(run_folio, root, "query", q)
            top = got.structured_content["results"][0]
            assert top["path"] == "ops/oncall.md"
            shown = await c.call_tool("show", {"ref": top["ref"]})
            assert "Monday" in shown.structured_content["text"]

    run(body)
