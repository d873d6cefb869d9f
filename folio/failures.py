"""How an embeddings endpoint failed, as callers branch on it and as users read it.

Owns the failure kinds (Failure, Gone), EndpointError and the sentences that name a server (none
answers; it refused the API key, worded by what folio did with the key; an HTML page where vectors
should be; the server's own words from an error body; what a refusal says: an input too long, too
many, a wrong path and the URL meant, a flag llama-server lacks; a TLS hello a plain-HTTP server
cannot answer). Must not send requests: embed.py does.
"""

from __future__ import annotations

import enum
import json
import re

from folio import wire
from folio.errors import FolioError

TOO_LARGE = re.compile(r"input \((\d+) tokens\) is too large to process.*?current batch size: (\d+)", re.S)
# text-embeddings-inference (HTTP 413, like its too-many-inputs error): "`inputs` must have less than 512 tokens. Given: 900"
TEI_TOO_LONG = re.compile(r"must have less than (\d+) tokens\. Given: (\d+)")


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
                 tokens: int | None = None, limit: int | None = None, gone: Gone | None = None, watched: str = ""):
        super().__init__(message)
        self.watched = watched or message  # as a watcher says it: it asks the server again itself (no "run again")
        self.kind = kind
        self.status = status
        self.server = server
        self.tokens = tokens
        self.limit = limit
        self.gone = gone


