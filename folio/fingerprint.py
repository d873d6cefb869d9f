"""The fingerprint check a run that embeds nothing still makes, with the standard library only.

A `folio index` with no file to embed must still notice a server restarted on another model behind
the same endpoint and name (else every query refuses and every index run finds nothing to do). It
asks for the probe text's vector in one short request and compares it with the index's recorded
fingerprint. numpy (and httpx, for a server off this machine) cost more to import than the rest of
a no-op run, so this one request is written on the socket itself (wire.py reads the answer) and the
comparison is plain Python: a no-op run stays lean, and with no server listening it costs one
refused connection. The request is held to wire's bounds like any other: all of it within the
timeout, and an answer no larger than one vector can need (MAX_DIM numbers). embed.py remains the client for everything else (embedding, retries, error
sentences); this module only answers "same space, another, or could not tell".
"""

from __future__ import annotations

import json
import math
import sys
import time
from array import array
from collections import namedtuple
from urllib.parse import urlsplit

from folio import wire

# The same text as embed.PROBE_TEXT (embed.py imports numpy at its top).
PROBE_TEXT = "folio fingerprint probe: a fixed sentence whose vector identifies the embedding space."
SAME_SPACE = 0.999  # cosine at or above which two fingerprints are one vector space
MAX_DIM = 8192  # the widest vector folio expects before a server has said its dimension (as embed.MAX_DIM)


# vector: the probe's (None: none); unreachable: nothing listens there (no server to compare with,
# nothing to say); reason: why there is no vector (an answer that was not one), for a notice.
Probe = namedtuple("Probe", "vector unreachable reason", defaults=(None, False, ""))


class Connection:
    """A connection to the server opened ahead of the probe (`connect`): a no-op run opens it while the
    tree is still being listed and sends the probe only when the pass sent nothing else. The one
    request is written and read on the socket itself (HTTP/1.1, `Connection: close`; over https://
    the socket is wrapped in TLS first): http.client costs ~40 ms to import (email.parser, ssl), a
    fifth of a no-op run on 16k files, and wire.read_answer holds the answer to folio's bounds."""

    def __init__(self, endpoint: str, timeout: float):
        self.endpoint, self.timeout = endpoint, timeout
        self.sock = None
        self.done: Probe | None = None  # the answer already known: nothing listens, or not a URL
        try:
            parts = urlsplit(endpoint)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as e:  # a malformed port or IPv6 address
            self.done = Probe(reason=str(e))
            return
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self.done = Probe(reason=f"{endpoint} is not an http(s) URL")
            return
        self.parts, self.port = parts, port
        self._open()

    def _open(self) -> None:
        parts, port, timeout = self.parts, self.port, self.timeout
        # Connect first: with nothing listening (the usual no-op without a server) the run is done
        # here, before anything else costs anything.
        try:
            sock = wire.connect_socket(parts.hostname, port, min(timeout, 5.0))
        except ConnectionRefusedError:
            self.done = Probe(unreachable=True)
            return
        except OSError as e:
            self.done = Probe(reason=_why(e))
            return
        self.sock = sock

    def fetch(self, model: str, api_key: str | None, role=None) -> Probe:
        """The probe text's vector from the server, or why there is none. Never raises for the network.
        `role`: the index's document role (space.Role): the fingerprint is a document's vector."""
        if self.done is not None:
            return self.done
        parts = self.parts
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        prefix, fields = (role.prefix, role.fields) if role is not None else ("", {})
        body = json.dumps({**fields, "model": model, "input": [prefix + PROBE_TEXT]}).encode("utf-8")
        deadline = time.monotonic() + self.timeout
        try:
            for again in (True, False):  # a connection opened early may have been closed by the server since
                try:
                    status, location, raw = self._request(path, body, headers, deadline)
                    break
                except (BrokenPipeError, ConnectionResetError, wire.Closed):
                    self.close()
                    if not again:
                        return Probe(reason="the server closed the connection without an answer")
                    self._open()
                    if self.done is not None:
                        return self.done
                except ConnectionRefusedError:
                    return Probe(unreachable=True)
                except (TimeoutError, wire.TimeoutException):
                    return Probe(reason=f"no answer within {self.timeout:g} s")
                except wire.Stalled as e:
                    return Probe(reason=f"an answer begun and not finished in {self.timeout:g} s: {e}")
                except (OSError, wire.TransportError) as e:  # BadAnswer: not HTTP, too large
                    return Probe(reason=_why(e))
        finally:
            self.close()
        if status != 200:
            return Probe(reason=f"HTTP {status}" + (f", redirected to {location}" if location else ""))
        try:
            emb = json.loads(raw)["data"][0]["embedding"]
            vec = [float(x) for x in emb]
        except (ValueError, KeyError, IndexError, TypeError):
            return Probe(reason="an answer without an embedding")
        norm = math.sqrt(math.fsum(x * x for x in vec)) if vec and all(math.isfinite(x) for x in vec) else 0.0
        if not norm:
            return Probe(reason="an unusable vector")
        return Probe(vector=[x / norm for x in vec])

    def _request(self, path: str, body: bytes, headers: dict, deadline: float) -> tuple[int, str | None, bytes]:
        parts = self.parts
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        if parts.port:
            host += f":{self.port}"
        lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}", "Connection: close",
                 "Accept: application/json", "Accept-Encoding: identity", *(f"{k}: {v}" for k, v in headers.items())]
        self.sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        if parts.scheme == "https" and not hasattr(self.sock, "cipher"):
            import ssl

            self.sock = ssl.create_default_context().wrap_socket(self.sock, server_hostname=parts.hostname)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        status, got, raw, _keep = wire.read_answer(self.sock, "POST", wire.answer_limit(len(body), MAX_DIM), deadline)
        return status, got.get("location"), raw

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None


def _why(e: BaseException) -> str:
    return type(e).__name__ if not str(e) else str(e)[:120]


def connect(endpoint: str, timeout: float) -> Connection:
    return Connection(endpoint, timeout)


def recorded(hex_fp: str | None) -> list[float]:
    """The fingerprint an index recorded (little-endian float32, hex)."""
    a = array("f")
    try:
        a.frombytes(bytes.fromhex(hex_fp or ""))
    except ValueError:
        return []
    if sys.byteorder == "big":
        a.byteswap()
    return list(a)


def to_hex(vec: list[float]) -> str:
    a = array("f", vec)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes().hex()


def matches(hex_fp: str | None, vec: list[float]) -> bool:
    """The verdict: the recorded fingerprint and this vector are one space (cosine >= SAME_SPACE)."""
    old = recorded(hex_fp)
    if len(old) != len(vec) or not old:
        return False
    dot = math.fsum(a * b for a, b in zip(old, vec, strict=True))
    na = math.sqrt(math.fsum(a * a for a in old))
    nb = math.sqrt(math.fsum(b * b for b in vec))
    return bool(na and nb) and dot / (na * nb) >= SAME_SPACE
