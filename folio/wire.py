"""HTTP/1.1 on a plain socket, standard library only: folio's requests to a server on this machine.

httpx (with httpcore, h11, ssl, email and mimetypes) costs 90-120 ms of CPU to import on a small
machine: a sixth of every `folio query` and the largest part of what a one-file `folio index` adds
to listing the tree. The server folio most often talks to is a llama-server on this machine over
plain http, where a request is a few header lines and a JSON body. This module sends those:
persistent connections (one pool per client, shared by its threads), bodies framed by
Content-Length, chunked or the connection's end, and one more try on a kept connection the server
had closed while it idled. embed.py decides which requests come here (`local`): anything off the
loopback, over TLS, or with a proxy configured goes through httpx (remote.py).

It also owns the bounds no server may push folio past, on either transport: one deadline for all
of a request (connecting, sending, interim answers, headers, body; the host name's lookup too,
asked in a thread so that a resolver that hangs cannot stall the caller: `lookup`, which remote.py
uses as well), an answer no larger than
answer_limit (computed from the request), no more than MAX_HEAD of headers and MAX_INTERIM interim
answers, and a gzip/deflate body (never asked for) decoded no further than the same limit.

Failures are raised as this module's TransportError family, which embed.py's retries branch on
whichever transport carried the request. Must not know about embeddings, keys or sentences.
"""

from __future__ import annotations

import _thread
import json as jsonlib
import os
import time
from urllib.parse import urlsplit

MAX_HEAD = 64 << 10  # a status line and headers longer than this are not an HTTP answer
MAX_INTERIM = 16  # interim (1xx) answers before the answer: more is a server that never answers
FLOOR = 4 << 20  # the most any answer may take, whatever was asked (an error page, /v1/models, /slots)
ECHO = 8  # an answer may quote the request back (an error naming its input, escaped): this many times its size
NUMBER = 64  # bytes a number in an answer may take (a float in JSON text, pretty-printed, is under 32)
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


def answer_limit(sent: int = 0, numbers: int = 0) -> int:
    """The most bytes an answer may take before it is refused as too large (on the wire, and again
    once decoded): FLOOR, room to quote the `sent` bytes of the request, and NUMBER bytes for each
    of the `numbers` numbers it should carry."""
    return FLOOR + ECHO * sent + NUMBER * numbers


class TransportError(Exception):
    """No usable HTTP answer: the connection failed, dropped, timed out, or carried something else."""


class ConnectError(TransportError):
    """No connection: nothing listens there (refused), no route, no such name."""


class TimeoutException(TransportError):
    """Nothing of an answer came in time: the server did not take the request, or is still at it."""


class ConnectTimeout(TimeoutException):
    """The connection itself was not accepted in time."""


class Closed(TransportError):
    """The server closed the connection before the first byte of an answer."""


class Stalled(TransportError):
    """The server began an answer and had not finished it when the request's time was up (a
    trickle, a stall, interim answers without end): the message says what had come."""


class BadAnswer(TransportError):
    """What came back is not a usable HTTP answer (not HTTP, headers without end, too many interim
    answers, a bad chunk, an encoding folio did not ask for, one that does not decode): the message
    says what it was."""


class TooLarge(BadAnswer):
    """An answer longer than the request's limit: `size` bytes (announced by Content-Length, received
    so far, or decoded so far), `limit` bytes."""

    def __init__(self, size: int, limit: int, how: str = "received"):
        self.size, self.limit, self.how = size, limit, how
        what = {"announced": f"announced {size} bytes (Content-Length)",
                "decoded": f"expanded past {limit} bytes once decoded"}.get(how, f"sent more than {limit} bytes")
        super().__init__(what)


def local(url: str) -> bool:
    """Whether `url` is plain http to this machine's loopback with no proxy configured: requests this
    module carries. (Any proxy variable hands the choice to httpx, which reads NO_PROXY.)"""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here, and httpx then says so
    except ValueError:  # a malformed port or IPv6 address
        return False
    if parts.scheme.lower() != "http" or any(os.environ.get(v) for v in PROXY_VARS):
        return False
    host = (parts.hostname or "").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.") and host.replace(".", "").isdigit()


class Response:
    """What a request got back: status_code, headers (lower-case names), content, url; text and
    json() decoded as httpx would."""

    __slots__ = ("status_code", "headers", "content", "url")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes, url: str):
        self.status_code, self.headers, self.content, self.url = status_code, headers, content, url

    @property
    def text(self) -> str:
        charset = "utf-8"
        for param in self.headers.get("content-type", "").split(";")[1:]:
            k, _, v = param.strip().partition("=")
            if k.lower() == "charset" and v:
                charset = v.strip('"')
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    def json(self):
        return jsonlib.loads(self.content)  # a ValueError (JSONDecodeError, UnicodeDecodeError) when not JSON


