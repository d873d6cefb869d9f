"""`folio mcp --http`: the same tools over MCP's streamable HTTP transport, through the SDK's own
HTTP client against a real `folio mcp --http` subprocess (and the fake embeddings server)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from helpers import folio_command, free_port, indexed
from helpers_mcp import HttpServer, http, serving, text_of

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


def test_a_tool_error_that_is_still_an_answer_carries_the_clis_object(corpus, run_folio):
    """`folio show --json` of a file deleted since indexing exits 1 and still prints its object
    (`freshness` `missing`); over MCP the show tool's error carried the sentence alone."""
    root = corpus
    (root / "ops" / "oncall.md").unlink()
    r = run_folio("show", "ops/oncall.md:1-3", "--json", cwd=root)
    assert r.returncode == 1 and r.stderr.splitlines()[-1].startswith("folio: "), r.stderr
    want = json.loads(r.stdout)
    server = HttpServer(root, env={"FOLIO_WATCH": "off"})
    try:
        server.wait_ready()

        async def body():
            async with http(server.url) as c:
                got = await c.call_tool("show", {"ref": "ops/oncall.md:1-3"})
                assert got.is_error and got.structured_content == want, (got.structured_content, want)
                assert text_of(got).startswith("folio: ops/oncall.md no longer exists"), text_of(got)

        anyio.run(body)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0 and "Traceback" not in err, err


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


def partial(server: HttpServer, body: bytes = b"0123456789", head: bytes | None = None):
    """A raw connection that sends `head` (default: a POST's headers announcing 1000 bytes of body), then `body`."""
    if head is None:
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    s.sendall(head + body)
    return s


def reply(s, timeout: float = 30) -> bytes:
    """What the server sends on `s` until it closes the connection (within `timeout` seconds)."""
    s.settimeout(timeout)
    got = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += chunk
    raise AssertionError(f"the connection was still open after {timeout} s; got {got!r}")


def test_sigterm_while_a_body_is_still_arriving_stops_quietly(corpus):
    """A client that sent 10 bytes of a 1000-byte body when SIGTERM comes: its handler waited for the
    body until GRACE ended and uvicorn cancelled it, printing an ASGI CancelledError traceback. It is
    answered 503 at once and the server exits 0 with nothing but its start line. A client that left
    half-way through its body (the SDK logged its ClientDisconnect with a traceback) is not a word either."""
    server = HttpServer(corpus)
    try:
        serving(server)
        partial(server).close()
        s = partial(server)
        time.sleep(0.5)  # the body's first bytes read: the handler waits for the rest
        server.proc.send_signal(signal.SIGTERM)
        got = reply(s)
        assert got.startswith(b"HTTP/1.1 503 "), got
        assert b"the server is stopping" in got
    finally:
        rc, out, err = server.stop()
    assert rc == 0, err
    assert out == "" and err.splitlines()[1:] == [], err


def test_sigterm_cuts_a_call_still_running_after_the_grace_in_one_sentence(tmp_path, fake_server, run_folio):
    """A call still being answered when the stop's grace ends is cancelled: one sentence, not
    uvicorn's error line and a CancelledError traceback."""
    srv = fake_server()
    root = indexed(tmp_path / "c", FILES, srv, run_folio)
    server = HttpServer(root, env={"FOLIO_WATCH": "off"})
    try:
        serving(server)
        (root / "new.md").write_text("# Okapi\n\nThe okapi enclosure opens at nine.\n")
        srv.control(delay_ms=30000)

        async def body():
            async with http(server.url) as c, anyio.create_task_group() as tg:
                async def stop_when_embedding():
                    end = time.monotonic() + 60
                    while srv.stats()["in_flight"] == 0:
                        assert time.monotonic() < end, "the index call never reached the embeddings server"
                        await anyio.sleep(0.05)
                    server.proc.send_signal(signal.SIGTERM)

                tg.start_soon(stop_when_embedding)
                with anyio.fail_after(60), pytest.raises(Exception):  # noqa: B017 - the call is cut: any error
                    await c.call_tool("index", {})

        anyio.run(body)
    finally:
        rc, out, err = server.stop()
    assert rc == 0, err
    assert "Traceback" not in err and "ERROR" not in err, err
    assert err.splitlines()[1:] == ["folio: stopped with 1 request still being answered after 2 s, cut short"], err


