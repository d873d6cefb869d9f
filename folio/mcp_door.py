"""`folio mcp --http`'s front door: what a request must be before the MCP SDK's streamable HTTP
transport sees it, and the sessions that transport keeps (Door, an ASGI app in front of the SDK's).

Owns:
- the DNS-rebinding guard on a loopback address (names()): a Host or Origin header is parsed and
  compared whole, scheme, host and port, with the loopback names this server answers to (a prefix
  of one, `http://127.0.0.1:8080.evil.example`, used to pass the SDK's guard);
- the requests of MCP's session wire (no MCP-Protocol-Version header, or one of the handshake
  versions), checked before the SDK reads them: the method, Content-Type, Accept, the body's size,
  the body as one JSON-RPC message (message(): a batch, bad JSON, a malformed message or id, the
  params of initialize and tools/call), the Mcp-Session-Id header. Each refusal is one JSON-RPC
  error carrying one folio sentence that says the fix, at the HTTP status the transport's spec
  gives, where the SDK answered with a validation dump, a plain-text line, a 500, a 202 that left
  the request unanswered, or a session id it had just discarded. A request of the 2026 wire (its
  version header names a newer protocol, without sessions) passes on after the Host, Origin and
  Content-Type checks: the SDK answers its errors in sentences of its own;
- the sessions (Sessions): at most FOLIO_MCP_MAX_SESSIONS; a session stays open until its client
  deletes it, however long it is idle, unless room is needed for a new one: then the session ended
  is an idle one (no call or event stream open) of the client holding the most sessions, one that
  never made a request past its handshake first, else the one idle longest, so that a client that
  initialises in a loop ends its own sessions, not another agent's. An ended session's id is
  answered 404 saying why.
- the requests one client has open at once (Door.held): at most FOLIO_MCP_MAX_PER_CLIENT, a third
  of the connections by default, so that one client (an agent reopening its event stream in a
  loop, or firing calls that hang) cannot hold every connection and lock the other agents out; past
  it a request is answered 429 in one sentence. A client is what the sessions' bound calls one: the
  peer's address with the name and version its clientInfo gives (initialize's on the session wire,
  each request's `_meta` on the 2026 wire). On loopback every agent's address is 127.0.0.1, and the
  token (one shared secret) names no agent, so the clientInfo is what tells agents apart; a session
  would tell one agent's from another's, but would not bound an agent that opens a session per
  stream. Agents of one make (the same clientInfo) on one machine share the bound, hence its size.
  A request counts from when it has arrived whole (a GET or DELETE: its headers) until its answer
  ends; one still arriving is bounded by the read deadline instead (mcp_http). A DELETE and a
  message without an id (a notification, answered at once) are never refused: they end things.
- how many POSTs are being answered, which the stop waits for before it ends the event streams
  (drained()).

Must not: hold tool logic (mcp.py), bind, listen or stop (mcp_http.py), or print: a refusal is the
client's answer, never a line in the server's log.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass

PATH = "/mcp"
SESSIONS_ENV = "FOLIO_MCP_MAX_SESSIONS"
PER_CLIENT_ENV = "FOLIO_MCP_MAX_PER_CLIENT"
# Sessions open at once: an agent holds one for its whole run; twice the connections a server takes
# at once (mcp_http.MAX_CONNECTIONS), so that with every connection holding a session's event stream,
# room for a new session can still be made by ending an idle one. About 40 KiB each.
MAX_SESSIONS = 200
SESSION = "mcp-session-id"
PARSE, INVALID, PARAMS, INTERNAL = -32700, -32600, -32602, -32603  # JSON-RPC's error codes
REMEMBERED = 1024  # ended sessions whose reason a later request is told


def names(host: str) -> frozenset[str]:
    """The names a loopback server bound to `host` answers to, as a Host header spells them."""
    bare = host.strip("[]").lower()
    return frozenset({f"[{bare}]" if ":" in bare else bare, "127.0.0.1", "localhost", "[::1]"})


_PORT = re.compile(r"[0-9]{1,5}")
_ORIGIN = re.compile(r"(https?)://([^/?#@\\\s]+)")


def _hostport(value: str, allowed: frozenset[str]) -> bool:
    """`value` is NAME or NAME:PORT, NAME one of `allowed` and PORT a port number, nothing more."""
    value = value.lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name += "]"
        if rest and not rest.startswith(":"):
            return False
        port = rest[1:] if rest else None
    else:
        name, colon, port = value.partition(":")
        port = port if colon else None
    if port is not None and not (_PORT.fullmatch(port) and 0 < int(port) < 65536):
        return False
    return name in allowed


def host_ok(value: str | None, allowed: frozenset[str]) -> bool:
    return value is not None and _hostport(value, allowed)


def origin_ok(value: str | None, allowed: frozenset[str]) -> bool:
    """No Origin (a request that is not a web page's), or http(s)://NAME[:PORT] of this machine's loopback."""
    if value is None:
        return True
    m = _ORIGIN.fullmatch(value)
    return m is not None and _hostport(m.group(2), allowed)


def _shown(value, most: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= most else text[:most - 3] + "..."


class Refusal(Exception):
    """A request refused: the HTTP status, the JSON-RPC code, the sentence, the request's id if known."""

    def __init__(self, status: int, code: int, sentence: str, rid=None, headers=()):
        super().__init__(sentence)
        self.status, self.code, self.sentence, self.rid, self.headers = status, code, sentence, rid, list(headers)

    def body(self) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": self.rid,
                           "error": {"code": self.code, "message": f"folio mcp: {self.sentence}"}}).encode()

    async def send(self, send) -> None:
        body = self.body()
        await send({"type": "http.response.start", "status": self.status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                *self.headers]})
        await send({"type": "http.response.body", "body": body})


