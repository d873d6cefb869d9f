"""A deterministic OpenAI-compatible embeddings server for tests and benchmarks.

Run as a script::

    python tests/fakeserver.py --port 0 [--dim 384] [--delay-ms 0] [--space NAME]
        [--cheap] [--max-tokens N] [--n-ctx N] [--fail-after N] [--max-inputs N]
        [--base64-mode honour|ignore|reject] [--no-base64] [--api-key KEY]
        [--model-id NAME] [--no-tokenize] [--framing length|chunked|close|gzip|continue|drop-idle]
        [--loading-s N]

It prints exactly one line, ``http://127.0.0.1:PORT``, once listening, then serves
until killed. In-process: ``start_server(**opts) -> (base_url, shutdown)``.

Endpoints mimic llama-server (see ../shared/llama/README.md):

- ``POST /v1/embeddings``  ``{"input": str | [str], "model": str, "encoding_format": ...}``
- ``GET /health`` -> ``{"status":"ok"}``;  ``GET /v1/models``;  ``GET /props``
- ``POST /tokenize`` ``{"content": str, "add_special": bool}`` -> ``{"tokens": [...]}``
  (``--no-tokenize``: 404 there, and no ``meta`` in /v1/models, as an OpenAI-style server
  without llama-server's extras)
- ``GET /slots`` (only with ``--slots N``) -> llama-server's shape: ``[{"id", "id_task", "is_processing"}]``
- ``GET /stats`` -> request/input counters and ``cpu_s`` (the server process's user+sys CPU
  seconds: benchmarks subtract it to split a run's time between the client and the server);
  ``GET /inputs`` -> recorded inputs (if recording)
- ``POST /control`` JSON to change behaviour at run time (see ``State.control``): e.g.
  ``{"fail": "500", "times": 2}``, ``{"fail": "timeout", "hang_s": 2}``, ``{"delay_ms": 50}``,
  ``{"fail": "shutdown"}`` (stop listening, as llama-server does on SIGTERM, and never answer
  the request that triggered it), ``{"loading_s": 3}`` (every route, /health included, answers
  llama-server's 503 "Loading model" for that many seconds from now, as while it loads a model;
  ``--loading-s N`` starts so),
  ``{"space": "b"}``, or a poisoned input: ``{"fail_input_containing": "POISON",
  "fail_input_fault": "500"}`` fails only requests holding an input with that text
  (``nan``/``zero``/``huge``/``wrong_dim`` spoil only that input's row: ``huge`` multiplies it
  by 1e20, ``wrong_dim`` drops its last component; ``switch_dim`` answers that request and every
  later one a dimension short, as a server restarted on another model mid-run, until
  ``{"fail": null}``); ``{"delay_input_containing": "ferry",
  "delay_input_ms": 1500}`` makes only requests holding such an input take that long (with
  ``--slots``, holding their slot: one client's work keeps the server busy for the others).

Embedding: words (``\\w+``, lowercased), stop words dropped, light suffix stemming,
synonym groups mapped to one canonical token, each token feature-hashed (blake2b, salted
by ``--space``) into ``dim`` buckets with a +/-1 sign, weighted 1+log(tf); adjacent-token
bigrams at weight 0.5; L2-normalised. Empty input -> a fixed non-zero unit vector.

``--framing`` (how every answer is sent, as servers differ): ``length`` (Content-Length, kept
alive; the default), ``chunked`` (Transfer-Encoding: chunked, in 1000-byte chunks),
``close`` (no length: the body ends when the server closes the connection), ``gzip``
(Content-Encoding: gzip, whether asked for or not), ``continue`` (an interim ``100 Continue``
first), ``drop-idle`` (kept alive by the headers, closed by the server right after each answer,
as a server that times idle connections out at once).

``--cheap`` (benchmarks): a near zero-cost endpoint. Each text gets one of 4096 fixed random
unit vectors, picked by crc32 of its UTF-8 bytes, with the base64/JSON encodings precomputed,
so the server spends its time on HTTP and JSON only; ``/tokenize`` answers the same count with
every id 1000. Same text -> same vector; no meaning.

Token count approximation (used for usage, ``--max-tokens``, ``--n-ctx`` and
``/tokenize``): ``ceil(len(text.encode("utf-8")) / 4) + 2`` (the +2 being the
[CLS]/[SEP] specials; ``/tokenize`` adds them only with ``add_special: true``).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import math
import os
import re
import sys
import threading
import time
import zlib
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

# --------------------------------------------------------------------------- text model

SYNONYM_GROUPS: list[list[str]] = [
    ["car", "automobile", "vehicle", "auto"],
    ["begin", "start", "commence", "initiate"],
    ["error", "failure", "fault", "fail", "mistake"],
    ["remove", "delete", "erase"],
    ["quick", "fast", "rapid", "swift", "speedy"],
    ["house", "home", "dwelling", "residence"],
    ["big", "large", "huge", "enormous"],
    ["revenue", "income", "earnings"],
    ["recognise", "recognize", "recognition"],
    ["small", "little", "tiny"],
    ["buy", "purchase", "acquire"],
    ["finish", "terminate", "conclude", "halt"],
    ["show", "display"],
    ["help", "assist", "aid"],
    ["create", "construct", "generate"],
    ["change", "modify", "alter"],
    ["fix", "repair", "mend"],
    ["answer", "reply", "respond", "response"],
    ["ask", "inquire", "enquire"],
    ["picture", "image", "photo", "photograph"],
    ["money", "cash", "funds"],
    ["smart", "intelligent", "clever"],
    ["happy", "glad", "joyful", "cheerful"],
    ["doctor", "physician"],
    ["child", "kid"],
    ["sick", "ill", "unwell"],
    ["close", "shut"],
    ["rich", "wealthy", "affluent"],
    ["difficult", "hard", "tough"],
    ["easy", "simple", "straightforward"],
]

_STOP_TEXT = (
    "a an the of to in on at for from by with and or but is are was were be been being "
    "it its this that these those as into than then so do does did have has had i you we "
    "they he she my your our their me us them"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())

_SUFFIXES = (
    "ations", "ation", "ings", "ing", "ments", "ment", "ness", "ences", "ence", "ances",
    "ance", "ions", "ion", "ers", "er", "ed", "es", "ly", "s",
)  # fmt: skip


def stem(word: str) -> str:
    """Light, deterministic suffix stripping (not a real stemmer; just consistent)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("ied"):
        return word[:-3] + "y"
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            word = word[: -len(suf)]
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]  # "stopped" -> "stopp" -> "stop"
    return word