@pytest.mark.parametrize("what", ["nothing", "part of the headers", "part of the body", "a byte at a time"])
def test_a_request_that_does_not_arrive_in_time_is_answered_408(tmp_path, fake_server, run_folio, what):
    """Slowloris: a client that trickles its request (or connects and sends nothing) held its
    connection for ever. The request must arrive whole within FOLIO_MCP_READ_TIMEOUT seconds
    (default 30) of the connection being ready, progress or not; an answer takes as long as it takes."""
    srv = fake_server()
    corpus = indexed(tmp_path / "c", FILES, srv, run_folio)
    server = HttpServer(corpus, env={"FOLIO_MCP_READ_TIMEOUT": "1.5", "FOLIO_WATCH": "off"})
    try:
        serving(server)
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n").encode()
        if what == "nothing":
            s = partial(server, b"", b"")
        elif what == "part of the headers":
            s = partial(server, b"", head[:40])
        elif what == "part of the body":
            s = partial(server)
        else:
            s = partial(server, b"", head)
            s.settimeout(0.25)
            sent = 0
            while sent < 1000:  # a byte each 0.25 s: 250 s for the body, each byte in time for an idle timeout
                try:
                    if s.recv(1, socket.MSG_PEEK):  # answered?
                        break
                except TimeoutError:
                    pass
                try:
                    s.sendall(b"x")
                except OSError:
                    break  # closed under us: its answer is read below
                sent += 1
            assert sent < 1000
        got = reply(s, 15)
        assert got.startswith(b"HTTP/1.1 408 "), got
        assert b"did not arrive whole within 1.5 s (FOLIO_MCP_READ_TIMEOUT)" in got

        async def body():  # the server goes on, and a call that takes longer than the deadline is answered
            async with http(server.url) as c:
                got = await c.call_tool("query", {"query": QUESTIONS[0], "mode": "lexical"})
                assert got.structured_content["results"][0]["path"] == "finance/revenue.md"
                await anyio.sleep(2)  # the session's streams outlive the deadline
                (corpus / "new.md").write_text("# Okapi\n\nThe okapi enclosure opens at nine.\n")
                done = await c.call_tool("index", {})
                assert not done.is_error, text_of(done)

        if what == "part of the body":  # once is enough
            srv.control(delay_ms=2500, reset_stats=True)  # the index call's vectors take 2.5 s
            anyio.run(body)
            assert srv.stats()["ok"] >= 1
    finally:
        rc, out, err = server.stop()
    assert rc == 0, err
    assert "Traceback" not in err and err.splitlines()[1:] == [], err


@pytest.mark.parametrize("sig, when", [(signal.SIGTERM, "the port accepts"), (signal.SIGINT, "the port accepts"),
                                       (signal.SIGTERM, "the start line is printed")])
def test_a_stop_during_warm_up_ends_it_cleanly(corpus, sig, when):
    """The port listens before the server has warmed up (imports, the index mapped, the app built)
    and before uvicorn takes the signals: a SIGTERM then ended the process by the signal (exit -15),
    a Ctrl-C in 130 with "interrupted", and one between folio's handler and uvicorn's was lost (the
    server went on). Whenever it comes, it ends the process: exit 0, nothing but the start line."""
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off"})
    try:
        if when == "the port accepts":
            server.wait_ready()
        else:
            assert server.proc.stderr.readline().startswith("folio: serving MCP at ")
        server.proc.send_signal(sig)
        try:
            server.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"folio mcp --http went on after signal {sig} when {when}")
    finally:
        rc, out, err = server.stop()
    assert rc == 0, (rc, err)
    assert out == "" and "Traceback" not in err and "interrupted" not in err, err
    assert [line for line in err.splitlines() if not line.startswith("folio: serving MCP at ")] == [], err


def test_a_client_connecting_as_soon_as_the_port_accepts_waits_for_its_answer(corpus, run_folio):
    """Connections made during warm-up wait (in the listen queue) and are answered once it is done."""
    expected = cli(run_folio, corpus, "query", QUESTIONS[0])
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off"})
    try:
        server.wait_ready()

        async def body():
            async with http(server.url) as c:
                got = await c.call_tool("query", {"query": QUESTIONS[0]})
                assert not got.is_error, text_of(got)
                assert got.structured_content == expected

        anyio.run(body)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0 and "Traceback" not in err, err