def unreachable_sentence(endpoint: str, detail: str, recorded: bool = False) -> str:
    """Nothing answers at `endpoint`: the example server listens on that endpoint's own port, where
    folio will look for it (8080 only when the URL names none that can be read). `recorded`: the
    endpoint an index recorded, which a question is embedded through whatever the settings name now,
    so the fix that points folio at another server is `folio index --endpoint URL`, not a setting."""
    from urllib.parse import urlsplit

    try:
        port = urlsplit(endpoint).port or 8080
    except ValueError:
        port = 8080
    start = f"start one (e.g. `llama-server -m MODEL.gguf --embeddings --port {port}`)"
    if recorded:
        return (
            f"no embeddings server answers at {endpoint} ({detail}), the endpoint the index recorded (it embeds "
            f"questions there whatever the settings name now); folio runs no model itself: {start}, or move the "
            f"index to another server with `folio index --endpoint URL` at the corpus root (the vectors are kept "
            f"when it serves the same model)"
        )
    return (
        f"no embeddings server answers at {endpoint} ({detail}); folio runs no model itself: "
        f"{start} or point folio at one with `folio config set endpoint URL` or FOLIO_ENDPOINT"
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


def loading(msg: str) -> bool:
    """Whether a 503's own words say the server is loading its model (llama-server: "Loading model"),
    not overloaded: it answers once the model is in memory, however long that takes."""
    return "loading" in msg.lower()


def busy(endpoint: str, status: int, msg: str, waited: float, tries: int) -> EndpointError:
    """A server still busy (HTTP 429/502/503/504) after `tries` tries over `waited` s. Its `watched`
    form leaves out "run the command again": a watcher asks the server again itself."""
    if status == 429:
        why, fix = "it is rate-limiting folio", "wait, then run the command again (or lower `jobs`)"
    elif status == 503 and loading(msg):
        why, fix = "it is still loading its model", "wait until its /health answers 200, then run the command again"
    elif status == 503:
        why, fix = "it is overloaded or not ready", "wait until its /health answers 200, then run the command again"
    else:
        why, fix = "a proxy in front of it cannot reach it", "check the server and the proxy, then run the command again"
    head = (f"the embeddings server at {endpoint} answered HTTP {status} (\"{msg}\") to "
            f"{tries} tr{'y' if tries == 1 else 'ies'} over {waited:.0f} s; {why}")
    return EndpointError(f"{head}: {fix}", Failure.BUSY, status=status, server=msg, watched=head)


def refusal(endpoint: str, resp: wire.Response, msg: str, who: str, n: int, *, key_sent: bool,
            withheld: str = "") -> EndpointError:
    """What a non-200 answer to `n` inputs (`who`: them, as a user names them) says, as an
    EndpointError: an input too long (with the tokens and the limit the server named), too many
    inputs, the key refused, a wrong path, llama-server without --embeddings or with --pooling none,
    a server failing (5xx) or refusing. `msg`: the server's own words, the key masked."""
    m = TOO_LARGE.search(msg)
    if m:
        return EndpointError(
            f"the server refused {who}: \"{msg}\"", Failure.TOO_LARGE, status=resp.status_code, server=msg,
            tokens=int(m.group(1)), limit=int(m.group(2)),
        )
    m = TEI_TOO_LONG.search(msg)
    if m:
        return EndpointError(
            f"the server refused {who}: \"{msg}\"", Failure.TOO_LARGE, status=resp.status_code, server=msg,
            tokens=int(m.group(2)), limit=int(m.group(1)),
        )
    if "exceed_context_size" in resp.text or "exceeds the available context size" in msg:
        try:
            err = resp.json().get("error", {})
            tokens, limit = int(err.get("n_prompt_tokens")), int(err.get("n_ctx"))
        except (ValueError, TypeError, AttributeError):
            tokens = limit = None
        return EndpointError(f"the server refused {who}: \"{msg}\"", Failure.TOO_LARGE,
                             status=resp.status_code, server=msg, tokens=tokens, limit=limit)
    if resp.status_code == 413 or (resp.status_code == 422 and "batch" in msg.lower()):
        return EndpointError(f"the server refused a request of {n} inputs: \"{msg}\"", Failure.TOO_MANY,
                             status=resp.status_code, server=msg)
    if resp.status_code in (401, 403):
        return EndpointError(credentials_sentence(endpoint, resp.status_code, msg, sent=key_sent, withheld=withheld),
                             Failure.REFUSED, status=resp.status_code, server=msg)
    if resp.status_code == 404:
        meant = meant_url(endpoint)
        use = f": use {meant}" if meant else " (llama-server also needs --embeddings)"
        return EndpointError(
            f"{endpoint} answered HTTP 404 (\"{msg}\"); the endpoint URL should end in /v1/embeddings{use}",
            Failure.REFUSED, status=404, server=msg)
    if resp.status_code == 501 and "--embeddings" in msg:  # llama-server started without --embeddings
        return EndpointError(
            f"the server at {endpoint} does not serve embeddings (HTTP 501: \"{msg}\"): restart "
            f"llama-server with --embeddings", Failure.REFUSED, status=501, server=msg)
    if "pooling type 'none'" in msg.lower():
        return EndpointError(
            f"the server at {endpoint} runs with --pooling none, which gives no sentence vectors "
            f"(\"{msg}\"); restart llama-server without --pooling none (the model's own pooling, "
            f"usually mean, is right)", Failure.REFUSED, status=resp.status_code, server=msg)
    # a 5xx is the server failing (its log says why), on this input or on any: not a verdict on the text
    did = "failed on" if resp.status_code >= 500 else "refused"
    return EndpointError(f"the server {did} {who} (HTTP {resp.status_code}: \"{msg}\")", Failure.REFUSED,
                         status=resp.status_code, server=msg)


def meant_url(endpoint: str) -> str | None:
    """The OpenAI-compatible URL a wrong path on this server most likely meant (the server root
    with /v1/embeddings: for a bare root, `/v1`, `/v1/embedding`, llama-server's own `/embeddings`
    or `/embedding`, a trailing slash), or None when the endpoint is that URL already."""
    url = endpoint.rstrip("/")
    for tail in ("/v1/embeddings", "/v1/embedding", "/embeddings", "/embedding", "/v1"):
        if url.endswith(tail):
            url = url[: -len(tail)]
            break
    url += "/v1/embeddings"
    return None if url == endpoint else url


def too_long(msg: str) -> bool:
    """A server's refusal of an input as too long (llama-server answers it with HTTP 500)."""
    return bool(TOO_LARGE.search(msg) or TEI_TOO_LONG.search(msg)) or "exceeds the available context size" in msg


TLS_FAILED = "TLS handshake failed"  # EndpointError.server of an https:// URL on a plain-HTTP port


def tls(e: Exception) -> bool:
    """Whether a failed connection failed in its TLS handshake (an https:// URL on a plain-HTTP port)."""
    s = f"{type(e).__name__} {e} {e.__cause__ or ''} {e.__context__ or ''}"
    # A plain-HTTP server answers the TLS hello with an HTTP error ("wrong version number"), or, as
    # llama-server does, waits for a request line and lets the handshake time out ("_ssl.c:989: The
    # handshake operation timed out").
    return "SSL" in s or "TLS" in s or "wrong version number" in s or "handshake" in s.lower()


def short(e: Exception) -> str:
    s = str(e) or type(e).__name__
    if tls(e):
        return TLS_FAILED
    if "Connection refused" in s or "ConnectError" in type(e).__name__:
        return "connection refused"
    return s[:120]
