"""`folio mcp --http` shared by a team of agents, some of them misbehaving: a client that initialises
in a loop, requests the transport does not take (a batch, bad JSON, a wrong header or session), an
Origin or Host that only starts like this machine's, a token served beyond loopback, a stop with
calls in flight. Each against a real `folio mcp --http` subprocess, with raw HTTP and the SDK's client."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time

import anyio
import httpx
import pytest
from helpers import indexed
from helpers_mcp import HttpServer, http, serving, text_of

FILES = {
    "finance/revenue.md": "# Revenue\n\n## Timing\n\nRevenue is recognised when control transfers.\n",
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n\n## Paging\n\nPages go to the primary first.\n",
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def hello(name: str = "mcp", version: str = "0.1.0", rid=1) -> dict:
    """An initialize request (by default with the clientInfo the SDK's own client sends)."""
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name, "version": version}}}


@contextlib.asynccontextmanager
async def agent(url: str):
    """The SDK's client on the session wire (the initialize handshake, an Mcp-Session-Id, its event
    stream), as agent hosts speak it; the SDK's own default (helpers_mcp.http) speaks the 2026 wire,
    which has no sessions."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(timeout=120) as hc, \
            Client(streamable_http_client(url, http_client=hc), read_timeout_seconds=120, mode="legacy") as client:
        yield client


@pytest.fixture
def corpus(tmp_path, fake_server, run_folio):
    return indexed(tmp_path / "c", FILES, fake_server(), run_folio)


def session(server: HttpServer, name: str = "mcp") -> str:
    r = httpx.post(server.url, json=hello(name), headers=ACCEPT, timeout=30)
    assert r.status_code == 200, r.text
    return r.headers["mcp-session-id"]


def ping(server: HttpServer, sid: str) -> httpx.Response:
    return httpx.post(server.url, json={"jsonrpc": "2.0", "id": 7, "method": "ping"},
                      headers={**ACCEPT, "Mcp-Session-Id": sid}, timeout=30)


def refusal(r: httpx.Response) -> str:
    """The folio sentence of a JSON-RPC error answer."""
    assert r.headers.get("content-type") == "application/json", (r.status_code, r.headers, r.text)
    body = r.json()
    assert body["jsonrpc"] == "2.0" and set(body) == {"jsonrpc", "id", "error"}, body
    message = body["error"]["message"]
    assert message.startswith("folio mcp: ") and len(message) < 400 and "\n" not in message, message
    return message


def clean(err: str) -> None:
    """Nothing on stderr but the start line: no traceback, no SDK warning, per request or otherwise."""
    assert [ln for ln in err.splitlines() if not ln.startswith("folio: serving MCP at ")] == [], err


def test_a_client_initialising_in_a_loop_ends_its_own_sessions_not_another_agents(corpus):
    """A buggy agent re-initialising in a loop (no DELETE) grew the SDK's sessions to 10,000 (about
    40 KiB each, ~400 MB), after which every new session was refused 503 for the 30 minutes each
    lasted. With FOLIO_MCP_MAX_SESSIONS held, room is made by ending an idle session of the client
    holding the most, those that never made a request past their handshake first: the loop ends its
    own, while an agent at work (the same client software, so the same clientInfo) keeps its session,
    and a new agent is let in. The loop's ended session is told why, and the memory stays put."""
    most = 8
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off", "FOLIO_MCP_MAX_SESSIONS": str(most)})
    try:
        serving(server)

        async def body():
            async with agent(server.url) as working:
                got = await working.call_tool("query", {"query": "when is revenue recognised", "mode": "lexical"})
                assert got.structured_content["results"][0]["path"] == "finance/revenue.md"
                first = session(server)  # the loop, with the SDK client's own clientInfo
                rss = _rss(server)

                def loop() -> list[int]:
                    with httpx.Client(timeout=30) as c:
                        return [c.post(server.url, json=hello(), headers=ACCEPT).status_code for _ in range(600)]

                assert set(await anyio.to_thread.run_sync(loop)) == {200}
                grew = _rss(server) - rss
                got = await working.call_tool("query", {"query": "who gets paged first", "mode": "lexical"})
                assert not got.is_error, text_of(got)
                assert got.structured_content["results"][0]["path"] == "ops/oncall.md"
                async with agent(server.url) as newcomer:
                    got = await newcomer.call_tool("show", {"ref": "ops/oncall.md:1-3"})
                    assert not got.is_error, text_of(got)
                got = await working.call_tool("ls", {})
                assert not got.is_error, text_of(got)
            return first, grew

        first, grew = anyio.run(body)
        r = ping(server, first)
        assert r.status_code == 404
        assert refusal(r) == (
            f"folio mcp: session {first} is not open: it was ended to make room for a new session: {most} were "
            f"open (FOLIO_MCP_MAX_SESSIONS), and it was an idle one of the client holding the most; start a new "
            f"one (an initialize request without the Mcp-Session-Id header)")
        assert grew < 12 * 1024, f"600 sessions opened grew the server by {grew} KiB"
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err
    clean(err)


