"""The fingerprint check a run that embeds nothing still makes, with the standard library only.

A `folio index` with no file to embed must still notice a server restarted on another model behind
the same endpoint and name (else every query refuses and every index run finds nothing to do). It
asks for the probe text's vector in one short request and compares it with the index's recorded
fingerprint. httpx and numpy cost more to import than the rest of a no-op run, so this one request
goes through http.client and the comparison is plain Python: a no-op run stays lean, and with no
server listening it costs one refused connection. embed.py remains the HTTP client for everything
else (embedding, retries, error sentences); this module only answers "same space, another, or
could not tell".
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from dataclasses import dataclass
from urllib.parse import urlsplit

# The same text as embed.PROBE_TEXT (embed.py imports httpx and numpy at its top).
PROBE_TEXT = "folio fingerprint probe: a fixed sentence whose vector identifies the embedding space."
SAME_SPACE = 0.999  # cosine at or above which two fingerprints are one vector space


@dataclass
class Probe:
    vector: list[float] | None = None
    unreachable: bool = False  # nothing listens there: no server to compare with, nothing to say
    reason: str = ""  # why there is no vector (an answer that was not one), for a notice


def fetch(endpoint: str, model: str, api_key: str | None, timeout: float, role=None) -> Probe:
    """The probe text's vector from the server, or why there is none. Never raises for the network.
    `role`: the index's document role (space.Role): the fingerprint is a document's vector."""
    import socket

    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Probe(reason=f"{endpoint} is not an http(s) URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:  # a malformed port
        return Probe(reason=str(e))
    # Connect first: with nothing listening (the usual no-op without a server) the run is done here,
    # before http.client (and the ssl module it imports) costs anything.
    try:
        sock = socket.create_connection((parts.hostname, port), timeout=min(timeout, 5.0))
    except ConnectionRefusedError:
        return Probe(unreachable=True)
    except OSError as e:
        return Probe(reason=type(e).__name__ if not str(e) else str(e)[:120])
    import http.client

    if parts.scheme == "https":
        sock.close()
        conn = http.client.HTTPSConnection(parts.hostname, port, timeout=timeout)
    else:
        sock.settimeout(timeout)
        conn = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)
        conn.sock = sock
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    prefix, fields = (role.prefix, role.fields) if role is not None else ("", {})
    body = json.dumps({**fields, "model": model, "input": [prefix + PROBE_TEXT]})
    try:
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except ConnectionRefusedError:
            return Probe(unreachable=True)
        except TimeoutError:
            return Probe(reason=f"no answer within {timeout:g} s")
        except (OSError, http.client.HTTPException) as e:
            return Probe(reason=type(e).__name__ if not str(e) else str(e)[:120])
    finally:
        conn.close()
    if resp.status != 200:
        where = resp.getheader("Location")
        return Probe(reason=f"HTTP {resp.status}" + (f", redirected to {where}" if where else ""))
    try:
        emb = json.loads(raw)["data"][0]["embedding"]
        vec = [float(x) for x in emb]
    except (ValueError, KeyError, IndexError, TypeError):
        return Probe(reason="an answer without an embedding")
    norm = math.sqrt(math.fsum(x * x for x in vec)) if vec and all(math.isfinite(x) for x in vec) else 0.0
    if not norm:
        return Probe(reason="an unusable vector")
    return Probe(vector=[x / norm for x in vec])


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


def same_space(hex_fp: str | None, vec: list[float]) -> bool:
    """The verdict: the recorded fingerprint and this vector are one space (cosine >= SAME_SPACE)."""
    old = recorded(hex_fp)
    if len(old) != len(vec) or not old:
        return False
    dot = math.fsum(a * b for a, b in zip(old, vec, strict=True))
    na = math.sqrt(math.fsum(a * a for a in old))
    nb = math.sqrt(math.fsum(b * b for b in vec))
    return bool(na and nb) and dot / (na * nb) >= SAME_SPACE