def fds(server: HttpServer) -> int:
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the server's descriptors in /proc")
def test_connections_past_the_bound_are_refused_at_once_and_a_client_is_served_once_others_end(corpus):
    """A client opening hundreds of idle connections held a descriptor each (uvicorn's own
    limit_concurrency answers 503 only when a request comes, and keeps the connection): enough of
    them and the process could open no file. Past FOLIO_MCP_MAX_CONNECTIONS a connection is answered
    503 and closed at once; the descriptors stay bounded, and a client is served again as soon as
    the others are closed or time out (FOLIO_MCP_READ_TIMEOUT)."""
    most = 8
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off", "FOLIO_MCP_MAX_CONNECTIONS": str(most),
                                     "FOLIO_MCP_READ_TIMEOUT": "4"})
    hogs: list[socket.socket] = []
    try:
        serving(server)

        async def call():
            async with http(server.url) as c:
                got = await c.call_tool("query", {"query": QUESTIONS[0], "mode": "lexical"})
                assert got.structured_content["results"][0]["path"] == "finance/revenue.md"

        anyio.run(call)  # the files a query maps, mapped
        time.sleep(0.5)  # its connections closed
        before = fds(server)

        def hog(n: int) -> None:
            for _ in range(n):
                hogs.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))

        def refused() -> int:
            """How many of the hogs were answered 503 naming the bound, and closed."""
            n = 0
            for s in hogs:
                s.setblocking(False)
                try:
                    got = s.recv(4096)
                except BlockingIOError:
                    continue  # held: nothing said yet
                except ConnectionResetError:
                    got = b"reset"
                assert got.startswith(b"HTTP/1.1 503 ") and b"FOLIO_MCP_MAX_CONNECTIONS" in got, got
                n += 1
            return n

        hog(200)
        time.sleep(1)
        assert fds(server) <= before + most + 2, (fds(server), before)
        assert refused() == 200 - most
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        r = httpx.post(server.url, json=hello, timeout=30,
                       headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
        assert r.status_code == 503 and "FOLIO_MCP_MAX_CONNECTIONS" in r.text, r.text
        for s in hogs:  # closed by their client
            s.close()
        hogs.clear()
        anyio.run(call)
        hog(most)  # held again, then left idle: each is answered 408 after 4 s and closed
        time.sleep(5.5)
        assert fds(server) <= before + 2, (fds(server), before)
        anyio.run(call)
    finally:
        for s in hogs:
            s.close()
        rc, out, err = server.stop()
    assert rc == 0, err
    assert "Traceback" not in err and err.splitlines()[1:] == [], err


def test_a_connection_bound_past_the_open_file_limit_is_made_room_for_or_said(corpus, run_folio):
    """FOLIO_MCP_MAX_CONNECTIONS above the process's soft limit on open files (`ulimit -n`): the
    connections past it were refused by accept() (EMFILE, logged by uvicorn) and the index could open
    no file. The soft limit is raised toward the hard one as needed; past the hard one, one sentence."""
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off", "FOLIO_MCP_MAX_CONNECTIONS": "300"}, nofile=(120, 4096))
    hogs: list[socket.socket] = []
    try:
        serving(server)
        for _ in range(250):
            hogs.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
        time.sleep(1)
        r = httpx.get(server.url, timeout=30)  # served (an MCP endpoint answers a bare GET with 4xx, not 503)
        assert r.status_code != 503 and r.status_code < 500, (r.status_code, r.text)
        limits = Path(f"/proc/{server.proc.pid}/limits").read_text().splitlines()
        soft = next(ln.split()[3] for ln in limits if ln.startswith("Max open files"))
        assert int(soft) >= 300, soft
    finally:
        for s in hogs:
            s.close()
        rc, out, err = server.stop()
    assert rc == 0, err
    assert "Traceback" not in err and err.splitlines()[1:] == [], err

    r = subprocess.run([*folio_command(), "mcp", "--http", "--port", str(free_port())], cwd=corpus, text=True,
                       capture_output=True, env={**os.environ, "FOLIO_MCP_MAX_CONNECTIONS": "300"},
                       preexec_fn=lambda: __import__("resource").setrlimit(__import__("resource").RLIMIT_NOFILE,
                                                                            (120, 200)), timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("folio: FOLIO_MCP_MAX_CONNECTIONS=300 needs about 364 open files and this process "
                                "may open at most 200 (`ulimit -Hn`): give FOLIO_MCP_MAX_CONNECTIONS=136 or less, "
                                "or raise the limit")


def rss_kib(pid: int) -> int:
    return int(next(ln.split()[1] for ln in open(f"/proc/{pid}/status") if ln.startswith("VmRSS:")))


@pytest.mark.parametrize("framing,bound", [("content-length", None), ("chunked", None), ("chunked", 200_000)])
def test_a_request_of_hundreds_of_megabytes_is_answered_413_and_closed(corpus, framing, bound):
    """A client posting a body of hundreds of megabytes (in time: loopback sends a gigabyte in seconds,
    so the read deadline does not stop it) is refused once it passes FOLIO_MCP_MAX_REQUEST (default
    4 MiB, the MCP SDK's own bound), announced or counted as it arrives: answered 413 and its
    connection closed (the SDK's 413 alone left it open, the client filling it until the read
    deadline), the process's memory not grown with the body, and the server goes on answering."""
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off", **({"FOLIO_MCP_MAX_REQUEST": str(bound)} if bound else {})})
    try:
        serving(server)
        before = rss_kib(server.proc.pid)
        size = 300 * 1024 * 1024
        frame = (f"Content-Length: {size}" if framing == "content-length" else "Transfer-Encoding: chunked")
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\n{frame}\r\n\r\n").encode()
        s = partial(server, b"", head)
        block = b"x" * (1024 * 1024)
        if framing == "chunked":
            block = f"{len(block):x}\r\n".encode() + block + b"\r\n"
        sent = 0
        try:
            while sent < size:
                s.sendall(block)
                sent += len(block)
        except OSError:
            pass  # closed under us: its answer is read below
        assert sent < 40 * 1024 * 1024, "the server read 40 MB of a request bounded at 4 MiB"
        got = reply(s, 5)
        assert got.startswith(b"HTTP/1.1 413 "), got[:200]
        assert rss_kib(server.proc.pid) - before < 40 * 1024, "the server's memory grew with the body"

        async def body():
            async with http(server.url) as c:
                got = await c.call_tool("query", {"query": QUESTIONS[0], "mode": "lexical"})
                assert got.structured_content["results"][0]["path"] == "finance/revenue.md"

        anyio.run(body)
    finally:
        rc, out, err = server.stop()
    assert rc == 0, err
    assert "Traceback" not in err and err.splitlines()[1:] == [], err


@pytest.mark.parametrize("env,value,sentence", [
    ("FOLIO_MCP_READ_TIMEOUT", "soon", "is not a number of seconds above 0: give e.g. FOLIO_MCP_READ_TIMEOUT=30, or "
                                       "unset it for the default (30 s)"),
    ("FOLIO_MCP_MAX_CONNECTIONS", "lots", "is not a whole number above 0: give e.g. FOLIO_MCP_MAX_CONNECTIONS=100, or "
                                          "unset it for the default (100)"),
    ("FOLIO_MCP_MAX_REQUEST", "4M", "is not a whole number of bytes above 0: give e.g. FOLIO_MCP_MAX_REQUEST=4194304, "
                                    "or unset it for the default (4194304)")])
def test_a_bound_that_is_not_a_number_is_one_sentence(corpus, run_folio, env, value, sentence):
    r = run_folio("mcp", "--http", "--port", str(free_port()), cwd=corpus, env={env: value})
    assert r.returncode == 2
    assert r.stderr.strip() == f"folio: {env}={value!r} {sentence}"


def test_a_hung_embeddings_server_holds_no_agent_past_query_timeout(tmp_path, fake_server, run_folio):
    """Several agents, one warm server, an embeddings server that takes the question and never
    answers. Every call was answered in turn on one session: a `show` or `ls` (which ask the server
    nothing) waited behind every question queued before it, and each question waited its own
    `query_timeout` once its turn came, so the fourth of four answered after four times it. Now
    show and ls answer while the questions wait, and each question's time runs from its arrival."""
    srv = fake_server()
    root = indexed(tmp_path / "c", FILES, srv, run_folio)
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\nmodel: fake\nquery_timeout: 4\n")
    srv.control(delay_input_containing="okapi", delay_input_ms=40000)  # takes the request, answers in 40 s
    server = HttpServer(root, env={"FOLIO_WATCH": "off"})
    asked: list[tuple[float, dict]] = []  # each question's (seconds to its answer, the answer)
    read: list[tuple[str, int]] = []  # (tool, questions answered when it returned)
    try:
        serving(server)

        async def question(n: int):
            async with http(server.url) as c:
                t = time.monotonic()
                got = await c.call_tool("query", {"query": f"okapi enclosure {n}"})
                asked.append((time.monotonic() - t, got.structured_content))

        async def reader():
            end = time.monotonic() + 60
            while srv.stats()["in_flight"] == 0:
                assert time.monotonic() < end, "no question reached the embeddings server"
                await anyio.sleep(0.05)
            async with http(server.url) as c:
                got = await c.call_tool("show", {"ref": "ops/oncall.md:1-3"})
                assert not got.is_error, text_of(got)
                read.append(("show", len(asked)))
                got = await c.call_tool("ls", {"where": "status=live"})
                assert [d["path"] for d in got.structured_content["documents"]] == ["people/hiring.md"]
                read.append(("ls", len(asked)))

        async def body():
            with anyio.fail_after(90):
                async with anyio.create_task_group() as tg:
                    for n in range(4):
                        tg.start_soon(question, n)
                    tg.start_soon(reader)

        anyio.run(body)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err
    assert read == [("show", 0), ("ls", 0)], read  # answered while every question still waited
    assert len(asked) == 4
    for took, answer in asked:
        assert answer["mode"] == "lexical" and any("query_timeout" in n for n in answer["notices"]), answer
        assert took < 8, f"a question waited {took:.1f} s on a server that never answers (query_timeout 4 s)"


def test_the_index_tool_waits_for_the_servers_own_live_index_instead_of_refusing(tmp_path, fake_server, run_folio):
    """An agent writes a file and calls `index` while the server's own live index is embedding it:
    the call was refused with "another folio is writing the index ... call the index tool again
    after it finishes", as if some other program held it, and the agent had to guess when to call
    again. The server's own writer finishes its burst soon: the call waits for it, then runs."""
    srv = fake_server()
    root = indexed(tmp_path / "c", FILES, srv, run_folio)
    server = HttpServer(root)
    try:
        serving(server)
        srv.control(delay_ms=3000, reset_stats=True)  # each request of the live index takes 3 s
        (root / "new.md").write_text("# Okapi\n\nThe okapi enclosure opens at nine.\n")
        end = time.monotonic() + 60
        while srv.stats()["in_flight"] == 0:  # the live index holds the lock, embedding new.md
            assert time.monotonic() < end, "the live index never asked the embeddings server"
            time.sleep(0.05)

        async def body():
            async with http(server.url) as c:
                with anyio.fail_after(90):
                    done = await c.call_tool("index", {})
                assert not done.is_error, text_of(done)
                got = await c.call_tool("query", {"query": "okapi enclosure", "mode": "semantic"})
                assert got.structured_content["results"][0]["path"] == "new.md", text_of(got)

        anyio.run(body)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err


def test_a_host_header_without_a_port_is_this_loopback_servers(corpus):
    """A client of a server on port 80 sends `Host: 127.0.0.1` (HTTP leaves the default port out),
    and so does a local proxy forwarding to folio under the name it was reached by: the DNS-rebinding
    guard allowed only `NAME:PORT`, so every such request was refused 421 "Invalid Host header".
    A web page's own name is still refused, with or without a port."""
    server = HttpServer(corpus, env={"FOLIO_WATCH": "off"})
    try:
        serving(server)
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        for sent, code in (({"Host": "127.0.0.1"}, 200), ({"Host": "localhost"}, 200), ({"Host": "[::1]"}, 200),
                           ({"Host": "localhost", "Origin": "http://localhost"}, 200),
                           ({"Host": "evil.com"}, 421), ({"Host": "evil.com:80"}, 421),
                           ({"Origin": "http://evil.com"}, 403)):
            r = httpx.post(server.url, json=hello, headers={**headers, **sent}, timeout=30)
            assert r.status_code == code, (sent, r.status_code, r.text)
    finally:
        rc, _out, err = server.stop()
    assert rc == 0, err