def _rss(server: HttpServer) -> int:
    return int(next(ln.split()[1] for ln in open(f"/proc/{server.proc.pid}/status") if ln.startswith("VmRSS:")))


def stream(server: HttpServer, sid: str) -> socket.socket:
    """A session's event stream (GET), open: its answer's headers read, its body left unread."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    s.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n"
              f"Mcp-Session-Id: {sid}\r\n\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    assert got.startswith(b"HTTP/1.1 200 "), got
    return s


def test_a_session_with_its_stream_open_is_never_ended_for_room(corpus):
    """Room for a new session is made only from idle ones: a session whose event stream is open
    (its agent listening) is never ended; with every session so held, a new one is refused in one
    sentence naming the bound, and let in once a stream closes."""
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off", "FOLIO_MCP_MAX_SESSIONS": "2"})
    streams = []
    try:
        serving(server)
        held = [session(server, f"agent{n}") for n in range(2)]
        streams = [stream(server, sid) for sid in held]
        r = httpx.post(server.url, json=hello("late"), headers=ACCEPT, timeout=30)
        assert r.status_code == 503
        assert refusal(r) == ("folio mcp: all 2 sessions are busy, each with a call or an event stream open "
                              "(FOLIO_MCP_MAX_SESSIONS): try again once one ends, or raise it")
        assert [ping(server, sid).status_code for sid in held] == [200, 200]
        streams.pop(0).close()
        once_not(503, lambda: httpx.post(server.url, json=hello("late"), headers=ACCEPT, timeout=30),
                 "the closed stream's session was never let go")
        assert ping(server, held[0]).status_code == 404 and ping(server, held[1]).status_code == 200
    finally:
        closed(server, streams)


def closed(server: HttpServer, streams: list) -> None:
    """Close the streams a test held, stop the server: it exits 0 with nothing but its own lines."""
    for s in streams:
        s.close()
    rc, _out, err = server.stop()
    assert rc == 0, err
    clean(err)


def once_not(refused: int, ask, what: str) -> httpx.Response:
    """Ask again (30 s at most) while the answer is `refused`; the answer then must be 200."""
    end = time.monotonic() + 30
    while (r := ask()).status_code == refused:
        assert time.monotonic() < end, what
        time.sleep(0.1)
    assert r.status_code == 200, r.text
    return r


def test_a_session_bound_that_is_not_a_number_is_one_sentence(corpus, run_folio):
    r = run_folio("mcp", "--http", "--port", "0", cwd=corpus, env={"FOLIO_MCP_MAX_SESSIONS": "lots"})
    assert r.returncode == 2
    assert r.stderr.strip() == ("folio: FOLIO_MCP_MAX_SESSIONS='lots' is not a whole number above 0: give e.g. "
                                "FOLIO_MCP_MAX_SESSIONS=200, or unset it for the default (200)")


def test_one_client_cannot_hold_every_connection(corpus):
    """One client (its address and clientInfo) opening event streams, one per session, held all
    FOLIO_MCP_MAX_CONNECTIONS: every other agent's connection was then answered 503 until it let go.
    Now a client holds at most its share (FOLIO_MCP_MAX_PER_CLIENT, a third of the connections by
    default): past it a stream or a call is refused 429 in one sentence, its DELETE still ends a
    session, and the other agents, on the session wire and the 2026 one, are served meanwhile."""
    most, share = 9, 3
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off", "FOLIO_MCP_MAX_CONNECTIONS": str(most)})
    streams = []
    try:
        serving(server)
        hog = [session(server, "hog") for _ in range(most)]
        streams = [stream(server, sid) for sid in hog[:share]]
        said = (f"folio mcp: the client at 127.0.0.1 (hog 0.1.0) already has {share} requests open here, as many "
                f"as one client may hold (FOLIO_MCP_MAX_PER_CLIENT; event streams and calls being answered): send "
                f"this again once one ends, close a stream it no longer reads, or raise it")
        for sid in hog[share:]:
            with httpx.stream("GET", server.url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid},
                              timeout=30) as r:
                assert r.status_code == 429, f"the hog's stream past its share was let in ({r.status_code})"
                r.read()
                assert refusal(r) == said
        r = ping(server, hog[-1])
        assert r.status_code == 429 and r.json()["id"] == 7 and refusal(r) == said
        r = httpx.post(server.url, json=hello("hog"), headers=ACCEPT, timeout=30)
        assert r.status_code == 429 and refusal(r) == said

        async def others():
            async with agent(server.url) as one, http(server.url) as other:
                got = await one.call_tool("query", {"query": "when is revenue recognised", "mode": "lexical"})
                assert got.structured_content["results"][0]["path"] == "finance/revenue.md"
                got = await other.call_tool("show", {"ref": "ops/oncall.md:1-3"})
                assert not got.is_error, text_of(got)

        anyio.run(others)
        r = httpx.delete(server.url, headers={"Mcp-Session-Id": hog[-1]}, timeout=30)
        assert r.status_code == 200, r.text
        streams.pop().close()
        once_not(429, lambda: ping(server, hog[0]), "the hog's closed stream never gave its place back")
    finally:
        closed(server, streams)


def test_a_per_client_bound_that_is_not_a_number_is_one_sentence(corpus, run_folio):
    r = run_folio("mcp", "--http", "--port", "0", cwd=corpus, env={"FOLIO_MCP_MAX_PER_CLIENT": "0"}, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == ("folio: FOLIO_MCP_MAX_PER_CLIENT='0' is not a whole number above 0: give e.g. "
                                "FOLIO_MCP_MAX_PER_CLIENT=33, or unset it for the default (33)")


def raw(server: HttpServer, method: str, head: dict, body: bytes | None = None) -> httpx.Response:
    with httpx.Client(timeout=30) as c:
        return c.request(method, server.url, headers=head, content=body)


def test_requests_the_transport_does_not_take_get_one_sentence_each(corpus):
    """Each of these got the SDK's answer: a pydantic validation dump (a batch, a number, a message
    with jsonrpc 1.0, params as a list), a plain-text line ("Invalid Content-Type header"), a 500
    with uvicorn's error in the log (a GET resuming with Last-Event-ID), a 202 that left the request
    unanswered for ever (an id of 1.5 or true, read as a notification), "Invalid request parameters"
    and nothing more, or an error carrying the id of a session made for it and discarded at once.
    Each now gets one JSON-RPC error, one folio sentence with the fix, at the right status, no
    session made for it; the server's log stays empty and a well-behaved agent goes on."""
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off"})
    try:
        serving(server)
        sid = session(server)
        with_sid = {**ACCEPT, "Mcp-Session-Id": sid}
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ls", "arguments": {}}}
        cases = [  # (what, method, headers, body, status, JSON-RPC code, a phrase of the sentence)
            ("a batch", "POST", with_sid, json.dumps([call]), 400, -32600, "a JSON-RPC batch (an array of 1) is not "
                                                                           "taken"),
            ("a batch opening", "POST", ACCEPT, json.dumps([hello()]), 400, -32600, "send each message in a POST"),
            ("bad JSON", "POST", with_sid, '{"jsonrpc": ', 400, -32700, "the request body is not JSON (Expecting "
                                                                        "value at line 1 column 13)"),
            ("not UTF-8", "POST", with_sid, b"\xff\xfe", 400, -32700, "not UTF-8 text"),
            ("a number", "POST", with_sid, "42", 400, -32600, "JSON but not a JSON-RPC message (42)"),
            ("jsonrpc 1.0", "POST", with_sid, json.dumps({**call, "jsonrpc": "1.0"}), 400, -32600,
             "the message's \"jsonrpc\" is 1.0"),
            ("no method", "POST", with_sid, json.dumps({"jsonrpc": "2.0", "id": 3}), 400, -32600,
             "has no \"method\""),
            ("an id of 1.5", "POST", with_sid, json.dumps({**call, "id": 1.5}), 400, -32600,
             "the tools/call request's \"id\" is 1.5: an id is a string or a whole number"),
            ("an id of true", "POST", with_sid, json.dumps({**call, "id": True}), 400, -32600, "\"id\" is true"),
            ("params as a list", "POST", with_sid, json.dumps({**call, "params": [1]}), 400, -32602,
             "\"params\" is [1]: MCP's params are an object"),
            ("arguments as a list", "POST", with_sid, json.dumps({**call, "params": {"name": "ls", "arguments": [1]}}),
             400, -32602, "params.arguments: input should be a valid dictionary"),
            ("initialize without clientInfo", "POST", ACCEPT,
             json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                 "protocolVersion": "2025-06-18", "capabilities": {}}}), 400, -32602, "params.clientInfo: field "
                                                                                       "required"),
            ("a wrong Content-Type", "POST", {**with_sid, "Content-Type": "text/plain"}, json.dumps(call), 415,
             -32600, "`Content-Type: application/json`, not text/plain"),
            ("no Content-Type", "POST", {"Accept": ACCEPT["Accept"], "Mcp-Session-Id": sid}, json.dumps(call), 415,
             -32600, "(none was given)"),
            ("Accept without event streams", "POST", {**with_sid, "Accept": "application/json"}, json.dumps(call),
             406, -32600, "`Accept: application/json, text/event-stream`"),
            ("a body over the bound", "POST", with_sid, b" " * (4 * 1024 * 1024 + 1), 413, -32600,
             "over 4,194,304 bytes (FOLIO_MCP_MAX_REQUEST)"),
            ("no session", "POST", ACCEPT, json.dumps(call), 400, -32600, "no Mcp-Session-Id header"),
            ("an unknown session", "POST", {**ACCEPT, "Mcp-Session-Id": "0123abcd"}, json.dumps(call), 404, -32600,
             "session 0123abcd is not open: this server never opened it, or has restarted since"),
            ("a protocol it does not speak", "POST", {**with_sid, "MCP-Protocol-Version": "1999-01-01"},
             json.dumps(call), 400, -32600, "MCP-Protocol-Version 1999-01-01 is not a protocol this server speaks"),
            ("a GET without event streams", "GET", {"Accept": "application/json", "Mcp-Session-Id": sid}, None, 406,
             -32600, "send `Accept: text/event-stream`"),
            ("a GET without a session", "GET", {"Accept": "text/event-stream"}, None, 400, -32600,
             "no Mcp-Session-Id header"),
            ("PUT", "PUT", with_sid, json.dumps(call), 405, -32600, "not PUT"),
        ]
        for what, method, head, body, status, code, phrase in cases:
            r = raw(server, method, head, body.encode() if isinstance(body, str) else body)
            assert r.status_code == status, (what, r.status_code, r.text[:300])
            assert phrase in refusal(r), (what, r.text)
            assert r.json()["error"]["code"] == code, (what, r.text)
            assert "mcp-session-id" not in r.headers, (what, r.headers)
        r = raw(server, "POST", with_sid, json.dumps({**call, "params": {}}).encode())
        assert r.json()["id"] == 3, r.text  # the request's id, where it has one, so its caller is answered

        # a resumption (no event store here) opens a new stream instead of a 500
        s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        s.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n"
                  f"Mcp-Session-Id: {sid}\r\nLast-Event-ID: 5\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
        s.close()

        # ended by its client: a later request is told so
        assert raw(server, "DELETE", {"Mcp-Session-Id": sid}).status_code == 200
        r = ping(server, sid)
        assert r.status_code == 404 and "is not open: its client ended it (DELETE)" in refusal(r), r.text

        async def body():
            async with http(server.url) as c:
                got = await c.call_tool("query", {"query": "when is revenue recognised", "mode": "lexical"})
                assert got.structured_content["results"][0]["path"] == "finance/revenue.md"

        anyio.run(body)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err
    clean(err)


