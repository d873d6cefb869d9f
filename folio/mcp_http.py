"""`folio mcp --http`: the same MCP tools over the streamable HTTP transport at `/mcp`, one warm
server for several agents at once (each client of the initialize handshake its own MCP session, every
call answered by the search sessions of mcp.Server, as over stdio).

Owns where it listens and who may call it: loopback by default (with mcp_door's DNS-rebinding guard
on the Host and Origin headers; mcp_door also checks each request and bounds the sessions and each
client's share of the connections); any
other address is refused unless FOLIO_MCP_TOKEN holds a secret, and whenever that is set every
request must carry it as `Authorization: Bearer TOKEN` (Bearer, below, checks it before the SDK sees
the request). Also the socket (bound here, so a port in use is one sentence), the connections
(protocol(): at most MAX_CONNECTIONS open at once, a request must arrive whole within READ_TIMEOUT
seconds, else 408) and the stop: SIGTERM or Ctrl-C gives the calls being answered up to GRACE
seconds, then ends the event streams still open (quiet_streams, Door.drained) and exits 0, a request
still arriving answered 503 and one still being answered after GRACE cut in one sentence (Whole,
quiet_cut), never a traceback; while it starts, it ends the process at once, exit 0
(serve()). Must not hold tool logic (mcp.py) or print except through folio.console.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
import sys
from pathlib import Path

from folio.errors import FolioError
from folio.mcp_door import INVALID, PATH, Refusal  # PATH: the SDK's default one

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "FOLIO_MCP_TOKEN"
GRACE = 2  # seconds the calls being answered get to finish once the server is told to stop
READ_ENV = "FOLIO_MCP_READ_TIMEOUT"
READ_TIMEOUT = 30.0  # seconds a request's headers and body get to arrive, from when the connection is ready for it
MOST_ENV = "FOLIO_MCP_MAX_CONNECTIONS"
# Connections open at once: a few per agent (its session's event stream, a POST per call in flight),
# dozens of agents, far below the 1024 descriptors a process commonly may open.
MAX_CONNECTIONS = 100
SIZE_ENV = "FOLIO_MCP_MAX_REQUEST"
# Bytes a request's body may hold (the MCP SDK's own default bound): a tool call is a question, a ref
# or a document's text (the similar tool), far below this; a body is held whole in memory until read.
MAX_REQUEST = 4 * 1024 * 1024
HEADERS = 64 * 1024  # what the headers may add to it (h11 refuses more than 16 KiB of them)


def loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token() -> str | None:
    value = os.environ.get(TOKEN_ENV)
    return value if value else None


def read_timeout() -> float:
    """FOLIO_MCP_READ_TIMEOUT's seconds, or READ_TIMEOUT."""
    return _positive(READ_ENV, READ_TIMEOUT, float, "a number of seconds above 0", "30")


def max_connections() -> int:
    """FOLIO_MCP_MAX_CONNECTIONS, or MAX_CONNECTIONS."""
    return _positive(MOST_ENV, MAX_CONNECTIONS, int, "a whole number above 0", str(MAX_CONNECTIONS))


RESERVE = 64  # descriptors the server needs besides its connections: the indexes' files, the listening socket


def room_for(most: int) -> None:
    """Let the process hold `most` connections and its own files: the soft RLIMIT_NOFILE raised toward
    the hard one where it is lower (a connection past it was refused by accept(), EMFILE, and the
    index could open no file); past the hard one, one sentence naming both and the fix."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = most + RESERVE
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    if hard != resource.RLIM_INFINITY and need > hard:
        raise FolioError(f"{MOST_ENV}={most} needs about {need:,} open files and this process may open at most "
                         f"{hard:,} (`ulimit -Hn`): give {MOST_ENV}={max(1, hard - RESERVE)} or less, or raise the "
                         f"limit", exit_code=2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def max_per_client(most: int) -> int:
    """FOLIO_MCP_MAX_PER_CLIENT, or a third of the `most` connections (mcp_door.Door.held: one client
    cannot take more than its share of them)."""
    from folio.mcp_door import PER_CLIENT_ENV

    share = max(1, most // 3)
    return _positive(PER_CLIENT_ENV, share, int, "a whole number above 0", str(share))


def max_sessions() -> int:
    """FOLIO_MCP_MAX_SESSIONS, or mcp_door.MAX_SESSIONS."""
    from folio.mcp_door import MAX_SESSIONS, SESSIONS_ENV

    return _positive(SESSIONS_ENV, MAX_SESSIONS, int, "a whole number above 0", str(MAX_SESSIONS))


def oversize(size: int) -> str:
    return f"the request is over {size:,} bytes ({SIZE_ENV}): send less in one call, or raise it"


def max_request() -> int:
    """FOLIO_MCP_MAX_REQUEST's bytes, or MAX_REQUEST."""
    return _positive(SIZE_ENV, MAX_REQUEST, int, "a whole number of bytes above 0", str(MAX_REQUEST))