class Pool:
    """Kept connections by (host, port), safe to share between threads: each request takes one (or
    opens one) and gives it back when the answer said it may be kept. `headers` go with every
    request."""

    def __init__(self, headers: dict[str, str] | None = None):
        import threading

        self.headers = dict(headers or {})
        self.lost = 0  # connections lost (closed by the server, failed, refused): the next may reach another process
        self._idle: dict[tuple[str, int], list] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for socks in idle.values():
            for s in socks:
                s.close()

    def request(self, method: str, url: str, *, json=None, timeout: float, connect: float = 5.0,
                headers: dict | None = None, numbers: int = 0) -> Response:
        """One request. `timeout` bounds all of it: the connection (itself within `connect`), sending,
        interim answers, headers and body. The answer may take answer_limit(request bytes, `numbers`)."""
        deadline = time.monotonic() + timeout
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port or 80
        except ValueError as e:  # a malformed port or IPv6 address
            raise ConnectError(str(e)) from None
        if parts.scheme.lower() != "http" or not host:
            raise ConnectError(f"not a plain http URL: {url}")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        shown = f"[{host}]" if ":" in host else host
        fields = {"Host": shown + (f":{port}" if parts.port else ""), "Accept": "*/*",
                  "Accept-Encoding": "identity", "User-Agent": "folio", **self.headers, **(headers or {})}
        body = b""
        if json is not None:
            body = jsonlib.dumps(json, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
            fields["Content-Type"] = "application/json"
        if body or method not in ("GET", "HEAD"):
            fields["Content-Length"] = str(len(body))
        close = fields.get("Connection", "").lower() == "close"
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
        data = head.encode("latin-1") + body
        limit = answer_limit(len(body), numbers)
        key = (host, port)
        while True:
            sock, kept = self._take(key, min(connect, deadline - time.monotonic()))
            try:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                sock.sendall(data)
                status, got, content, keep = read_answer(sock, method, limit, deadline)
            except Closed:
                sock.close()
                self._lose()
                if kept:
                    continue  # a kept connection the server had closed: once more on a new one
                raise TransportError("the server closed the connection without an answer") from None
            except TimeoutError:  # sending: the server takes no more of the request
                sock.close()
                raise TimeoutException(f"no answer within {timeout:g} s") from None
            except TransportError:
                sock.close()
                self._lose()
                raise
            except OSError as e:
                sock.close()
                self._lose()
                raise TransportError(_why(e)) from None
            except BaseException:
                sock.close()
                raise
            if keep and not close:
                with self._lock:
                    self._idle.setdefault(key, []).append(sock)
            else:
                sock.close()
            return Response(status, got, content, url)

    def _take(self, key: tuple[str, int], connect: float):
        """(socket, kept): a kept connection still open, else a new one."""
        import select

        while True:
            with self._lock:
                socks = self._idle.get(key)
                sock = socks.pop() if socks else None
            if sock is None:
                break
            try:
                readable = select.select([sock], [], [], 0)[0]
            except (OSError, ValueError):
                readable = True
            if not readable:
                return sock, True
            sock.close()  # closed by the server while it idled (or holding bytes nobody asked for)
            self._lose()
        if connect <= 0:
            raise ConnectTimeout("no time left to connect")
        try:
            sock = connect_socket(key[0], key[1], connect)
        except TimeoutError:
            self._lose()
            raise ConnectTimeout(f"no connection within {connect:g} s") from None
        except OSError as e:
            self._lose()
            raise ConnectError(_why(e)) from None
        return sock, False

    def _lose(self) -> None:
        with self._lock:
            self.lost += 1


def connect_socket(host: str, port: int, timeout: float):
    """socket.create_connection on the C module itself: socket.py turns its constants into enums at
    import (~5 ms), and an IP address needs no name lookup. The name's lookup and each address it
    has, tried in turn, all within `timeout`; the last failure is raised. Small writes go out at once
    (TCP_NODELAY)."""
    import _socket

    deadline = time.monotonic() + timeout
    try:
        _socket.inet_pton(_socket.AF_INET, host)
        addrs = [(_socket.AF_INET, (host, port))]
    except OSError:
        addrs = [(family, addr) for family, _t, _p, _c, addr in lookup(host, port, timeout)]
    error: OSError = OSError(f"no address for {host}")
    for family, addr in addrs:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            sock.settimeout(left)
            sock.connect(addr)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise error


_LOOKUPS: dict = {}  # (host, port) -> (the thread asking the resolver, its answer once it has one)
_LOOKUPS_LOCK = _thread.allocate_lock()


def lookup(host: str, port: int, timeout: float) -> list:
    """getaddrinfo within `timeout` (TimeoutError past it). The C call takes no timeout and cannot be
    interrupted, so it is asked in a daemon thread: a resolver that never answers (a DNS server that
    hangs) holds that thread, not the caller (the watcher's look for a server, a request). A lookup
    still unanswered is waited for again rather than asked anew: one thread per name at most."""
    import _socket
    import threading

    key = (host, port)
    with _LOOKUPS_LOCK:
        asked = _LOOKUPS.get(key)
        if asked is None:
            got: list = []

            def ask():
                try:
                    got.append(_socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM))
                except OSError as e:
                    got.append(e)

            asked = _LOOKUPS[key] = (threading.Thread(target=ask, name="folio-lookup", daemon=True), got)
            asked[0].start()
    thread, got = asked
    thread.join(max(timeout, 0))
    if thread.is_alive():
        raise TimeoutError(f"the name {host} was not resolved within {timeout:g} s")
    with _LOOKUPS_LOCK:
        if _LOOKUPS.get(key) is asked:
            del _LOOKUPS[key]  # answered: the next connection asks afresh (addresses change)
    if isinstance(got[0], OSError):
        raise got[0]
    return got[0]