def test_origin_and_host_are_matched_whole(corpus):
    """The DNS-rebinding guard matched a prefix: an Origin of `http://127.0.0.1:8080.evil.example`
    (or `http://localhost:1@evil.example`) and a Host of `127.0.0.1:8080.evil.example` passed as this
    machine's. Scheme, name and port are compared whole; every loopback spelling a client or a local
    proxy sends still passes."""
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off"})
    port = server.port
    try:
        serving(server)
        for sent, code in (({"Origin": "http://127.0.0.1:8080.evil.example"}, 403),
                           ({"Origin": "http://localhost:1@evil.example"}, 403),
                           ({"Origin": "http://localhost.evil"}, 403),
                           ({"Origin": f"http://127.0.0.1:{port}/path"}, 403),
                           ({"Origin": "null"}, 403),
                           ({"Origin": "ftp://localhost"}, 403),
                           ({"Host": "127.0.0.1:8080.evil.example"}, 421),
                           ({"Host": f"localhost:{port}@evil.example"}, 421),
                           ({"Host": "127.0.0.1:99999"}, 421),
                           ({"Origin": f"http://127.0.0.1:{port}"}, 200),
                           ({"Origin": f"http://localhost:{port}"}, 200),
                           ({"Origin": f"http://[::1]:{port}"}, 200),
                           ({"Origin": "https://localhost"}, 200),
                           ({"Host": f"LOCALHOST:{port}", "Origin": f"http://LOCALHOST:{port}"}, 200),
                           ({"Host": f"[::1]:{port}"}, 200)):
            r = httpx.post(server.url, json=hello(), headers={**ACCEPT, **sent}, timeout=30)
            assert r.status_code == code, (sent, r.status_code, r.text)
            if code != 200:
                what = "Origin" if code == 403 else "Host header"
                assert refusal(r).startswith(f"folio mcp: the {what} "), r.text
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err
    clean(err)