def _positive(env: str, default, kind, what: str, example: str):
    """The environment's `env` read as `kind`, or `default` where it is unset; a value that is not
    above 0 (or not a number) is one sentence, exit 2."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = 0
    if not 0 < value < float("inf"):
        raise FolioError(f"{env}={raw!r} is not {what}: give e.g. {env}={example}, or unset it for the default "
                         f"({f'{default:g} s' if kind is float else default})", exit_code=2)
    return value


def check_bind(host: str, secret: str | None) -> None:
    """Refuse a non-loopback address without a token, in one sentence with the fix."""
    if loopback(host) or secret:
        return
    raise FolioError(f"--host {host} is not a loopback address, and anyone who reaches it could read this corpus "
                     f"through folio: set {TOKEN_ENV} to a secret (every request must then carry it as "
                     f"`Authorization: Bearer <secret>`), or serve on {DEFAULT_HOST}", exit_code=2)


def clear_text(host: str) -> str:
    """The warning for a server beyond loopback: it speaks plain HTTP (check_bind let it, a token set)."""
    return (f"warning: --host {host} serves this corpus beyond this machine over plain HTTP: the token and every "
            f"answer cross the network unencrypted, readable by anyone on the path; put a reverse proxy with TLS in "
            f"front of folio (and bind folio to {DEFAULT_HOST}), or keep to a network you trust")


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or one sentence naming the address and the fix."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise FolioError(f"--host {host} is not an address this machine can listen on ({e.strerror}): give an IP "
                         f"address or a name that resolves to one of this machine's", exit_code=2) from None
    family, kind, proto, _name, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise FolioError(f"cannot listen on {host}:{port} ({e.strerror or e}): another program holds the port, or "
                         f"it needs privileges; choose another with --port") from None
    sock.set_inheritable(True)
    return sock


class Bearer:
    """ASGI guard: every HTTP request carries `Authorization: Bearer <secret>`, else 401."""

    def __init__(self, app, secret: str):
        self.app = app
        self.expected = secret.encode("utf-8")

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = b""
            for name, value in scope.get("headers", ()):
                if name == b"authorization":
                    scheme, _, credentials = value.partition(b" ")
                    # the scheme's name is case-insensitive (RFC 9110 11.1); the token is compared exactly
                    given = credentials.strip() if scheme.lower() == b"bearer" else b""
            if not hmac.compare_digest(given, self.expected) or not given:
                no = Refusal(401, INVALID, f"this server needs its token: send the header `Authorization: Bearer "
                                           f"<{TOKEN_ENV}>`", headers=[(b"www-authenticate", b'Bearer realm="folio"')])
                await no.send(send)
                return
        await self.app(scope, receive, send)


class Whole:
    """ASGI: a request whose client is gone before its body is whole (it left, or protocol() cut it)
    ends here, unanswered: the SDK would log the starlette ClientDisconnect as an error, with its
    traceback, and pass it into the MCP session. The app is still reading the body then (the SDK
    reads it whole before handling anything), so cancelling it leaves nothing half done."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        whole = False
        with anyio.CancelScope() as cut:
            async def watched():
                nonlocal whole
                message = await receive()
                if message["type"] == "http.request":
                    whole = whole or not message.get("more_body", False)
                elif not whole:  # http.disconnect with the body still owed
                    cut.cancel()
                    await anyio.sleep_forever()
                return message

            await self.app(scope, watched, send)


def _refusal(status: int, reason: str, sentence: str) -> bytes:
    """A JSON-RPC error carrying `sentence`, as mcp_door answers, written as raw HTTP."""
    body = Refusal(status, INVALID, sentence).body()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


