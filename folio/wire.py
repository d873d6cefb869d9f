"""HTTP/1.1 on a plain socket, standard library only: folio's requests to a server on this machine.

httpx (with httpcore, h11, ssl, email and mimetypes) costs 90-120 ms of CPU to import on a small
machine: a sixth of every `folio query` and the largest part of what a one-file `folio index` adds
to listing the tree. The server folio most often talks to is a llama-server on this machine over
plain http, where a request is a few header lines and a JSON body. This module sends those:
persistent connections (one pool per client, shared by its threads), bodies framed by
Content-Length, chunked or the connection's end, connect and read timeouts, and one more try on a
kept connection the server had closed while it idled. embed.py decides which requests come here
(`local`): anything off the loopback, over TLS, or with a proxy configured goes through httpx.

Failures are raised as this module's TransportError family, which embed.py's retries branch on
whichever transport carried the request. Must not know about embeddings, keys or sentences.
"""

from __future__ import annotations

import json as jsonlib
import os
from urllib.parse import urlsplit

MAX_HEAD = 64 << 10  # a status line and headers longer than this are not an HTTP answer
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


class TransportError(Exception):
    """No usable HTTP answer: the connection failed, dropped, timed out, or carried something else."""


class ConnectError(TransportError):
    """No connection: nothing listens there (refused), no route, no such name."""


class TimeoutException(TransportError):
    """The server did not answer (or take the request) in time."""


class ConnectTimeout(TimeoutException):
    """The connection itself was not accepted in time."""


class Closed(TransportError):
    """The server closed the connection before the first byte of an answer."""


def local(url: str) -> bool:
    """Whether `url` is plain http to this machine's loopback with no proxy configured: requests this
    module carries. (Any proxy variable hands the choice to httpx, which reads NO_PROXY.)"""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http" or any(os.environ.get(v) for v in PROXY_VARS):
        return False
    host = (parts.hostname or "").lower()
    try:
        parts.port  # noqa: B018 - a malformed port raises here, and httpx then says so
    except ValueError:
        return False
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
        self._idle: dict[tuple[str, int], list] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for socks in idle.values():
            for s in socks:
                s.close()

    def request(self, method: str, url: str, *, json=None, timeout: float, connect: float = 5.0,
                headers: dict | None = None) -> Response:
        """One request; `timeout` bounds each wait to send or receive, `connect` the connection."""
        parts = urlsplit(url)
        host = parts.hostname
        if parts.scheme.lower() != "http" or not host:
            raise ConnectError(f"not a plain http URL: {url}")
        try:
            port = parts.port or 80
        except ValueError as e:
            raise ConnectError(str(e)) from None
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
        key = (host, port)
        while True:
            sock, kept = self._take(key, connect)
            try:
                sock.settimeout(timeout)
                sock.sendall(data)
                status, got, content, keep = read_answer(sock, method)
            except Closed:
                sock.close()
                if kept:
                    continue  # a kept connection the server had closed: once more on a new one
                raise TransportError("the server closed the connection without an answer") from None
            except TimeoutError:
                sock.close()
                raise TimeoutException(f"no answer within {timeout:g} s") from None
            except (OSError, ValueError) as e:  # ValueError: not HTTP
                sock.close()
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
        try:
            return connect_socket(key[0], key[1], connect), False
        except TimeoutError:
            raise ConnectTimeout(f"no connection within {connect:g} s") from None
        except OSError as e:
            raise ConnectError(_why(e)) from None


def connect_socket(host: str, port: int, timeout: float):
    """socket.create_connection on the C module itself: socket.py turns its constants into enums at
    import (~5 ms), and an IP address needs no name lookup. Each address the name has is tried in
    turn; the last failure is raised. Small writes go out at once (TCP_NODELAY)."""
    import _socket

    try:
        _socket.inet_pton(_socket.AF_INET, host)
        addrs = [(_socket.AF_INET, (host, port))]
    except OSError:
        addrs = [(family, addr) for family, _t, _p, _c, addr in
                 _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)]
    error = OSError(f"no address for {host}")
    for family, addr in addrs:
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(addr)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise error


def read_answer(sock, method: str = "POST", limit: int | None = None) -> tuple[int, dict[str, str], bytes, bool]:
    """(status, headers, body, keep) of the answer on `sock`: interim 1xx answers skipped, the body
    framed by Content-Length, chunked encoding or the connection's end, gzip/deflate undone; `keep`:
    the connection may carry another request. Raises Closed when the server closed it before the
    first byte, ValueError for what is not HTTP (or a body over `limit` bytes), OSError/TimeoutError
    from the socket."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                if not buf:
                    raise Closed()
                raise ValueError("an answer that is not HTTP")
            buf += chunk
            if len(buf) > MAX_HEAD and b"\r\n\r\n" not in buf:
                raise ValueError("an answer that is not HTTP")
        head, _, buf = buf.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        proto, _, tail = status_line.partition(" ")
        if not proto.startswith("HTTP/") or not tail[:3].isdigit():
            raise ValueError("an answer that is not HTTP")
        status = int(tail[:3])
        if 100 <= status < 200 and status != 101:
            continue  # 100 Continue and the like: the answer follows
        break
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
        body, buf = _chunked(sock, buf, limit)
    elif got.get("content-length", "").isdigit():
        want = int(got["content-length"])
        if limit is not None and want > limit:
            raise ValueError("an answer longer than expected")
        parts, have = [buf], len(buf)
        while have < want:
            chunk = sock.recv(min(1 << 20, max(65536, want - have)))
            if not chunk:
                raise ValueError("an answer cut short")
            parts.append(chunk)
            have += len(chunk)
        body = b"".join(parts)[:want]
    else:  # neither: the body ends with the connection
        parts, have = [buf], len(buf)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
            if limit is not None and have > limit:
                raise ValueError("an answer longer than expected")
        body, keep = b"".join(parts), False
    coding = got.get("content-encoding", "").strip().lower()
    if coding in ("gzip", "x-gzip", "deflate"):
        import zlib

        try:
            body = zlib.decompress(body, 47 if coding != "deflate" else 15)  # 47: gzip or zlib header
        except zlib.error:
            try:
                body = zlib.decompress(body, -15)  # raw deflate, as some servers send it
            except zlib.error:
                raise ValueError(f"an answer whose {coding} encoding does not decode") from None
    return status, got, body, keep


def _chunked(sock, buf: bytes, limit: int | None) -> tuple[bytes, bytes]:
    out = []
    size_total = 0

    def more() -> None:
        nonlocal buf
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("an answer cut short")
        buf += chunk

    while True:
        while b"\r\n" not in buf:
            more()
        size_line, _, buf = buf.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            raise ValueError("an answer with a bad chunk size") from None
        if size == 0:
            while True:  # trailer fields, up to the empty line
                while b"\r\n" not in buf:
                    more()
                line, _, buf = buf.partition(b"\r\n")
                if not line:
                    return b"".join(out), buf
        size_total += size
        if limit is not None and size_total > limit:
            raise ValueError("an answer longer than expected")
        while len(buf) < size + 2:
            more()
        out.append(buf[:size])
        buf = buf[size + 2:]


def _why(e: BaseException) -> str:
    return type(e).__name__ if not str(e) else str(e)[:120]