def test_a_token_served_beyond_loopback_is_warned_of_plain_http(corpus):
    """`FOLIO_MCP_TOKEN=... folio mcp --http --host 0.0.0.0` served the whole network over plain HTTP
    without a word: the token and every answer cross it in clear. One warning line says so and what
    to do; the server serves all the same."""
    server = HttpServer(corpus, "--host", "0.0.0.0", env={"FOLIO_WATCH": "off", "FOLIO_MCP_TOKEN": "s3cret"})
    try:
        serving(server)

        async def body():
            async with http(server.url, token="s3cret") as c:
                got = await c.call_tool("show", {"ref": "ops/oncall.md:1-3"})
                assert not got.is_error, text_of(got)

        anyio.run(body)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err
    lines = err.splitlines()
    assert lines[0].startswith("folio: serving MCP at http://0.0.0.0:") and "(bearer token required)" in lines[0]
    assert lines[1:] == [
        "warning: --host 0.0.0.0 serves this corpus beyond this machine over plain HTTP: the token and every answer "
        "cross the network unencrypted, readable by anyone on the path; put a reverse proxy with TLS in front of "
        "folio (and bind folio to 127.0.0.1), or keep to a network you trust"], err


def test_sigterm_lets_a_call_in_flight_finish_within_the_grace(tmp_path, fake_server, run_folio):
    """A question the embeddings server answers in 0.8 s, SIGTERM as it waits: the SDK's event streams
    were all ended at the signal (sse-starlette's own stop), so the call lost its answer (its stream
    ended empty) though the grace (2 s) would have let it finish. It is answered; another agent's
    open event stream ends once it is, so it does not hold the stop; the server exits 0 and the
    index reads."""
    srv = fake_server()
    root = indexed(tmp_path / "c", FILES, srv, run_folio)
    srv.control(delay_input_containing="okapi", delay_input_ms=800)
    server = HttpServer(root, env={"FOLIO_WATCH": "off"})
    listening = None
    try:
        serving(server)
        listening = stream(server, session(server, "idle"))  # an agent between two calls
        sid = session(server)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "query", "arguments": {"query": "okapi revenue recognised", "mode": "semantic"}}}
        got = []

        def ask() -> None:
            with httpx.Client(timeout=30) as c, \
                    c.stream("POST", server.url, json=call, headers={**ACCEPT, "Mcp-Session-Id": sid}) as r:
                got.append(b"".join(r.iter_raw()))

        async def body():
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, ask)
                end = time.monotonic() + 30
                while srv.stats()["in_flight"] == 0:
                    assert time.monotonic() < end, "the question never reached the embeddings server"
                    await anyio.sleep(0.02)
                server.proc.send_signal(signal.SIGTERM)

        anyio.run(body)
        events = [json.loads(line[len(b"data: "):]) for line in got[0].splitlines() if line.startswith(b"data: ")]
        assert [e.get("id") for e in events] == [2], got
        answer = events[0]["result"]
        assert not answer["isError"] and answer["structuredContent"]["mode"] == "semantic", answer
        assert answer["structuredContent"]["results"][0]["path"] == "finance/revenue.md", answer
    finally:
        if listening is not None:
            listening.close()
        rc, _out, err = server.stop()
    assert rc == 0, err
    clean(err)
    r = run_folio("query", "revenue", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    clean(err)