def _build_synonyms() -> tuple[dict[str, str], dict[str, str]]:
    raw: dict[str, str] = {}
    stems: dict[str, str] = {}
    for group in SYNONYM_GROUPS:
        canon = "syn:" + group[0]
        for w in group:
            raw.setdefault(w, canon)
            stems.setdefault(stem(w), canon)
    return raw, stems


_SYN_RAW, _SYN_STEM = _build_synonyms()
_WORD = re.compile(r"\w+")


def canonical_tokens(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text.lower()):
        if w in STOP_WORDS:
            continue
        c = _SYN_RAW.get(w)
        if c is None:
            s = stem(w)
            c = _SYN_STEM.get(s, s)
        out.append(c)
    return out


def count_tokens(text: str) -> int:
    """The documented token-count approximation: ceil(utf-8 bytes / 4) + 2."""
    return -(-len(text.encode("utf-8")) // 4) + 2


class Embedder:
    """Feature-hashing embedder; one per (dim, space). Thread-safe enough (dict cache)."""

    BIGRAM_WEIGHT = 0.5

    def __init__(self, dim: int = 384, space: str = "a"):
        self.dim = int(dim)
        self.space = str(space)
        self._salt = ("folio-fake/" + self.space + "/").encode()
        self._cache: dict[str, tuple[int, float]] = {}
        h = hashlib.blake2b(self._salt + b"\x00empty", digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(h, "little"))
        v = rng.standard_normal(self.dim).astype(np.float32)
        self.empty = v / np.linalg.norm(v)

    def _feature(self, tok: str) -> tuple[int, float]:
        f = self._cache.get(tok)
        if f is None:
            h = int.from_bytes(
                hashlib.blake2b(self._salt + tok.encode("utf-8"), digest_size=8).digest(),
                "little",
            )
            f = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
            if len(self._cache) > 500_000:
                self._cache.clear()
            self._cache[tok] = f
        return f

    def embed(self, texts: list[str]) -> np.ndarray:
        n = len(texts)
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        feature = self._feature
        bw = self.BIGRAM_WEIGHT
        for i, text in enumerate(texts):
            toks = canonical_tokens(text)
            if not toks:
                continue
            grams = Counter(toks)
            bigrams = Counter(a + " " + b for a, b in zip(toks, toks[1:], strict=False))
            for counts, w in ((grams, 1.0), (bigrams, bw)):
                for tok, tf in counts.items():
                    idx, sign = feature(tok)
                    rows.append(i)
                    cols.append(idx)
                    vals.append(sign * w * (1.0 + math.log(tf)))
        m = np.zeros((n, self.dim), dtype=np.float64)
        if rows:
            np.add.at(m, (np.asarray(rows), np.asarray(cols)), np.asarray(vals))
        norms = np.linalg.norm(m, axis=1)
        out = np.empty((n, self.dim), dtype=np.float32)
        nz = norms > 0
        out[nz] = (m[nz] / norms[nz, None]).astype(np.float32)
        out[~nz] = self.empty
        return out


class CheapEmbedder:
    """--cheap: a fixed table of unit vectors indexed by crc32(text); encodings precomputed."""

    ROWS = 4096

    def __init__(self, dim: int = 384, space: str = "a"):
        self.dim = int(dim)
        self.space = str(space)
        h = hashlib.blake2b(("folio-fake-cheap/" + self.space).encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(h, "little"))
        t = rng.standard_normal((self.ROWS, self.dim)).astype(np.float32)
        self.table = (t / np.linalg.norm(t, axis=1, keepdims=True)).astype("<f4")
        self.b64 = [base64.b64encode(row.tobytes()).decode("ascii") for row in self.table]
        self.lists = [None] * self.ROWS  # float lists, built on first use

    def pick(self, texts: list[str]) -> list[int]:
        return [zlib.crc32(t.encode("utf-8", "surrogatepass")) % self.ROWS for t in texts]

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.table[self.pick(texts)].copy()

    def encoded(self, texts: list[str], fmt: str) -> list:
        rows = self.pick(texts)
        if fmt == "base64":
            return [self.b64[i] for i in rows]
        out = []
        for i in rows:
            if self.lists[i] is None:
                self.lists[i] = self.table[i].tolist()
            out.append(self.lists[i])
        return out


def _embedder(dim: int, space: str, cheap: bool):
    return CheapEmbedder(dim, space) if cheap else Embedder(dim, space)


# --------------------------------------------------------------------------- server state

FAULTS = ("500", "429", "503", "timeout", "disconnect", "nan", "zero", "huge", "wrong_dim",
          "switch_dim", "wrong_count", "not_json", "shutdown")  # fmt: skip


class State:
    def __init__(self, *, dim=384, delay_ms=0, space="a", max_tokens=None, n_ctx=None,
                 fail_after=None, base64_mode="honour", no_base64=False, max_inputs=None,
                 api_key=None, model_id="fake", record=False, cheap=False, no_tokenize=False,
                 slots=None, framing="length", loading_s=0):  # fmt: skip
        self.lock = threading.Lock()
        self.loading_until = time.monotonic() + float(loading_s or 0)  # still loading its model until then
        self.framing = framing
        # --slots N: like llama-server, at most N embedding requests are worked on at once, the rest
        # wait their turn, and a request is worked through even when its client has gone (a killed
        # run's requests drain); GET /slots shows each slot's task. Without it: no limit, no /slots.
        self.slots = int(slots) if slots else None
        self.slot_tasks: list = [None] * (self.slots or 0)
        self.slot_free = threading.Condition(self.lock)
        self.next_task = 0
        self.cheap = bool(cheap)
        self.embedder = _embedder(dim, space, self.cheap)
        self.delay_ms = float(delay_ms or 0)
        self.max_tokens = max_tokens
        self.n_ctx = n_ctx
        self.fail_after = fail_after
        self.base64_mode = "ignore" if no_base64 else base64_mode
        self.max_inputs = max_inputs
        self.no_tokenize = bool(no_tokenize)
        self.api_key = api_key
        self.echo_key = None  # "plain" | "url" | "base64" | "hex" | "upper" | "html": a 401 repeats the token it got, so encoded
        self.model_id = model_id
        self.fail: str | None = None
        self.fail_times: int | None = None  # None = until cleared
        self.retry_after: str | None = None
        self.hang_s = 30.0
        # A poisoned input: a request holding an input that contains this text gets
        # `fail_input_fault` (default "500"); nan/zero spoil only that input's row.
        self.fail_input_containing: str | None = None
        self.fail_input_fault = "500"
        self.delay_input_containing: str | None = None  # requests holding an input with it take delay_input_ms
        self.delay_input_ms = 0.0
        self.record = record
        self.recorded: list[str] = []
        self.reset_stats()

    def reset_stats(self):
        self.stats = {
            "requests": 0,  # POST /v1/embeddings received
            "ok": 0,  # answered 200 with real vectors
            "inputs": 0,  # inputs embedded in ok requests
            "failed": 0,  # answered with an error or an injected fault
            "faults": 0,  # injected faults served (control / fail-after)
            "status": {},  # status code -> count
            "max_batch": 0,  # most inputs in one request
            "in_flight": 0,
            "max_in_flight": 0,  # highest concurrency seen
            "auth_requests": 0,  # requests carrying an Authorization header
            "last_authorization": None,
            "models": [],  # distinct "model" values seen, in order
            "encoding_formats": {},
            "tokenize_requests": 0,
        }
        self.recorded = []
        self.recorded_fields = []  # per recorded input: the request's fields beyond model/input/encoding_format

    def take_fault(self) -> str | None:
        with self.lock:
            if self.fail_after is not None and self.stats["ok"] >= self.fail_after:
                return "500"
            if self.fail is None:
                return None
            f = self.fail
            if self.fail_times is not None:
                self.fail_times -= 1
                if self.fail_times <= 0:
                    self.fail, self.fail_times = None, None
            return f

    def control(self, body: dict) -> dict:
        with self.lock:
            if "fail" in body:
                f = body["fail"]
                if f is not None and str(f) not in FAULTS:
                    raise ValueError(f"unknown fault {f!r}; one of {FAULTS}")
                self.fail = None if f is None else str(f)
                t = body.get("times")
                self.fail_times = None if t is None else int(t)
            if "fail_input_fault" in body and str(body["fail_input_fault"]) not in FAULTS:
                raise ValueError(f"unknown fault {body['fail_input_fault']!r}; one of {FAULTS}")
            for key in ("delay_ms", "max_tokens", "n_ctx", "max_inputs", "fail_after",
                        "retry_after", "hang_s", "record", "base64_mode", "api_key", "echo_key",
                        "fail_input_containing", "fail_input_fault", "delay_input_containing",
                        "delay_input_ms"):  # fmt: skip
                if key in body:
                    setattr(self, key, body[key])
            if "space" in body or "dim" in body:  # a different "model" at the same URL
                self.embedder = _embedder(int(body.get("dim", self.embedder.dim)),
                                          str(body.get("space", self.embedder.space)), self.cheap)
            if "loading_s" in body:
                self.loading_until = time.monotonic() + float(body["loading_s"] or 0)
            if body.get("reset_stats"):
                self.reset_stats()
            return self.describe()

    def loading(self) -> bool:
        return time.monotonic() < self.loading_until

    def describe(self) -> dict:
        return {
            "dim": self.embedder.dim, "space": self.embedder.space, "delay_ms": self.delay_ms,
            "max_tokens": self.max_tokens, "n_ctx": self.n_ctx, "max_inputs": self.max_inputs,
            "fail_after": self.fail_after, "fail": self.fail, "times": self.fail_times,
            "retry_after": self.retry_after, "hang_s": self.hang_s, "record": self.record,
            "base64_mode": self.base64_mode, "model_id": self.model_id,
            "fail_input_containing": self.fail_input_containing,
            "fail_input_fault": self.fail_input_fault,
            "delay_input_containing": self.delay_input_containing, "delay_input_ms": self.delay_input_ms,
            "cheap": self.cheap,
        }  # fmt: skip


def _extra(body) -> dict:
    """A request's fields beyond the ones every client sends (a role's `input_type`, ...)."""
    return {k: v for k, v in body.items() if k not in ("model", "input", "encoding_format")}


def _err(code: int, message: str, type_: str) -> dict:
    return {"error": {"code": code, "message": message, "type": type_}}


def _echo(message: str, auth: str | None, how: str | None) -> str:
    """A careless server's 401: the token it got, as sent, URL-encoded, in base64, in hex (upper
    case), upper-cased, or as HTML character references (the way an HTML error page quotes it)."""
    if not how or not auth:
        return message
    from urllib.parse import quote

    token = auth.removeprefix("Bearer ")
    shown = {"plain": token, "url": quote(token, safe=""), "base64": base64.b64encode(token.encode()).decode(),
             "hex": token.encode().hex().upper(), "upper": token.upper(),
             "html": "".join(f"&#{ord(c)};" if not c.isalnum() else c for c in token)}[how]
    return f"{message}: {shown}"


# --------------------------------------------------------------------------- HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "folio-fakeserver"
    sys_version = ""
    state: State  # set on the subclass by make_server

    def log_message(self, format, *args):  # quiet
        pass

    # -- plumbing
    def _send(self, status: int, obj=None, *, raw: bytes | None = None,
              ctype="application/json; charset=utf-8", headers=None):  # fmt: skip
        body = raw if raw is not None else json.dumps(obj, separators=(",", ":")).encode()
        framing = self.state.framing
        if framing == "continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if framing == "gzip":
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        if framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        elif framing == "close":
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if framing == "chunked":
            for i in range(0, len(body), 1000):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(body[i:i + 1000]), body[i:i + 1000]))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.wfile.write(body)
        if framing == "drop-idle":
            self.close_connection = True

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        return json.loads(data) if data else {}

    # -- routes
    def _still_loading(self, path: str) -> bool:
        """While loading its model llama-server answers every route, /health included, with this 503
        (the test's own routes, /control /stats /inputs, answer as ever). True: answered so."""
        if path in ("/control", "/stats", "/inputs") or not self.state.loading():
            return False
        if path in ("/v1/embeddings", "/embeddings"):
            self._count(503)
        self._send(503, _err(503, "Loading model", "unavailable_error"))
        return True

    def do_GET(self):
        st = self.state
        path = self.path.split("?", 1)[0]
        if self._still_loading(path):
            return
        if path == "/health":
            self._send(200, {"status": "ok"})
        elif path in ("/v1/models", "/models") and st.no_tokenize:
            self._send(200, {"object": "list", "data": [{"id": st.model_id, "object": "model", "created": 0,
                                                         "owned_by": "folio-fake"}]})  # fmt: skip
        elif path in ("/v1/models", "/models"):
            n_ctx = st.n_ctx or 512
            # a model trained on the context its server enforces (--n-ctx 300: a 300-token model, served
            # whole; a server set shorter than its model, which doctor fails, is the real llama-server's case)
            self._send(200, {"object": "list", "data": [{
                "id": st.model_id, "object": "model", "created": 0, "owned_by": "folio-fake",
                "meta": {"n_ctx": n_ctx, "n_ctx_train": n_ctx, "n_embd": st.embedder.dim,
                         "vocab_type": 0, "n_vocab": 30522, "n_params": 0, "size": 0},
            }]})  # fmt: skip
        elif path == "/props":
            self._send(200, {"default_generation_settings": {"n_ctx": st.n_ctx or 512},
                             "total_slots": 1, "model_path": st.model_id})  # fmt: skip
        elif path == "/slots" and st.slots:
            with st.lock:
                self._send(200, [{"id": i, "id_task": t if t is not None else -1, "is_processing": t is not None}
                                 for i, t in enumerate(st.slot_tasks)])
        elif path == "/stats":
            t = os.times()
            with st.lock:
                self._send(200, dict(st.stats, state=st.describe(), cpu_s=t.user + t.system))
        elif path == "/inputs":
            with st.lock:
                self._send(200, {"inputs": list(st.recorded), "fields": list(st.recorded_fields)})
        else:
            self._send(404, _err(404, "File Not Found", "not_found_error"))

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        try:
            body = self._body()
        except (ValueError, UnicodeDecodeError):
            if path in ("/v1/embeddings", "/embeddings"):
                self._count(400)
            self._send(400, _err(400, "Failed to parse JSON body", "invalid_request_error"))
            return
        if self._still_loading(path):
            return
        if path in ("/v1/embeddings", "/embeddings"):
            st = self.state
            with st.lock:
                st.stats["in_flight"] += 1
                st.stats["max_in_flight"] = max(st.stats["max_in_flight"],
                                                st.stats["in_flight"])
            slot = self._take_slot()
            try:
                self._embeddings(body)
            finally:
                with st.lock:
                    st.stats["in_flight"] -= 1
                    if slot is not None:
                        st.slot_tasks[slot] = None
                        st.slot_free.notify_all()
        elif path == "/tokenize" and not self.state.no_tokenize:
            self._tokenize(body)
        elif path == "/control":
            try:
                self._send(200, self.state.control(body if isinstance(body, dict) else {}))
            except (ValueError, TypeError) as e:
                self._send(400, _err(400, str(e), "invalid_request_error"))
        else:
            self._send(404, _err(404, "File Not Found", "not_found_error"))

    def _take_slot(self) -> int | None:
        st = self.state
        if not st.slots:
            return None
        with st.slot_free:
            while None not in st.slot_tasks:
                st.slot_free.wait()
            slot = st.slot_tasks.index(None)
            st.slot_tasks[slot] = st.next_task
            st.next_task += 1
            return slot

    def _count(self, status: int, n_inputs: int = 0, fault: bool = False):
        st = self.state
        with st.lock:
            s = st.stats
            s["status"][str(status)] = s["status"].get(str(status), 0) + 1
            if status == 200 and not fault:
                s["ok"] += 1
                s["inputs"] += n_inputs
            else:
                s["failed"] += 1
            if fault:
                s["faults"] += 1

    def _tokenize(self, body):
        st = self.state
        with st.lock:
            st.stats["tokenize_requests"] += 1
        content = body.get("content", "") if isinstance(body, dict) else ""
        if not isinstance(content, str):
            self._send(400, _err(400, '"content" must be a string', "invalid_request_error"))
            return
        raw = content.encode("utf-8")
        if st.cheap:  # the same count, without a token id computed per 4 bytes
            n = -(-len(raw) // 4) + (2 if body.get("add_special") else 0)
            self._send(200, raw=b'{"tokens":[' + b",".join([b"1000"] * n) + b"]}")
            return
        toks = [1000 + (int.from_bytes(raw[i:i + 4], "little") % 29000)
                for i in range(0, len(raw), 4)]  # fmt: skip
        if body.get("add_special"):
            toks = [101, *toks, 102]
        self._send(200, {"tokens": toks})

    def _embeddings(self, body):
        st = self.state
        with st.lock:
            st.stats["requests"] += 1
            auth = self.headers.get("Authorization")
            if auth:
                st.stats["auth_requests"] += 1
                st.stats["last_authorization"] = auth
            model = body.get("model") if isinstance(body, dict) else None
            if model not in st.stats["models"]:
                st.stats["models"].append(model)
            fmt = (body.get("encoding_format") if isinstance(body, dict) else None) or "float"
            st.stats["encoding_formats"][fmt] = st.stats["encoding_formats"].get(fmt, 0) + 1
            delay = st.delay_ms
        if delay:
            time.sleep(delay / 1000.0)

        if st.api_key is not None and auth != f"Bearer {st.api_key}":
            self._count(401)
            self._send(401, _err(401, _echo("Invalid API Key", auth, st.echo_key), "authentication_error"))
            return

        inp = body.get("input") if isinstance(body, dict) else None
        if isinstance(inp, str):
            texts = [inp]
        elif isinstance(inp, list) and all(isinstance(x, str) for x in inp):
            texts = inp
        else:
            self._count(400)
            self._send(400, _err(400, '"input" must be a string or a list of strings',
                                 "invalid_request_error"))  # fmt: skip
            return
        if not texts:
            self._count(400)
            self._send(400, _err(400, "Input content cannot be empty", "invalid_request_error"))
            return
        slow = st.delay_input_containing
        if slow and any(slow in t for t in texts):
            time.sleep(float(st.delay_input_ms) / 1000.0)
        if fmt not in ("float", "base64"):
            self._count(400)
            self._send(400, _err(400, "The format to return the embeddings in. Can be either "
                                 "float or base64", "invalid_request_error"))  # fmt: skip
            return
        if fmt == "base64" and st.base64_mode == "reject":
            self._count(400)
            self._send(400, _err(400, 'encoding_format "base64" is not supported; use "float"',
                                 "invalid_request_error"))  # fmt: skip
            return
        if st.max_inputs is not None and len(texts) > st.max_inputs:
            self._count(413)
            self._send(413, {"error": f"batch size {len(texts)} > maximum allowed batch size "
                                      f"{st.max_inputs}", "error_type": "validation"})  # fmt: skip
            return

        ntoks = [count_tokens(t) for t in texts]
        for n in ntoks:
            if st.max_tokens is not None and n > st.max_tokens:
                self._count(500)
                self._send(500, _err(500, f"input ({n} tokens) is too large to process. "
                                     f"increase the physical batch size (current batch size: "
                                     f"{st.max_tokens})", "server_error"))  # fmt: skip
                return
        for n in ntoks:
            if st.n_ctx is not None and n > st.n_ctx:
                self._count(400)
                e = _err(400, "the request exceeds the available context size, try increasing "
                         "it", "exceed_context_size_error")  # fmt: skip
                e["error"].update(n_prompt_tokens=n, n_ctx=st.n_ctx)
                self._send(400, e)
                return

        fault = st.take_fault()
        marker = st.fail_input_containing
        poisoned = [i for i, t in enumerate(texts) if marker and marker in t]
        from_poison = fault is None and bool(poisoned)
        if from_poison:
            fault = str(st.fail_input_fault)
        if fault == "switch_dim":  # from now on the server answers in another dimension
            with st.lock:
                st.fail, st.fail_times = "wrong_dim", None
            fault, from_poison = "wrong_dim", False
        if fault in ("500", "429", "503", "timeout", "disconnect", "not_json", "shutdown"):
            self._fault(fault)
            return

        if fault is None and isinstance(st.embedder, CheapEmbedder) and (
                fmt == "float" or st.base64_mode == "honour"):
            self._answer(model, texts, ntoks, st.embedder.encoded(texts, fmt), extra=_extra(body))
            return
        vecs = st.embedder.embed(texts)
        rows = poisoned if from_poison else slice(None)
        if fault == "nan":
            vecs[rows, 0] = np.nan
        elif fault == "zero":
            vecs[rows] = 0.0
        elif fault == "huge":
            vecs[rows] *= 1e20
        elif fault == "wrong_dim" and not from_poison:
            vecs = vecs[:, :-1]
        if fault == "wrong_count":
            vecs = vecs[:-1]
        cut = set(poisoned) if fault == "wrong_dim" and from_poison else set()
        vecs = [row[:-1] if i in cut else row for i, row in enumerate(vecs)]
        if fmt == "base64" and st.base64_mode == "honour":
            embs = [base64.b64encode(row.astype("<f4", copy=False).tobytes()).decode("ascii") for row in vecs]
        else:
            embs = [row.tolist() for row in vecs]
        self._answer(model, texts, ntoks, embs, fault, extra=_extra(body))

    def _answer(self, model, texts, ntoks, embs, fault=None, extra=None):
        st = self.state
        total = sum(ntoks)
        out = {
            "model": model,
            "object": "list",
            "usage": {"prompt_tokens": total, "total_tokens": total},
            "data": [{"embedding": e, "index": i, "object": "embedding"}
                     for i, e in enumerate(embs)],
        }  # fmt: skip
        self._count(200, len(texts), fault=fault is not None)
        if fault is None:
            with st.lock:
                st.stats["max_batch"] = max(st.stats["max_batch"], len(texts))
                if st.record:
                    st.recorded.extend(texts)
                    st.recorded_fields.extend([extra or {}] * len(texts))
        self._send(200, out)

    def _fault(self, fault: str):
        st = self.state
        if fault == "500":
            self._count(500, fault=True)
            self._send(500, _err(500, "injected failure", "server_error"))
        elif fault == "429":
            self._count(429, fault=True)
            hdr = {"Retry-After": str(st.retry_after)} if st.retry_after is not None else {}
            self._send(429, _err(429, "Too Many Requests", "rate_limit_error"), headers=hdr)
        elif fault == "503":
            self._count(503, fault=True)
            hdr = {"Retry-After": str(st.retry_after)} if st.retry_after is not None else {}
            self._send(503, {"error": {"code": 503, "message": "Loading model",
                                       "type": "unavailable_error"}}, headers=hdr)  # fmt: skip
        elif fault == "not_json":
            self._count(200, fault=True)
            self._send(200, raw=b"<html><body>Bad Gateway?</body></html>",
                       ctype="text/html; charset=utf-8")  # fmt: skip
        else:  # timeout: hang then drop; disconnect: drop now; shutdown: see stop_listening
            self._count(0, fault=True)
            if fault == "shutdown":
                stop_listening(self.server)
            if fault in ("timeout", "shutdown"):
                time.sleep(float(st.hang_s))
            self.close_connection = True


# --------------------------------------------------------------------------- entry points


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True
    stopped_listening = False


def stop_listening(srv: _Server) -> None:
    """The `shutdown` fault: what llama-server does on SIGTERM — it closes its listening socket
    (new connections are refused, /health included) while a request it already took is never
    answered. The process lives on until killed."""
    srv.stopped_listening = True

    def stop():
        srv.shutdown()
        srv.socket.close()

    threading.Thread(target=stop, daemon=True).start()


def make_server(host="127.0.0.1", port=0, **opts) -> _Server:
    state = State(**opts)
    handler = type("BoundHandler", (Handler,), {"state": state})
    srv = _Server((host, port), handler)
    srv.state = state  # type: ignore[attr-defined]
    return srv


def start_server(host="127.0.0.1", port=0, **opts):
    """Start in a background thread. Returns (base_url, shutdown). Options as State()."""
    srv = make_server(host, port, **opts)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    url = f"http://{host}:{srv.server_address[1]}"

    def shutdown():
        srv.shutdown()
        srv.server_close()
        t.join(timeout=5)

    return url, shutdown


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--delay-ms", type=float, default=0)
    p.add_argument("--space", default="a", help="salt: a different name is a different model")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="physical batch: longer inputs fail the request with llama's 500")
    p.add_argument("--n-ctx", type=int, default=None,
                   help="context: longer inputs get llama's 400 exceed_context_size_error")
    p.add_argument("--fail-after", type=int, default=None)
    p.add_argument("--max-inputs", type=int, default=None)
    p.add_argument("--base64-mode", choices=("honour", "ignore", "reject"), default="honour")
    p.add_argument("--no-base64", action="store_true", help="same as --base64-mode ignore")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    p.add_argument("--model-id", default="fake")
    p.add_argument("--slots", type=int, default=None,
                   help="work on at most N embedding requests at once (the rest queue); GET /slots")
    p.add_argument("--record", action="store_true", help="keep inputs for GET /inputs")
    p.add_argument("--no-tokenize", action="store_true",
                   help="no /tokenize and no /v1/models meta (an OpenAI-style server)")
    p.add_argument("--framing", choices=("length", "chunked", "close", "gzip", "continue", "drop-idle"),
                   default="length", help="how answers are framed (see above)")
    p.add_argument("--cheap", action="store_true",
                   help="near zero-cost vectors (a fixed table picked by crc32): for benchmarks")
    p.add_argument("--loading-s", type=float, default=0,
                   help="answer 503 \"Loading model\" everywhere for this many seconds first (llama-server loading)")
    a = p.parse_args(argv)
    srv = make_server(
        a.host, a.port, dim=a.dim, delay_ms=a.delay_ms, space=a.space, max_tokens=a.max_tokens,
        n_ctx=a.n_ctx, fail_after=a.fail_after, base64_mode=a.base64_mode,
        no_base64=a.no_base64, max_inputs=a.max_inputs, api_key=a.api_key,
        model_id=a.model_id, record=a.record, cheap=a.cheap, slots=a.slots, no_tokenize=a.no_tokenize,
        framing=a.framing, loading_s=a.loading_s,
    )  # fmt: skip
    sys.stdout.write(f"http://{a.host}:{srv.server_address[1]}\n")
    sys.stdout.flush()
    try:
        srv.serve_forever(poll_interval=0.2)
        while srv.stopped_listening:  # the `shutdown` fault: taken requests stay unanswered
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
