"""`folio mcp --http`: the same tools over MCP's streamable HTTP transport, through the SDK's own
HTTP client against a real `folio mcp --http` subprocess (and the fake embeddings server)."""

from __future__ import annotations

import json
import time

import anyio
import httpx
import pytest
from helpers import free_port, indexed
from helpers_mcp import HttpServer, http, text_of

FILES = {
    "finance/revenue.md": "# Revenue\n\n## Timing\n\nRevenue is recognised when control transfers.\n",
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n\n## Paging\n\nPages go to the primary first.\n",
    "people/hiring.md": "---\nstatus: live\n---\n# Hiring\n\nHow we interview candidates: two rounds.\n",
}
QUESTIONS = ["when is revenue recognised", "who gets paged first", "how do we interview", "rota changes"]


@pytest.fixture
def corpus(tmp_path, fake_server, run_folio):
    return indexed(tmp_path / "c", FILES, fake_server(), run_folio)


def cli(run_folio, root, *args) -> dict:
    r = run_folio(*args, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_several_clients_at_once_get_the_clis_answers_and_sigterm_stops_it(corpus, run_folio):
    root = corpus
    expected = {q: cli(run_folio, root, "query", q) for q in QUESTIONS}
    server = HttpServer(root)
    try:
        server.wait_ready()

        async def client(n: int, results: dict):
            async with http(server.url) as c:
                for _ in range(3):
                    for q in QUESTIONS[n:] + QUESTIONS[:n]:  # each client in its own order
                        got = await c.call_tool("query", {"query": q})
                        assert not got.is_error, text_of(got)
                        results.setdefault(q, []).append(got.structured_content)

        async def body():
            results: dict = {}
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(client, n, results)
            for q in QUESTIONS:
                assert len(results[q]) == 9
                for got in results[q]:  # the confidence block too: every field as the CLI prints it
                    assert got == expected[q]
            # the other tools answer as their commands do
            async with http(server.url) as c:
                st = await c.call_tool("status", {})
                assert st.structured_content == cli(run_folio, root, "status")
                ls = await c.call_tool("ls", {"where": "status=live"})
                assert ls.structured_content == cli(run_folio, root, "ls", "--where", "status=live")

        anyio.run(body)
    finally:
        rc, out, err = server.stop()
    assert rc == 0, err
    assert "Traceback" not in err and out == ""
    assert err.startswith(f"folio: serving MCP at {server.url} for {root}")


def test_a_file_written_under_the_http_server_is_found(corpus):
    root = corpus
    server = HttpServer(root)
    try:
        server.wait_ready()

        async def body():
            async with http(server.url) as c:
                (root / "new.md").write_text("# Okapi\n\nThe okapi enclosure opens at nine.\n")
                end = time.monotonic() + 30
                while True:
                    got = await c.call_tool("query", {"query": "okapi enclosure", "mode": "lexical"})
                    if [r["path"] for r in got.structured_content["results"]][:1] == ["new.md"]:
                        break
                    assert time.monotonic() < end, text_of(got)
                    await anyio.sleep(0.2)

        anyio.run(body)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err


def test_a_non_loopback_address_is_refused_without_a_token(corpus, run_folio):
    r = run_folio("mcp", "--http", "--host", "0.0.0.0", "--port", str(free_port()), cwd=corpus)
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "folio: --host 0.0.0.0 is not a loopback address, and anyone who reaches it could read this corpus "
        "through folio: set FOLIO_MCP_TOKEN to a secret (every request must then carry it as `Authorization: "
        "Bearer <secret>`), or serve on 127.0.0.1")
    r = run_folio("mcp", "--port", "9000", cwd=corpus)
    assert r.returncode == 2 and "--port is for --http" in r.stderr


def test_with_a_token_every_request_must_carry_it(corpus, run_folio):
    root = corpus
    server = HttpServer(root, env={"FOLIO_MCP_TOKEN": "s3cret-token"})
    try:
        server.wait_ready()
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        for sent in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            r = httpx.post(server.url, json=hello, headers={**headers, **sent}, timeout=30)
            assert r.status_code == 401, (sent, r.text)
            assert "FOLIO_MCP_TOKEN" in r.text

        async def body():
            async with http(server.url, token="s3cret-token") as c:
                got = await c.call_tool("query", {"query": QUESTIONS[0]})
                assert not got.is_error and got.structured_content["results"][0]["path"] == "finance/revenue.md"

        anyio.run(body)
        r = httpx.post(server.url, json=hello, headers={**headers, "Authorization": "bearer s3cret-token"}, timeout=30)
        assert r.status_code == 200, r.text  # the scheme's name is case-insensitive; the token is not
        r = httpx.post(server.url, json=hello, headers={**headers, "Authorization": "Bearer S3CRET-TOKEN"}, timeout=30)
        assert r.status_code == 401
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err
    assert "bearer token required" in err


def test_a_port_in_use_is_one_sentence(corpus, run_folio):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run_folio("mcp", "--http", "--port", str(port), cwd=corpus)
    assert r.returncode == 1
    assert r.stderr.startswith(f"folio: cannot listen on 127.0.0.1:{port} (") and "choose another with --port" in r.stderr


@pytest.mark.parametrize("spelled, reach", [("127.0.0.1", "127.0.0.1"), ("127.0.0.2", "127.0.0.2"),
                                            ("LOCALHOST", "127.0.0.1")])
def test_every_loopback_spelling_keeps_the_dns_rebinding_guard(corpus, spelled, reach):
    """A web page whose name resolves to this machine must not read the corpus: a Host or Origin
    that is not this loopback server's is refused whatever the loopback address was spelled as
    (the SDK guards 127.0.0.1, localhost and ::1 only; 127.0.0.2 and LOCALHOST went unguarded)."""
    server = HttpServer(corpus, "--host", spelled, host=reach)
    try:
        server.wait_ready()
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        for sent, code in (({"Host": "evil.com"}, 421), ({"Origin": "http://evil.com"}, 403)):
            r = httpx.post(server.url, json=hello, headers={**headers, **sent}, timeout=30)
            assert r.status_code == code, (sent, r.status_code, r.text)
        r = httpx.post(server.url, json=hello, headers=headers, timeout=30)
        assert r.status_code == 200, r.text
    finally:
        server.stop()
