"""httpx for the requests wire.py does not carry (TLS, hosts off the loopback, a proxy configured),
held to wire's bounds: one deadline for all of each request, an answer no larger than its limit
(wire.answer_limit), identity the only encoding asked for, failures raised as wire's family so
embed.py's retries read both transports alike.

httpx is imported here, on first use only (a run that talks to a server on this machine never
imports it). Owns the proxy the environment gives an endpoint, and the sentences that say what is
wrong with it (NoSocks, BadProxy, dead_proxy_sentence: where that is decided). Must not know about
embeddings or keys.
"""

from __future__ import annotations

import sys
import time

from folio import wire


def import_httpx():
    """httpx, imported on first use. It imports its own command-line tool (httpx._main: click,
    pygments, rich) whenever those are installed, and httpcore imports anyio and trio for async
    clients: ~50 ms for parts folio never runs (its requests are synchronous). Imported with those
    names masked, both take the path they take when the packages are absent; the masks are lifted
    right after, so anything else in the process may still import anyio or trio."""
    if "httpx" in sys.modules:
        return sys.modules["httpx"]
    masked = [name for name in ("httpx._main", "anyio", "trio") if name not in sys.modules]
    sys.modules.update(dict.fromkeys(masked))
    try:
        import httpcore  # noqa: F401 - imported here, under the masks (httpx imports it lazily)
        import httpx
    finally:
        for name in masked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return httpx


class NoSocks(Exception):
    """The endpoint's requests are to go through a SOCKS proxy (`var` names it: `proxy`), and httpx
    cannot speak SOCKS without the socksio package. `sentence`: what the user reads, with the fix."""

    def __init__(self, endpoint: str, var: str, proxy: str):
        super().__init__(f"{var}={proxy}")
        self.var, self.proxy = var, proxy
        self.sentence = (
            f"{var}={proxy} sends folio's requests to {endpoint} through a SOCKS proxy, which needs the "
            f"socksio package: install it into folio's environment (`pip install 'httpx[socks]'`), or leave "
            f"the server out of the proxy (NO_PROXY={_host(endpoint)}) or unset {var} for folio")


class BadProxy(Exception):
    """The proxy the environment gives the endpoint's requests (`var`: `proxy`) is not one folio can
    use: `why` says what is wrong with it (a scheme httpx does not speak, a malformed port or host).
    `sentence`: what the user reads, with the fix."""

    def __init__(self, endpoint: str, var: str, proxy: str, why: str):
        super().__init__(f"{var}={proxy}: {why}")
        self.var, self.proxy, self.why = var, proxy, why
        self.sentence = (
            f"{var}={proxy} is the proxy for folio's requests to {endpoint}, and folio cannot use it ({why}): "
            f"fix {var}, or leave the server out of the proxy (NO_PROXY={_host(endpoint)}) or unset {var} for folio")


def dead_proxy_sentence(endpoint: str, var: str, proxy: str, detail: str) -> str:
    """The proxy the endpoint's requests go through does not answer: the server was never asked."""
    return (
        f"the proxy {var}={proxy}, which folio's requests to {endpoint} go through, does not answer ({detail}): "
        f"start it or fix {var}, or leave the server out of the proxy (NO_PROXY={_host(endpoint)}) or unset {var} "
        f"for folio"
    )


def _host(endpoint: str) -> str:
    from urllib.parse import urlsplit

    try:
        return urlsplit(endpoint).hostname or endpoint
    except ValueError:
        return endpoint


PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")  # the proxies httpx speaks


def proxy_problem(proxy: str) -> str | None:
    """What makes a proxy variable's value unusable, as httpx would read it (no scheme: http://),
    or None when it is a proxy URL httpx takes."""
    from urllib.parse import urlsplit

    url = proxy if "://" in proxy else f"http://{proxy}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as e:
        return f"it is not a URL ({e})"
    scheme = parts.scheme.lower()
    if scheme not in PROXY_SCHEMES:
        return f"folio speaks no {scheme}:// proxy, only {', '.join(s + '://' for s in PROXY_SCHEMES)}"
    if not parts.hostname:
        return "it names no host"
    return None