ONE = "send one JSON-RPC message, a JSON object, in each POST"


def message(body: bytes) -> dict:
    """The one JSON-RPC message a POST of the session wire carries, or Refusal in a sentence."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise Refusal(400, PARSE, f"the request body is not UTF-8 text: {ONE}") from None
    except json.JSONDecodeError as e:
        raise Refusal(400, PARSE, f"the request body is not JSON ({e.msg} at line {e.lineno} column {e.colno}): "
                                  f"{ONE}") from None
    if isinstance(obj, list):
        raise Refusal(400, INVALID, f"a JSON-RPC batch (an array of {len(obj)}) is not taken: MCP over HTTP carries "
                                    f"one message per POST (protocol 2025-06-18 dropped batches); send each message "
                                    f"in a POST of its own")
    if not isinstance(obj, dict):
        raise Refusal(400, INVALID, f"the request body is JSON but not a JSON-RPC message ({_shown(obj)}): {ONE}, "
                                    f"with \"jsonrpc\": \"2.0\"")
    rid = obj.get("id")
    good_id = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    echo = rid if good_id else None
    if obj.get("jsonrpc") != "2.0":
        given = f"'s \"jsonrpc\" is {_shown(obj['jsonrpc'])}" if "jsonrpc" in obj else " has no \"jsonrpc\""
        raise Refusal(400, INVALID, f"the message{given}: a JSON-RPC message carries \"jsonrpc\": \"2.0\"", echo)
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise Refusal(400, INVALID, f"the message's \"method\" is {_shown(method)}: give the method's name, e.g. "
                                        f"\"tools/call\"", echo)
        if "id" in obj and not good_id:
            # the SDK read it as a notification: answered 202, the request never answered
            raise Refusal(400, INVALID, f"the {method} request's \"id\" is {_shown(rid)}: an id is a string or a "
                                        f"whole number (its answer carries it back)")
        if "params" in obj and not isinstance(obj["params"], dict):
            raise Refusal(400, PARAMS, f"the {method} request's \"params\" is {_shown(obj['params'])}: MCP's params "
                                       f"are an object of named arguments", echo)
        _params(obj, method, echo)
    elif "id" not in obj or not ("result" in obj or "error" in obj):
        raise Refusal(400, INVALID, "the message has no \"method\" (a request or a notification) and is not a "
                                    "response (an \"id\" with a \"result\" or an \"error\")", echo)
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    try:
        jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except ValidationError as e:
        raise Refusal(400, INVALID, f"the message is not one MCP reads ({_first(e)}): {ONE}", echo) from None
    return obj


def _params(obj: dict, method: str, echo) -> None:
    """The params of the two requests a client writes by hand, initialize and tools/call, as MCP
    takes them: the SDK answered a mistake in them with "Invalid request parameters" and nothing more."""
    import mcp_types
    from pydantic import ValidationError

    model = {"initialize": mcp_types.InitializeRequestParams, "tools/call": mcp_types.CallToolRequestParams}.get(method)
    if model is None:
        return
    try:
        model.model_validate(obj.get("params", {}), by_name=False)
    except ValidationError as e:
        example = ('{"name": "query", "arguments": {"query": "..."}}' if method == "tools/call" else
                   '{"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "...", '
                   '"version": "..."}}')
        raise Refusal(400, PARAMS, f"the {method} request's params are not what MCP takes ({_first(e, 'params')}): "
                                   f"give e.g. {example}", echo) from None


def _first(e, prefix: str = "") -> str:
    err = e.errors()[0]
    where = ".".join([prefix, *map(str, err["loc"])] if prefix else map(str, err["loc"]))
    return f"{where}: {err['msg'][:1].lower()}{err['msg'][1:]}" if where else err["msg"]


def _media(value: str | None) -> list[str]:
    return [part.split(";")[0].strip().lower() for part in (value or "").split(",")]


def _accepts(value: str | None, wanted: str) -> bool:
    kinds = _media(value)
    return wanted in kinds or "*/*" in kinds or f"{wanted.split('/')[0]}/*" in kinds


@dataclass
class Session:
    client: tuple  # who opened it: the peer's address and the clientInfo its initialize gave
    last: float  # when a request of it last started or ended (time.monotonic())
    used: bool = False  # it made a request past its handshake (initialize, ping, notifications)
    busy: int = 0  # its requests being answered now (an open event stream is one)


class Sessions:
    """The sessions the SDK holds, as this door saw them opened and ended, and which to end for room."""

    def __init__(self, most: int):
        self.most = most
        self.open: dict[str, Session] = {}
        self.opening = 0  # initialize requests being answered, not yet given their session
        self.ended: OrderedDict[str, str] = OrderedDict()  # id -> why, the last REMEMBERED

    def full(self) -> bool:
        return len(self.open) + self.opening >= self.most

    def victim(self) -> str | None:
        """The session to end for a new one: idle, of the client holding the most; unused, else idle longest."""
        idle = [(sid, s) for sid, s in self.open.items() if not s.busy]
        if not idle:
            return None
        held = Counter(s.client for s in self.open.values())
        return min(idle, key=lambda item: (-held[item[1].client], item[1].used, item[1].last))[0]

    def forget(self, sid: str, why: str) -> Session | None:
        self.ended[sid] = why
        self.ended.move_to_end(sid)
        while len(self.ended) > REMEMBERED:
            self.ended.popitem(last=False)
        return self.open.pop(sid, None)

    def why_not(self, sid: str) -> str:
        return self.ended.get(sid, "this server never opened it, or has restarted since")


class Door:
    """ASGI: the requests to PATH checked, the sessions counted, before the SDK's app (see the header)."""

    def __init__(self, app, size: int, oversize: str, most_sessions: int = MAX_SESSIONS,
                 allowed: frozenset[str] | None = None, per_client: int | None = None):
        self.app = app
        self.size = size
        self.oversize = oversize  # the sentence for a body past `size`
        self.allowed = allowed  # the loopback names Host and Origin must give; None: not on loopback
        self.sessions = Sessions(most_sessions)
        self.calls = 0  # POSTs being answered
        self.per_client = per_client  # requests one client may have open at once; None: no bound
        self.held: Counter = Counter()  # client -> its requests being answered now
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS

        self.handshake = HANDSHAKE_PROTOCOL_VERSIONS  # the protocols with initialize and sessions
        self.spoken = SUPPORTED_PROTOCOL_VERSIONS

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        post = scope["method"] == "POST"
        self.calls += post
        try:
            await self._checked(scope, receive, send)
        except Refusal as no:
            await no.send(send)
        finally:
            self.calls -= post

    async def drained(self, within: float, end_streams) -> None:
        """On the way out: wait for the POSTs being answered (up to `within` seconds), then
        `end_streams()`, which ends the event streams still open (a session's GET, a call not done)."""
        import anyio

        deadline = time.monotonic() + within
        while self.calls and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        end_streams()

    async def _checked(self, scope, receive, send):
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))  # the first, as the SDK reads
        self._guard(headers)
        method = scope["method"]
        if method == "POST":
            told = headers.get("content-length", "")
            if told.isdigit() and int(told) > self.size:
                raise self._too_big()
            kind = _media(headers.get("content-type"))[0]
            if kind != "application/json":
                raise Refusal(415, INVALID, f"a POST to {PATH} carries a JSON-RPC message as `Content-Type: "
                                            f"application/json`" + (f", not {_shown(kind)}" if kind else
                                                                     " (none was given)"))
            scope = _with(scope, {"content-type": "application/json"})  # the SDK's transport reads it case-sensitively
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in self.spoken:
            raise Refusal(400, INVALID, f"MCP-Protocol-Version {_shown(version)} is not a protocol this server speaks "
                                        f"({', '.join(self.spoken)}): send one of them")
        if version is not None and version not in self.handshake:  # the 2026 wire: no sessions, its own errors
            info, rid, refuse = {}, None, method != "DELETE"
            if method == "POST":
                body = await self._body(receive)
                receive = _replay(body, receive)
                info, rid, refuse = _meta_client(body)
            with self._hold(_client(scope, info), rid, refuse):
                await self.app(scope, receive, send)
            return
        if method not in ("POST", "GET", "DELETE"):
            raise Refusal(405, INVALID, f"{PATH} takes POST (a message), GET (the session's event stream) and DELETE "
                                        f"(end the session), not {method}",
                          headers=[(b"allow", b"GET, POST, DELETE")])
        sid = headers.get(SESSION)
        if method == "GET":
            if not _accepts(headers.get("accept"), "text/event-stream"):
                raise Refusal(406, INVALID, f"a GET to {PATH} opens the session's event stream: send `Accept: "
                                            f"text/event-stream` (requests are POSTs)")
            # no event store: the SDK answered a resumption (Last-Event-ID) with a 500; a new stream instead
            scope = _with(scope, {"last-event-id": None})
        if method == "POST":
            if not (_accepts(headers.get("accept"), "application/json")
                    and _accepts(headers.get("accept"), "text/event-stream")):
                raise Refusal(406, INVALID, "a POST's answer comes as JSON or as an event stream: send `Accept: "
                                            "application/json, text/event-stream`")
            body = await self._body(receive)
            msg = message(body)
            receive = _replay(body, receive)
            if sid is None:
                if msg.get("method") == "initialize" and "id" in msg:
                    await self._open(scope, receive, send, msg)
                    return
                raise _no_session(msg.get("id") if "method" in msg else None)
            used = "id" in msg and msg.get("method") not in (None, "initialize", "ping")
            rid, refuse = msg.get("id") if "method" in msg else None, "method" in msg and "id" in msg
        elif sid is None:
            raise _no_session()
        else:
            used, rid, refuse = False, None, method == "GET"
        await self._within(sid, scope, receive, send, used, rid, refuse)

    def _guard(self, headers: dict[str, str]) -> None:
        if self.allowed is None:
            return
        spelled = ", ".join(sorted(self.allowed))
        if not host_ok(headers.get("host"), self.allowed):
            raise Refusal(421, INVALID, f"the Host header {_shown(headers.get('host', ''))} is not this loopback "
                                        f"server's ({spelled}, with or without a port): a request through another "
                                        f"name is refused, as a web page's would be (DNS rebinding)")
        if not origin_ok(headers.get("origin"), self.allowed):
            raise Refusal(403, INVALID, f"the Origin {_shown(headers['origin'])} is not this machine's loopback "
                                        f"(http(s)://{spelled}, with or without a port): another site's web page may "
                                        f"not call this server")

    async def _body(self, receive) -> bytes:
        """The whole body, read here (the SDK reads it whole too); past the bound, 413 and the connection closed."""
        parts, got = [], 0
        while True:
            m = await receive()
            if m["type"] != "http.request":  # the client left (mcp_http.Whole cancels this first)
                raise Refusal(400, INVALID, "the request ended before its body")
            chunk = m.get("body", b"")
            got += len(chunk)
            if got > self.size:
                raise self._too_big()
            parts.append(chunk)
            if not m.get("more_body", False):
                return b"".join(parts)

    def _too_big(self) -> Refusal:
        return Refusal(413, INVALID, self.oversize, headers=[(b"connection", b"close")])

    async def _open(self, scope, receive, send, msg: dict) -> None:
        """An initialize without a session: its client's bound checked, room made if all sessions are
        held, then the SDK opens one."""
        client = _client(scope, msg.get("params", {}).get("clientInfo", {}))
        with self._hold(client, msg.get("id")):  # refused before a session is ended or made for it
            await self._opened(client, scope, receive, send, msg)

    async def _opened(self, client: tuple, scope, receive, send, msg: dict) -> None:
        sessions = self.sessions
        if sessions.full():
            sid = sessions.victim()
            if sid is None:
                raise Refusal(503, INTERNAL, f"all {sessions.most} sessions are busy, each with a call or an event "
                                             f"stream open ({SESSIONS_ENV}): try again once one ends, or raise it",
                              msg.get("id"))
            sessions.forget(sid, f"it was ended to make room for a new session: {sessions.most} were open "
                                 f"({SESSIONS_ENV}), and it was an idle one of the client holding the most")
            await self._delete(scope, sid)
        session = None
        sessions.opening += 1

        async def watched(message):
            nonlocal session
            if message["type"] == "http.response.start" and session is None and message["status"] < 400:
                sid = next((v.decode("latin-1") for k, v in message.get("headers", ()) if k.lower() == b"mcp-session-id"),
                           None)
                if sid is not None:
                    session = sessions.open[sid] = Session(client, time.monotonic(), busy=1)
                    sessions.opening -= 1
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            if session is None:
                sessions.opening -= 1
            else:
                session.busy -= 1
                session.last = time.monotonic()

    async def _within(self, sid: str, scope, receive, send, used: bool, rid=None, refuse: bool = True) -> None:
        """A request of an open session, counted while it is answered (against its client too)."""
        session = self.sessions.open.get(sid)
        if session is None:
            raise Refusal(404, INVALID, f"session {_shown(sid, 40)} is not open: {self.sessions.why_not(sid)}; start "
                                        f"a new one (an initialize request without the Mcp-Session-Id header)")
        with self._hold(session.client, rid, refuse):
            await self._answered(sid, session, scope, receive, send, used)

    @contextlib.contextmanager
    def _hold(self, client: tuple, rid=None, refuse: bool = True):
        """One request of `client` open while inside; refused 429 when it already has `per_client`
        (unless `refuse` is False: a DELETE, a notification, which end things and are answered at once)."""
        most = self.per_client
        if refuse and most is not None and self.held[client] >= most:
            raise Refusal(429, INTERNAL, f"{_who(client)} already has {most} requests open here, as many as one "
                                         f"client may hold ({PER_CLIENT_ENV}; event streams and calls being answered): "
                                         f"send this again once one ends, close a stream it no longer reads, or raise "
                                         f"it", rid, headers=[(b"retry-after", b"1")])
        self.held[client] += 1
        try:
            yield
        finally:
            self.held[client] -= 1
            if not self.held[client]:
                del self.held[client]

    async def _answered(self, sid: str, session: Session, scope, receive, send, used: bool) -> None:
        session.busy += 1
        session.last = time.monotonic()
        session.used = session.used or used
        status = None

        async def watched(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            session.busy -= 1
            session.last = time.monotonic()
            if status == 404:
                self.sessions.forget(sid, "it ended on the server")
            elif scope["method"] == "DELETE" and status is not None and status < 300:
                self.sessions.forget(sid, "its client ended it (DELETE)")

    async def _delete(self, scope, sid: str) -> None:
        """End session `sid` in the SDK as its client's DELETE would (the SDK offers no other way)."""
        gone = False

        async def nothing():
            nonlocal gone
            if gone:
                return {"type": "http.disconnect"}
            gone = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def dropped(_message):
            return None

        ending = {**scope, "method": "DELETE", "query_string": b"",
                  "headers": [(b"host", dict(scope["headers"]).get(b"host", b"127.0.0.1")),
                              (b"mcp-session-id", sid.encode("latin-1"))]}
        await self.app(ending, nothing, dropped)


def _client(scope, info) -> tuple:
    """Who sends a request: the peer's address, and the name and version its clientInfo gives."""
    info = info if isinstance(info, dict) else {}
    name, version = info.get("name"), info.get("version")
    return ((scope.get("client") or ("",))[0], name if isinstance(name, str) else None,
            version if isinstance(version, str) else None)


def _meta_client(body: bytes) -> tuple[dict, object, bool]:
    """A 2026-wire POST's (clientInfo from its `_meta`, its id, whether it is a request to be bounded),
    read leniently: the SDK answers a malformed one in its own sentence."""
    from mcp_types import CLIENT_INFO_META_KEY

    try:
        obj = json.loads(body)
    except ValueError:
        return {}, None, True
    if not isinstance(obj, dict):
        return {}, None, True
    params = obj.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    info = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, dict) else None
    rid = obj.get("id")
    rid = rid if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)) else None
    return (info if isinstance(info, dict) else {}), rid, "id" in obj and "method" in obj


def _who(client: tuple) -> str:
    address, name, version = client
    named = " ".join(_shown(part, 40) for part in (name, version) if part)
    return f"the client at {address or 'an unknown address'}" + (f" ({named})" if named else "")


def _no_session(rid=None) -> Refusal:
    return Refusal(400, INVALID, "the request has no Mcp-Session-Id header: open a session first (an initialize "
                                 "request), then send the id its answer's Mcp-Session-Id header gives with every "
                                 "request", rid)


def _with(scope, changed: dict[str, str | None]):
    """`scope` with the headers named in `changed` replaced (None: removed)."""
    keys = {k.encode("latin-1") for k in changed}
    headers = [(k, v) for k, v in scope["headers"] if k.lower() not in keys]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in changed.items() if v is not None]
    return {**scope, "headers": headers}


def _replay(body: bytes, receive):
    """A receive that gives `body` whole once, then what the connection says (its end)."""
    given = False

    async def again():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
