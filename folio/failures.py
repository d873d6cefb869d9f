"""How an embeddings endpoint failed, as callers branch on it and as users read it.

Owns the failure kinds (Failure, Gone), EndpointError and the sentences that name a server (none
answers; it refused the API key, worded by what folio did with the key; an HTML page where vectors
should be; the server's own words from an error body). Must not send requests: embed.py does.
"""

from __future__ import annotations

import enum
import json

from folio import wire
from folio.errors import FolioError


class Failure(str, enum.Enum):
    """How the endpoint failed: what callers branch on (never the sentence). A str, so `--json` and
    f-strings show the value ("unreachable"), as they did when it was a plain string."""

    UNREACHABLE = "unreachable"
    BUSY = "busy"  # a 429/503 storm
    SLOW = "slow"
    TOO_LARGE = "too_large"
    TOO_MANY = "too_many"
    REFUSED = "refused"
    INVALID = "invalid"  # an unusable answer
    BROKEN = "broken"  # no usable HTTP answer: not HTTP, too large, stalled mid-answer (never one input's fault)
    OTHER_MODEL = "other_model"  # vectors of another dimension than the index holds

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Gone(str, enum.Enum):
    """How an unreachable server went: stopped (nothing listens: connection refused), dropped (it
    took the request and closed the connection) or hung (it took the request and answers nothing,
    not even /health)."""

    STOPPED = "stopped"
    DROPPED = "dropped"
    HUNG = "hung"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class EndpointError(FolioError):
    """The endpoint failed, as `kind` (a Failure); an unreachable server says how in `gone` (a Gone)."""

    def __init__(self, message: str, kind: Failure, *, status: int | None = None, server: str = "",
                 tokens: int | None = None, limit: int | None = None, gone: Gone | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.server = server
        self.tokens = tokens
        self.limit = limit
        self.gone = gone


def unreachable_sentence(endpoint: str, detail: str) -> str:
    return (
        f"no embeddings server answers at {endpoint} ({detail}); folio runs no model itself: "
        f"start one (e.g. `llama-server -m MODEL.gguf --embeddings --port 8080`) or point folio at one "
        f"with `folio config set endpoint URL` or FOLIO_ENDPOINT"
    )


def credentials_sentence(endpoint: str, status: int, msg: str, *, sent: bool, withheld: str = "") -> str:
    """A 401/403, worded by what folio did with the key: sent it (the key is wrong for this server),
    withheld it (`withheld`: the key policy's reason, which names its fix: key_hosts, the endpoint
    setting, allow_insecure_key) or had none to send."""
    head = f"the server at {endpoint} refused the credentials (HTTP {status}: \"{msg}\")"
    if sent:
        return (f"{head}: the API key folio sent was refused; check that FOLIO_API_KEY (or api_key in "
                f"your user config) holds this server's key")
    if withheld:
        return f"{head}: it asks for an API key, and yours was {withheld}"
    return f"{head}: it asks for an API key and none is configured; set FOLIO_API_KEY or api_key in your user config"


def html_title(resp: wire.Response) -> str | None:
    """The title of an HTML page the server answered with ("" when it has none), else None: a web
    server, a dashboard or a login page answers so, never an embeddings endpoint."""
    import re

    head = resp.content[:512].lstrip().lower()
    if not head.startswith(b"<"):  # JSON sent as text/html by a careless server is still read as JSON
        return None
    if "html" not in resp.headers.get("content-type", "").lower() and \
            not head.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<title")):
        return None
    m = re.search(r"<title[^>]*>(.*?)</title>|<h1[^>]*>(.*?)</h1>", resp.text[:65536], re.S | re.I)
    if not m:
        return ""
    import html

    title = " ".join(re.sub(r"<[^>]+>", " ", html.unescape(m.group(1) or m.group(2) or "")).split())
    return title[:80]


def not_embeddings_sentence(endpoint: str, status: int, title: str) -> str:
    """An HTML page where the vectors should be: which URL answered, and the path and port to check."""
    from urllib.parse import urlsplit

    path = urlsplit(endpoint).path or "/"
    page = f"an HTML page (\"{title}\")" if title else "an HTML page"
    where = ("the path, which should be the server's /v1/embeddings" if path.rstrip("/").endswith("/embeddings")
             else f"the path: {path} is not /v1/embeddings, where OpenAI-compatible servers answer")
    return (f"{endpoint} answered HTTP {status} with {page}: it is not an OpenAI-compatible embeddings endpoint "
            f"(a web server or another service listens there); check the port (the one your embeddings server "
            f"listens on, e.g. `llama-server --embeddings --port 8080`) and {where}")


def server_message(resp: wire.Response) -> str:
    """The server's own sentence from an error body (OpenAI/llama-server/TEI shapes), else the raw text."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:300] or f"HTTP {resp.status_code}"
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("error")
            if msg:
                return str(msg)
        elif isinstance(err, str):
            return err
        if body.get("detail"):
            return str(body["detail"])
    return json.dumps(body)[:300]