def proxy_for(endpoint: str) -> tuple[str, str | None]:
    """(the variable, the proxy) the environment gives `endpoint`'s requests, as curl and httpx read
    it: the scheme's own variable, else ALL_PROXY, lower case first; ("", None) when there is none or
    NO_PROXY leaves the host out."""
    import os
    from urllib.parse import urlsplit
    from urllib.request import proxy_bypass_environment

    parts = urlsplit(endpoint)
    scheme = parts.scheme.lower()
    for name in (f"{scheme}_proxy", "all_proxy"):
        for var in (name, name.upper()):
            proxy = os.environ.get(var)
            if proxy:
                if proxy_bypass_environment(parts.netloc.rpartition("@")[2]):
                    return "", None
                return var, proxy
    return "", None


class Httpx:
    """The transport for what wire.py does not carry (TLS, hosts off the loopback, a proxy): an
    httpx client held to wire's bounds. httpx's timeouts bound each read, not a request, so every
    read and write on its connections is held to the request's deadline (clocked); the answer is
    read as a stream no further than its limit, identity is the only encoding asked for (gzip and
    deflate sent anyway are decoded within the limit by wire.decode), and failures are raised as
    wire's, so the retries read them alike."""

    def __init__(self, endpoint: str, headers: dict, timeout: float):
        import threading

        httpx = self.httpx = import_httpx()
        # A plain-http endpoint needs no CA bundle: loading it costs ~70 ms of CPU per process.
        # Redirects are not followed, so this never talks TLS unverified.
        tls = endpoint.lower().startswith("https:")
        self.clock = threading.local()  # the deadline of the request this thread is making
        opts = dict(timeout=httpx.Timeout(timeout, connect=5.0), verify=tls,
                    headers={"Accept-Encoding": "identity", **headers})
        var, proxy = proxy_for(endpoint)
        self.proxy = (var, proxy) if proxy is not None else None  # what a failure to connect is to name
        if proxy is not None and (why := proxy_problem(proxy)):
            raise BadProxy(endpoint, var, proxy, why)
        try:
            self.client = httpx.Client(**opts)
        except (ImportError, ValueError, httpx.InvalidURL) as e:
            # A proxy variable httpx cannot take (SOCKS without socksio, a malformed one): httpx refuses
            # every variable at once, though the endpoint may need none of them, or only its own.
            if isinstance(e, ImportError) and "socks" not in str(e).lower():
                raise
            if proxy is None:  # no proxy for it, or NO_PROXY leaves it out: talk to it directly
                self.client = httpx.Client(**opts, transport=httpx.HTTPTransport(verify=tls))
            else:  # only the endpoint's own proxy
                try:
                    self.client = httpx.Client(**opts, proxy=proxy)
                except ImportError as e2:  # no socksio to speak to it
                    if "socks" not in str(e2).lower():
                        raise
                    raise NoSocks(endpoint, var, proxy) from None
        backend = clocked(self.clock)
        for transport in (self.client._transport, *self.client._mounts.values()):  # direct, and each proxy
            pool = getattr(transport, "_pool", None)
            if pool is not None and hasattr(pool, "_network_backend"):
                # a SOCKS proxy's handshake is read on the same streams before the answer: not HTTP
                pool._network_backend = backend(pool._network_backend, http=type(pool).__name__ != "SOCKSProxy")

    def request(self, method: str, url: str, *, json=None, timeout: float, connect: float = 5.0,
                headers: dict | None = None, numbers: int = 0) -> wire.Response:
        httpx, clock = self.httpx, self.clock
        clock.deadline, clock.got, clock.status, clock.have = time.monotonic() + timeout, 0, None, 0
        clock.request = object()  # this request, to tell a stream's first read for it
        try:
            req = self.client.build_request(method, url, json=json, headers=headers,
                                            timeout=httpx.Timeout(timeout, connect=min(connect, timeout)))
            resp = self.client.send(req, stream=True)
            try:
                clock.status = resp.status_code
                content = self._body(resp, wire.answer_limit(len(req.content), numbers))
            finally:
                resp.close()
        except httpx.ConnectTimeout as e:
            raise wire.ConnectTimeout(str(e) or type(e).__name__) from None
        except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.InvalidURL) as e:
            raise wire.ConnectError(str(e) or type(e).__name__) from None
        except httpx.TimeoutException as e:
            if not clock.got:
                raise wire.TimeoutException(str(e) or type(e).__name__) from None
            raise wire.Stalled(f"HTTP {clock.status} and {clock.have} bytes of its body" if clock.status else
                               f"{clock.got} bytes without a whole status line and headers") from None
        except httpx.RemoteProtocolError as e:
            why = str(e) or type(e).__name__
            if why.startswith("an answer that is not HTTP"):  # clocked saw its first bytes
                raise wire.BadAnswer(why) from None
            if not clock.got or "closed" in why or "disconnected" in why:
                raise wire.TransportError(why) from None  # dropped, before or during the answer
            raise wire.BadAnswer(f"an answer that is not HTTP ({why[:100]})") from None
        except httpx.HTTPError as e:
            raise wire.TransportError(str(e) or type(e).__name__) from None
        finally:
            clock.deadline = None
        return wire.Response(resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, content, str(resp.url))

    def _body(self, resp, limit: int) -> bytes:
        size = resp.headers.get("content-length", "")
        if size.isdigit() and int(size) > limit:
            raise wire.TooLarge(int(size), limit, "announced")
        buf = bytearray()
        for chunk in resp.iter_raw():
            buf += chunk
            self.clock.have = len(buf)
            if len(buf) > limit:
                raise wire.TooLarge(len(buf), limit)
        return wire.decode(bytes(buf), resp.headers.get("content-encoding", ""), limit)

    def close(self) -> None:
        self.client.close()