class _Reader:
    """An answer read off a socket: every wait ends by `deadline` (time.monotonic()), and what has
    come so far is known, to say what a server that ran out of time had sent."""

    __slots__ = ("sock", "deadline", "buf", "got", "interim", "status", "have", "want")

    def __init__(self, sock, deadline: float):
        self.sock, self.deadline = sock, deadline
        self.buf = bytearray()
        self.got = 0  # bytes received
        self.interim = 0  # interim (1xx) answers read
        self.status: int | None = None  # the answer's status, once its head is read
        self.have, self.want = 0, None  # body bytes read; announced (an int), "chunked" or None

    def more(self, size: int = 65536) -> bytes:
        self.wait()
        try:
            chunk = self.sock.recv(size)
        except TimeoutError:
            raise self.late() from None
        self.got += len(chunk)
        return chunk

    def into(self, view: memoryview) -> int:
        """recv_into `view` (a body of known length is read in place, not gathered and copied)."""
        self.wait()
        try:
            n = self.sock.recv_into(view)
        except TimeoutError:
            raise self.late() from None
        if not n:
            raise TransportError("the connection closed mid-answer")
        self.got += n
        return n

    def wait(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.late()
        self.sock.settimeout(left)

    def late(self) -> TransportError:
        if not self.got:
            return TimeoutException("no answer")
        if self.status is not None:
            of = {None: " of a body without length", "chunked": " of a chunked body"}.get(
                self.want, f" of the {self.want} announced")
            return Stalled(f"HTTP {self.status} and {self.have} bytes{of}")
        if self.interim:
            return Stalled(f"{self.interim} interim answers (HTTP 1xx) and nothing more")
        return Stalled(f"{len(self.buf)} bytes of a status line and headers")

    def head(self) -> bytes:
        """The next status line and headers (without the blank line that ends them)."""
        buf, seen = self.buf, 0
        while True:
            end = buf.find(b"\r\n\r\n", max(0, seen - 3))
            if end >= 0:
                head = bytes(buf[:end])
                del buf[:end + 4]
                return head
            if not (buf.startswith(b"HTTP/") or b"HTTP/".startswith(bytes(buf))):
                raise BadAnswer(f"an answer that is not HTTP (it began {_shown(bytes(buf[:40]))})")
            if len(buf) > MAX_HEAD:
                raise BadAnswer(f"a status line and headers longer than {MAX_HEAD >> 10} KiB")
            seen = len(buf)
            chunk = self.more()
            if not chunk:
                if not self.got:
                    raise Closed()
                raise TransportError("the connection closed mid-answer")
            buf += chunk

    def line(self) -> bytes:
        """The next CRLF-ended line (a chunk size or a trailer field), at most MAX_HEAD long."""
        buf = self.buf
        while True:
            end = buf.find(b"\r\n")
            if end >= 0:
                line = bytes(buf[:end])
                del buf[:end + 2]
                return line
            if len(buf) > MAX_HEAD:
                raise BadAnswer("a chunked body with a chunk-size line without end")
            self.fill()

    def fill(self, size: int = 65536) -> None:
        chunk = self.more(size)
        if not chunk:
            raise TransportError("the connection closed mid-answer")
        self.buf += chunk


def read_answer(sock, method: str, limit: int, deadline: float) -> tuple[int, dict[str, str], bytes, bool]:
    """(status, headers, body, keep) of the answer on `sock`, all of it read by `deadline`
    (time.monotonic()) and no more than `limit` bytes (answer_limit): interim 1xx answers skipped (up
    to MAX_INTERIM), the body framed by Content-Length, chunked encoding or the connection's end,
    gzip/deflate undone within the same limit; `keep`: the connection may carry another request.
    Raises Closed when the server closed it before the first byte, TimeoutException when nothing
    came in time, Stalled when an answer began and did not end in time, BadAnswer (TooLarge) for
    what is not a usable answer, TransportError when it closed mid-answer, OSError from the socket."""
    r = _Reader(sock, deadline)
    while True:
        status_line, *lines = r.head().decode("latin-1").split("\r\n")
        proto, _, tail = status_line.partition(" ")
        if not proto.startswith("HTTP/") or not tail[:3].isdigit() or tail[3:4] not in ("", " "):
            raise BadAnswer(f"an answer that is not HTTP (its status line is {_shown(status_line.encode('latin-1')[:40])})")
        status = int(tail[:3])
        if 100 <= status < 200 and status != 101:
            r.interim += 1  # 100 Continue and the like: the answer follows
            if r.interim > MAX_INTERIM:
                raise BadAnswer(f"{r.interim} interim answers (HTTP {status}) and no answer")
            continue
        break
    r.status = status
    got: dict[str, str] = {}
    for line in lines:
        k, sep, v = line.partition(":")
        if not sep:
            continue
        k, v = k.strip().lower(), v.strip()
        got[k] = f"{got[k]}, {v}" if k in got else v
    tokens = {t.strip().lower() for t in got.get("connection", "").split(",")}
    keep = "close" not in tokens and (proto == "HTTP/1.1" or "keep-alive" in tokens)
    if method == "HEAD" or status in (204, 304):
        return status, got, b"", keep
    if "chunked" in got.get("transfer-encoding", "").lower():
        r.want = "chunked"
        body = _chunked(r, limit)
    elif "content-length" in got:
        sizes = {v.strip() for v in got["content-length"].split(",")}
        if len(sizes) != 1 or not next(iter(sizes)).isdigit():
            raise BadAnswer(f"an answer whose Content-Length is {_shown(got['content-length'][:40].encode('latin-1'))}")
        r.want = want = int(sizes.pop())
        if want > limit:
            raise TooLarge(want, limit, "announced")
        keep = keep and len(r.buf) <= want  # bytes past the body: nothing to keep the connection for
        whole = bytearray(want)
        r.have = min(len(r.buf), want)
        whole[:r.have] = r.buf[:r.have]
        with memoryview(whole) as view:
            while r.have < want:
                r.have += r.into(view[r.have:r.have + (1 << 20)])
        body = bytes(whole)
        del whole
    else:  # neither: the body ends with the connection
        buf, keep = r.buf, False
        while True:
            if len(buf) > limit:
                raise TooLarge(len(buf), limit)
            r.have = len(buf)
            chunk = r.more()
            if not chunk:
                break
            buf += chunk
        body = bytes(buf)
    return status, got, decode(body, got.get("content-encoding", ""), limit), keep


def _chunked(r: _Reader, limit: int) -> bytes:
    out = bytearray()
    while True:
        size_line = r.line()
        try:
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            raise BadAnswer("a chunked body with a bad chunk size") from None
        if size == 0:
            trailers = 0
            while r.line():  # trailer fields, up to the empty line
                trailers += 1
                if trailers > 1000:
                    raise BadAnswer("a chunked body with trailer fields without end")
            return bytes(out)
        if len(out) + size > limit:
            raise TooLarge(len(out) + size, limit)
        while len(r.buf) < size + 2:
            r.fill()
        with memoryview(r.buf) as view:
            out += view[:size]
        del r.buf[:size + 2]
        r.have = len(out)


def decode(body: bytes, coding: str, limit: int) -> bytes:
    """`body` without its Content-Encoding: none or identity as it is; gzip or deflate (which folio
    does not ask for, but some servers send anyway) decoded, no further than `limit` bytes; anything
    else refused."""
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        return body
    if coding not in ("gzip", "x-gzip", "deflate"):
        raise BadAnswer(f"an answer in the `{coding[:40]}` encoding, which folio did not ask for")
    import zlib

    for wbits in (47 if coding != "deflate" else 15, -15):  # 47: gzip or zlib header; -15: raw deflate
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit:
            raise TooLarge(len(out), limit, "decoded")
        if d.eof:
            return out
    raise BadAnswer(f"an answer whose {coding} encoding does not decode")


def _shown(raw: bytes) -> str:
    """A few bytes of what a server sent, quoted, printable whatever they are."""
    return repr(raw.decode("latin-1"))


def _why(e: BaseException) -> str:
    return type(e).__name__ if not str(e) else str(e)[:120]