def protocol(limit: float, most: int = MAX_CONNECTIONS, size: int = MAX_REQUEST):
    """uvicorn's h11 protocol, with a bound on the connections open at once, a deadline on reading a
    request (uvicorn has none: a client that trickles its headers or body, or connects and sends
    nothing, held its connection for ever), a bound on a request's bytes and a stop that does not
    wait for a request still arriving.

    A request past `size` bytes of body and HEADERS of headers (as they arrive: a Content-Length or
    chunks alike) is answered 413 and its connection closed. mcp_door, given the same bound for the
    body, answers 413 first where a Content-Length announces more (and closes the connection once it
    has: the SDK's 413 left it open, the client filling it, and a client's next request on it was
    reset); chunks are counted here; the read deadline bounds a request's time, not its bytes (a
    gigabyte arrives over loopback in seconds). Once past the bound, an answer already given, the
    connection is closed.

    A connection past the `most` already open is answered 503 and closed as soon as it is accepted,
    so that hundreds of connections, idle or slow, hold no more than `most` descriptors and buffers.
    (uvicorn's limit_concurrency does not bound them: it answers 503 only once a request arrives,
    keeping the connection, and then refuses the requests of connections already open too.) An
    idle connection does not hold its place for long: the read deadline below covers one that never
    sends, and one idle between requests (uvicorn's keep-alive closes it after 5 s).

    A request must have arrived whole (headers and body) within `limit` seconds of the moment the
    connection was ready for it (opened, or its previous response finished; uvicorn's keep-alive
    closes an idle one after 5 s); past that it is answered 408 and the connection closed. An answer
    being written, however long (a stream, an `index` call), has no deadline. On SIGTERM, a request
    whose body is still arriving is answered 503 and closed at once: its handler was waiting for the
    body and would otherwise be cancelled at the end of GRACE, which uvicorn reports with a traceback."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        deadline = None  # the asyncio.TimerHandle of the request being read
        got = 0  # the bytes of the request being read, so far

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > most:
                self.connections.discard(self)  # not counted while it closes
                self._refuse(503, "Service Unavailable", f"{most} connections are open, as many as this server "
                                                         f"takes at once ({MOST_ENV}): try again once one closes, "
                                                         f"or raise it")
                return
            self._follow()

        def data_received(self, data: bytes) -> None:
            self.got += len(data)
            if self.got > size + HEADERS:
                if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # no answer begun
                    self._refuse(413, "Content Too Large", oversize(size))
                else:
                    self.transport.close()
                return
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # may start the next request, from bytes already here
            self._follow()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def shutdown(self) -> None:
            if self.conn.their_state is h11.SEND_BODY and self.conn.our_state is h11.SEND_RESPONSE:
                self._refuse(503, "Service Unavailable", "the server is stopping; send the request again once "
                                                         "it is back")
            else:
                super().shutdown()

        def _follow(self) -> None:
            """Armed while the peer owes a request (IDLE: none or part of its headers; SEND_BODY)."""
            if self.transport.is_closing():
                self._disarm()
            elif self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                if self.deadline is None:
                    self.deadline = self.loop.call_later(limit, self._expired)
                    self.got = 0 if self.conn.their_state is h11.IDLE else self.got
            else:
                self._disarm()

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def _expired(self) -> None:
            self.deadline = None
            if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # no answer begun
                self._refuse(408, "Request Timeout", f"the request did not arrive whole within {limit:g} s "
                                                     f"({READ_ENV}): send the whole request at once")
            else:
                self.transport.close()  # an answer (e.g. a 401) was given before the body came: just close

        def _refuse(self, status: int, reason: str, sentence: str) -> None:
            """Answer `status` outside h11 (which cannot answer a request it has not read), close, and let
            the handler of a request under way see the client gone."""
            self._disarm()
            self._drain()
            self.transport.write(_refusal(status, reason, sentence))
            self.transport.close()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True  # its later sends are dropped, its receive says http.disconnect
                cycle.message_event.set()

        def _drain(self) -> None:
            """Read what the peer sent and nobody read (a request that came with the connection): a
            socket closed with unread bytes resets the connection, and the peer would see the reset
            instead of the answer. A bounded read, without blocking."""
            sock = self.transport.get_extra_info("socket")
            if sock is None:
                return
            try:
                for _ in range(16):
                    if not os.read(sock.fileno(), 65536):
                        return
            except OSError:  # BlockingIOError: nothing more there
                return

    return Protocol


def quiet_cut(say):
    """A filter for uvicorn's log: a request still running when GRACE ends is cancelled, which uvicorn
    reports as an error line and a CancelledError traceback per request; `say` gets one sentence
    instead. Nothing else is cancelled inside a request, so every other record is kept."""
    import asyncio
    import logging

    class Cut(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if isinstance(record.msg, str) and record.msg.startswith("Cancel %s running task"):
                n = record.args[0] if isinstance(record.args, tuple) and record.args else "some"
                say(f"folio: stopped with {n} request{'' if n == 1 else 's'} still being answered after "
                    f"{GRACE} s, cut short")
                return False
            return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))

    return Cut()


def quiet_streams():
    """What ends the MCP SDK's event streams when the server stops, now that they no longer end by
    themselves: sse-starlette ended every stream at SIGTERM, so a call that would have answered within
    GRACE lost its answer (its client saw the stream end without one)."""
    try:
        from sse_starlette.sse import AppStatus

        AppStatus.disable_automatic_graceful_drain()
    except (ImportError, AttributeError):  # the SDK streams some other way: its own stop stands
        return lambda: None

    def end() -> None:
        AppStatus.should_exit = True

    return end


def serve(roots: list[Path], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serve over HTTP until SIGTERM or Ctrl-C; then exit 0.

    The port listens from the start, before the warm-up (imports, each index opened and mapped,
    the app built: about a second), so that a port in use is said at once and a client started
    beside the server needs no retry: a connection made during the warm-up waits in the listen
    queue and is answered once the server is up, as any other. A SIGTERM or Ctrl-C from the first
    line here on ends the process with exit 0 and nothing on stderr: during the warm-up at once
    (no request has been read, so none is cut; a client waiting in the queue sees its connection
    closed), once uvicorn runs as the stop the module's header describes (a second Ctrl-C cuts its
    grace short), and once that stop is done, while the index is closed, at once again."""
    import signal

    served = None  # the uvicorn server while it runs

    def stop(sig, frame) -> None:
        if served is None:  # warming up (nothing to finish), or the stop is over and the index closing
            sys.stderr.flush()
            os._exit(0)
        served.handle_exit(sig, frame)  # uvicorn's stop: open streams get GRACE seconds

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    import uvicorn

    from folio import mcp
    from folio.console import err

    secret = token()
    check_bind(host, secret)
    limit = read_timeout()
    most = max_connections()
    room_for(most)
    size = max_request()
    sessions = max_sessions()
    per_client = max_per_client(most)
    sock = bind(host, port)
    server = mcp.Server(roots)
    follower = mcp.follow(roots)
    from mcp.server.transport_security import TransportSecuritySettings

    from folio.mcp_door import Door, names

    # The Door guards Host and Origin (exactly: the SDK's guard matched a prefix) and bounds the
    # sessions (ending an idle one for room: the SDK refused every new one at its bound, 10,000, and
    # ended a session after 30 idle minutes, an agent's between two questions): the SDK's own are off.
    app = mcp.build(server).streamable_http_app(
        streamable_http_path=PATH, host=host, max_request_body_size=size, session_idle_timeout=None, max_sessions=None,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    app = door = Door(app, size, oversize(size), sessions, names(host) if loopback(host) else None, per_client)
    shown = f"[{host}]" if ":" in host else host
    bound = sock.getsockname()[1]
    err(f"folio: serving MCP at http://{shown}:{bound}{PATH} for {', '.join(map(str, server.roots))}"
        + (" (bearer token required)" if secret else "") + "; Ctrl-C or SIGTERM stops")
    if not loopback(host):
        err(clear_text(host))
    config = uvicorn.Config(Whole(Bearer(app, secret) if secret else app), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=GRACE, lifespan="on", http=protocol(limit, most, size))
    import logging

    logging.getLogger("uvicorn.error").addFilter(quiet_cut(err))

    end_streams = quiet_streams()

    class Served(uvicorn.Server):
        def capture_signals(self):
            # `stop` above keeps the signals throughout: uvicorn's own handlers would leave a gap
            # before they are set (a signal in it was lost) and raise the signal again on the way out
            import contextlib

            return contextlib.nullcontext()

        async def shutdown(self, sockets=None):
            # the calls being answered get the grace; the event streams end once they are done, or
            # just before the grace ends (a call still running then is told its stream ended)
            import asyncio

            ending = asyncio.ensure_future(door.drained(GRACE - 0.6, end_streams))
            try:
                await super().shutdown(sockets)
            finally:
                ending.cancel()

    try:
        served = Served(config)
        served.run(sockets=[sock])
    finally:
        served = None
        if follower is not None:
            follower.stop()
        server.close()
        sock.close()
    # the follower's thread may be in a run: cut it as SIGTERM cuts `folio index` (its batches stay)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