def clocked(clock):
    """A class wrapping an httpcore network backend so that every connect, read and write of a thread's
    request ends by `clock.deadline` (time.monotonic(); None: httpx's own timeouts only) and counts
    the bytes read in `clock.got`. The first bytes a connection reads for a request begin an answer:
    what does not begin like HTTP is refused there (h11 would wait for the end of a head that never
    comes)."""
    import httpcore

    def left(timeout, late):
        deadline = getattr(clock, "deadline", None)
        if deadline is None:
            return timeout
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise late("the request's time is up")
        return remaining if timeout is None else min(timeout, remaining)

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner, http: bool):
            self.inner, self.http, self.request = inner, http, None

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            data = self.inner.read(max_bytes, left(timeout, httpcore.ReadTimeout))
            if getattr(clock, "deadline", None) is not None:
                clock.got += len(data)
                if self.http and self.request is not clock.request and data:
                    self.request = clock.request
                    if not (data.startswith(b"HTTP/") or b"HTTP/".startswith(data)):
                        raise httpcore.RemoteProtocolError(f"an answer that is not HTTP (it began {data[:40].decode('latin-1')!r})")
            return data

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.inner.write(buffer, left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            return Stream(self.inner.start_tls(ssl_context, server_hostname, left(timeout, httpcore.ConnectTimeout)),
                          self.http)

        def get_extra_info(self, info: str):
            return self.inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self, inner, http: bool = True):
            self.inner, self.http = inner, http

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            # the name looked up within the connect time (wire.lookup), so a resolver that hangs cannot
            # hold the request past it; then each address in turn (TLS still names the host: httpcore
            # passes it to start_tls apart)
            try:
                addrs = wire.lookup(host, port, left(timeout, httpcore.ConnectTimeout))
            except TimeoutError as e:
                raise httpcore.ConnectTimeout(str(e)) from None
            except OSError as e:
                raise httpcore.ConnectError(str(e) or type(e).__name__) from None
            for i, (_family, _type, _proto, _name, addr) in enumerate(addrs):
                try:
                    return Stream(self.inner.connect_tcp(addr[0], port, left(timeout, httpcore.ConnectTimeout),
                                                         local_address, socket_options), self.http)
                except httpcore.ConnectError:
                    if i == len(addrs) - 1:
                        raise
            raise httpcore.ConnectError(f"no address for {host}")

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            return Stream(self.inner.connect_unix_socket(path, left(timeout, httpcore.ConnectTimeout), socket_options),
                          self.http)

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return Backend
