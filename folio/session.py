"""One index run's session with the embeddings server: the client, the space check, the token limit.

Owns what a run learns from the server and records about it: whether the server answers (`server`:
unknown | ok | down, and the failure that took it down), whether it still serves the index's vector
space (the fingerprint, asked with the first embedding or on its own), the record text the vectors
were embedded from, and how many tokens it takes in one input (learned, settled, lowered on a
refusal). space.py gives the verdicts (same space, roles, learned tokens); this module acts on them
for one run: it records them in the store's meta, marks files to be read again, and raises Restart
when the files already planned were planned for another space or limit. It words how the server
failed the run: a full run's exit-1 sentence (failure_sentence), and a refresh's failure, which
has no rest to finish lexically and is raised (down). Must not plan files,
assemble batches, show progress or print: notices go to the Report; what the server did shows in
`server` and `failure`, which the pass (pipeline.py) reads after each call and acts on.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from folio.errors import FolioError
from folio.reader import VERSION as TEXT_VERSION
from folio.reader import reader_text
from folio.report import Report
from folio.space import SAME_SPACE, Target, Tokens, learned_tokens, limit_probe, space_meta
from folio.surface import invoke

TOKEN_FLOOR = 32  # a server taking fewer tokens an input than this is refused with the fix
SPECIALS = 8  # special tokens a tokenizer may add: a text of n UTF-8 bytes is at most n + SPECIALS tokens


class Restart(Exception):
    """The vector space or the token limit changed under a running pass: start the file pass again
    (what it planned was planned for the old one; nothing of it was committed)."""


class Down(namedtuple("Down", "error mid_run")):
    """How the server failed this run: the EndpointError, and whether it had embedded before."""

    __slots__ = ()


class Session:
    """What one run knows of the server. `full`: a whole-corpus run (a failing server leaves the rest
    lexical, never unindexed); `down`: the failure that ended an earlier pass of this run (this pass is
    lexical from the start); `renew`: a full run may re-embed vectors from another record text."""

    def __init__(self, store, target: Target | None, report: Report, *, full: bool = False,
                 renew: bool = False, down: Down | None = None, on_wait: Callable[[str], None] | None = None,
                 on_tick: Callable[[], None] | None = None):
        self.store = store
        self.target = target
        self.report = report
        self.full = full
        self.on_wait = on_wait  # says, as it happens, that the run waits (a server draining others' work)
        self.on_tick = on_tick  # called while the run waits for a server loading its model
        self.failure: Down | None = None  # once the server failed this run
        self.client = None
        self.server = "unknown"  # unknown | ok | down
        self.probe_conn = None  # verify_space's connection, opened early (connect_probe: fingerprint.Connection)
        if down is not None:  # the server failed earlier in this run: this pass is lexical from the start
            self.server, self.failure = "down", down
        self.held_vectors = store.has_vectors()  # a space recorded before any vector landed holds nothing
        # vectors embedded from another record text (an older folio): re-embedded by a full run
        self.renew = renew and target is not None and bool(store.dim) and store.meta.text != TEXT_VERSION
        self.ready: dict[str, object] = {}  # text -> vector already fetched (probe/calibration requests)
        # The server's token limit, as recorded; learned (a probe that long) when none is, or while
        # files divided under another limit remain (`refit`: then every record is counted, none is kept
        # for holding a vector). A server that takes less than recorded refuses a record, and
        # lower_limit records the new limit and starts the pass again. `assumed`: a record was kept on
        # the recorded limit before the server confirmed it.
        self.tokens = Tokens.recorded(store.meta)
        self.refit = self.tokens is None or store.meta.refit
        # Vectors with no token limit recorded: an older folio built them (it lowered the budget for the
        # whole corpus instead). A new space records none either, and holds no vector yet: not that.
        self.older = self.held_vectors and self.tokens is None
        self.learn = self.refit
        self.assumed = False
        self.learned = False
        self._counts = None  # counting.Counts: the token counts this run asked for
        self._ahead: dict[str, object] = {}  # record texts count_ahead saw -> their bound, or the text sent
        self._ahead_for: tuple | None = None  # the (limit, document prefix) _ahead was found under
        self.read: dict[str, str] = {}  # record texts count_ahead read -> reader_text of each, for embedding

    # -- the client --------------------------------------------------------------------------

    def get_client(self):
        """The run's client. Every text it embeds is a document (records, calibration, the fingerprint
        probe): the document role rides on each request. Roles left to the server's model id (the
        model is only called `default`) are resolved here, on the first talk to the server."""
        if self.client is None:
            from folio import space
            from folio.embed import Client

            t = self.target
            what = f"indexing {self.store.root}" if self.full else f"a query refreshing files of {self.store.root}"
            self.client = Client(t.endpoint, t.model, api_key=t.api_key, dim=self.store.dim, timeout=t.timeout,
                                 deadline=t.deadline, holding=what, key_withheld=t.key_withheld,
                                 wait_loading=t.deadline is None)  # a query's refresh does not wait for a model
            self.client.say, self.client.tick = self.on_wait, self.on_tick
            if t.roles is None:
                t.roles = space.server_roles(self.client.models(wait_loading=True))
            self.client.role = t.roles.document
        return self.client

    def close(self) -> None:
        if self._counts is not None:
            self._counts.close()
        if self.probe_conn is not None:  # opened early, not needed: the pass sent its own requests
            self.probe_conn.close()
            self.probe_conn = None
        if self.client is not None:
            self.report.notices.extend(n for n in self.client.notes if n not in self.report.notices)
            self.client.close()  # and with it this run's mark on the server (folio.sharing)

    # -- the space ---------------------------------------------------------------------------

    def check_space(self) -> None:
        """When the config names another endpoint/model than the index recorded, compare fingerprints."""
        from folio import space

        st, t = self.store, self.target
        if not st.dim or t is None:
            return
        recorded = space.recorded_roles(st.meta)
        roles_change = space.role_change(recorded, t.roles) if t.roles is not None else None
        if (st.meta.endpoint, st.meta.model) == (t.endpoint, t.model) and roles_change is None:
            if t.roles is not None and t.roles != recorded:  # the query role (or where it came from) only
                st.set_meta(roles=t.roles.to_meta())
                if t.roles.query != recorded.query:
                    self.report.notices.append(f"queries now use the query role {t.roles.query.describe()} "
                                               f"(was {recorded.query.describe()}); the sections' vectors are kept")
            return
        from folio.embed import PROBE_TEXT, EndpointError
        client = self.get_client()
        client.dim = None
        try:
            fp = client.embed([PROBE_TEXT])[0]
        except EndpointError as e:
            client.dim = st.dim
            self.down(EndpointError(f"{e} (the index was built by {st.meta.model} at "
                                    f"{st.meta.endpoint}, and its vectors are kept)", e.kind,
                                    status=e.status, server=e.server, gone=e.gone), mid_run=False)
            return
        roles_change = space.role_change(recorded, t.roles)
        was = f"{st.meta.model} at {st.meta.endpoint}"
        now = f"{t.model} at {t.endpoint}"
        what = (f"the index was built by {was}, and this run uses {now}" if (was != now or roles_change is None)
                else roles_change)
        if was != now and roles_change:
            what += f"; {roles_change}"
        if space.same_space(fp, space.fingerprint(st.meta)):
            st.set_meta(endpoint=t.endpoint, model=t.model, endpoint_source=t.endpoint_source,
                        roles=t.roles.to_meta())
            self.report.notices.append(
                f"{what}: the same vector space (fingerprint cosine >= {SAME_SPACE}), so every vector is kept")
            self.server = "ok"
        else:
            self.report.notices.append(f"{what} — re-embedding every section")
            st.new_space(len(fp), **space_meta(self.target, fp))
            self.held_vectors = True
            self.server = "ok"
            self.renew = False
            self.tokens, self.refit, self.learn, self.older = None, True, True, False
        client.dim = st.dim

    def connect_probe(self) -> None:
        """Connect for verify_space's fingerprint probe while the tree is still being listed, before
        the pass knows whether it sends anything: the probe goes when the pass ends having sent
        nothing, the connection is closed unused when it sent its own requests."""
        from folio import fingerprint

        t = self.target
        if t is not None and self.server == "unknown" and self.store.dim and self.probe_conn is None:
            self.probe_conn = fingerprint.connect(t.endpoint, min(t.timeout, 15.0))

    def verify_space(self) -> None:
        """A full run that sent the server nothing still asks it for the fingerprint (one short request,
        no httpx or numpy: see folio/fingerprint.py), so a server restarted on another model behind the
        same endpoint and name is caught by `folio index` even when no file changed. Another space:
        every section is embedded again (Restart). No server listening: nothing to compare, and the
        run stays a quick no-op. The connection may be open already (connect_probe)."""
        from folio import fingerprint, space

        st, t = self.store, self.target
        if t is None or self.server != "unknown":
            return
        if not st.dim:
            if t.endpoint_source != "default":
                self._record_space()
            return
        recorded = space.recorded_roles(st.meta)  # check_space has recorded any new roles by now
        conn, self.probe_conn = self.probe_conn or fingerprint.connect(t.endpoint, min(t.timeout, 15.0)), None
        got = conn.fetch(t.model, t.api_key, role=recorded.document)
        if got.vector is None:
            if not got.unreachable:
                self.report.notices.append(f"the server at {t.endpoint} did not answer the fingerprint probe "
                                           f"({got.reason}), so this run could not check that it still serves "
                                           f"the index's vector space; the index was left as it was")
            return
        if fingerprint.matches(st.meta.fingerprint, got.vector):
            return
        self.report.notices.append(
            f"the server at {t.endpoint} now answers in another vector space than the one this index was built "
            f"in (another model behind the same name?) — re-embedding every section")
        st.new_space(len(got.vector), endpoint=t.endpoint, model=t.model, endpoint_source=t.endpoint_source,
                     fingerprint=fingerprint.to_hex(got.vector), text=TEXT_VERSION, roles=recorded.to_meta(),
                     tokens=None, tokens_from=None)
        self.held_vectors = True
        raise Restart()

    def same_space_still(self) -> None:
        """A connection to the server was lost while this run embedded (embedding.embed): llama-server
        killed and started again on its port, with another model or --pooling, answers there in
        another space. The fingerprint probe is asked again; another space fails the run
        (EndpointError) before those answers are kept, so an index never holds two spaces' vectors."""
        from folio import space
        from folio.embed import PROBE_TEXT, EndpointError, Failure

        recorded = space.fingerprint(self.store.meta) if self.store.dim else ()
        if not len(recorded):
            return
        fp = self.client.embed([PROBE_TEXT], labels=["the fingerprint probe"])[0]
        if space.same_space(fp, recorded):
            return
        said = (f"it now answers in another vector space than this run began in (the fingerprint probe's cosine "
                f"{space.cosine(fp, recorded):.2f}): it was restarted with another model or --pooling; the next "
                f"`folio index` re-embeds every section in that space, or restart the server as it was")
        raise EndpointError(f"the embeddings server at {self.target.endpoint}: {said}", Failure.OTHER_MODEL,
                            server=said)

    def _record_space(self) -> None:
        """A run that had nothing to embed (no section, or none waiting) in an index with no vector space
        yet: the server the user named is asked for the fingerprint and its space recorded, so `status`
        and queries use that server (else they take the default endpoint for a server that never
        answered). A server that does not answer: nothing recorded, as before."""
        from folio.embed import PROBE_TEXT, EndpointError

        client = self.get_client()
        try:
            fp = client.embed([PROBE_TEXT])[0]
        except EndpointError:
            return
        self.store.new_space(len(fp), **space_meta(self.target, fp))
        client.dim = self.store.dim

    def renew_text(self) -> None:
        """The index's vectors were embedded from another record text than this folio sends (see
        folio/reader.py): once the server answers, read every file again. Its records get new keys
        (batch.HASH_SALT) and are embedded again, file by file; until then the older vectors (same
        space) keep answering, and a killed run leaves them in place. update() records the version
        when the run completes. With no server, nothing changes and the next full run tries again."""
        from folio.embed import PROBE_TEXT, EndpointError

        client = self.get_client()
        client.dim = None
        try:
            client.embed([PROBE_TEXT])  # only whether it answers: open_server checks the space
        except EndpointError as e:
            self.report.notices.append(f"this index's vectors were embedded from an older record text; they are "
                                       f"kept for now and re-embedded by a `folio index` that reaches the server "
                                       f"({e})")
            self.renew = False
            return
        self.report.notices.append(f"this index's vectors were embedded from an older record text; folio now embeds "
                                   f"each section as a reader sees it ({TEXT_VERSION}: no link targets, HTML "
                                   f"comments or tags) — re-embedding every section, file by file (until its "
                                   f"turn, a file's older vectors keep answering)")
        self.store.reread_all()

    def open_server(self, longest: str | None = None, longest_label: str | None = None) -> None:
        """The server made ready for what the pass needs of it next: to embed, or the token limit to
        divide a record by. The run's first talk probes the space and learns how many tokens the
        server takes in one input (when the index recorded none, or a new one is being settled);
        `longest`: the longest record waiting, sent along (its vector is then `ready`). A server
        check_space opened (the space checked without the limit) is sent the limit probe alone."""
        from folio import space
        from folio.embed import PROBE_TEXT, EndpointError, Failure
        from folio.failures import TLS_FAILED

        if self.target is None:
            self.server = "down"
            return
        refused = (Failure.TOO_LARGE, Failure.REFUSED, Failure.INVALID)  # what a probe past the limit meets
        if self.server == "unknown":  # the first talk: the space, the limit or the longest record
            client = self.get_client()
            client.dim = None  # another model may answer in another dimension: the fingerprint decides
            # not behind an interrupted run's requests (see embed.py); a live run's are shared at once
            client.wait_until_free(self.on_wait)
            probe = refusal = None
            try:
                # The limit probe, else the longest record to embed, rides along with the fingerprint probe:
                # one round trip (a one-file refresh costs one request).
                probe = limit_probe(client) if self.learn else None
                longest = None if probe else longest
                first = [PROBE_TEXT] + ([probe[0]] if probe else [reader_text(longest)] if longest else [])
                label = f"a probe of {probe[1]} tokens" if probe else longest_label or ""
                try:
                    got = client.embed(first, labels=["the fingerprint probe", label][: len(first)])
                except EndpointError as e:
                    if len(first) == 1 or e.kind not in refused:
                        raise  # about the server (down, busy, slow, another model), not the limit probe
                    refusal = e if probe else None  # the limit probe's refusal names the limit; a record's
                    got = client.embed([PROBE_TEXT])  # is found again by bisecting its batch
                fp = got[0]
            except EndpointError as e:
                # A server the user named must work; the built-in default is only a guess, so anything
                # short of an embeddings server there means "no server" (port 8080 may be anything).
                # Either way every file still enters the lexical plane; only a first build against no
                # server (or the guessed default) is a success: it says how to turn semantic ranking on.
                guessed = self.target.endpoint_source == "default"
                if self.held_vectors or (e.kind != Failure.UNREACHABLE and not guessed):
                    self.down(e, mid_run=False)
                    return
                self.server = "down"
                self.report.lexical_only = True
                self._unreachable(e)
                why = "no embeddings server answers" if e.kind == Failure.UNREACHABLE else \
                    f"what answers is not an embeddings server ({e.server or e.kind})"
                if e.server == TLS_FAILED:  # a server is there: the scheme is what to change, not "start one"
                    self.report.notices.append(f"{e}; built the lexical plane only (queries rank by BM25F) until "
                                               f"`folio index` runs with that URL")
                    return
                from urllib.parse import urlsplit

                try:
                    port = urlsplit(self.target.endpoint).port or 8080
                except ValueError:
                    port = 8080
                self.report.notices.append(
                    f"{why} at {self.target.endpoint}: built the lexical plane only (queries rank by BM25F); "
                    f"to turn semantic ranking on, start an OpenAI-compatible embeddings server (e.g. "
                    f"`llama-server -m MODEL.gguf --embeddings --port {port}`, or `folio config set endpoint URL` "
                    f"for another) and {self.again()}")
                return
            st = self.store
            if st.dim:
                recorded = space.recorded_roles(st.meta)
                if not space.same_space(fp, space.fingerprint(st.meta)):
                    why = space.role_change(recorded, self.target.roles)
                    self.report.notices.append(
                        f"{why} — re-embedding every section" if why else
                        f"the server at {self.target.endpoint} now answers in another vector space than the one this "
                        f"index was built in (another model behind the same name?) — re-embedding every section")
                    st.new_space(len(fp), **space_meta(self.target, fp))
                    self.server = "ok"
                    raise Restart()
                if self.target.roles != recorded:  # same space: the roles in force are recorded for queries
                    st.set_meta(roles=self.target.roles.to_meta())
            else:
                st.new_space(len(fp), **space_meta(self.target, fp))
                self.held_vectors = True
            client.dim = st.dim
            self.server = "ok"
            if longest and len(got) == 2:
                self.ready[longest] = got[1]
            if self.learn:
                self._settle(learned_tokens(probe, refusal), refusal)
        elif self.server == "ok" and self.learn and not self.learned:  # check_space opened it: the limit alone
            client = self.client
            probe = limit_probe(client)
            refusal = None
            if probe is not None:
                try:
                    client.embed([probe[0]], labels=[f"a probe of {probe[1]} tokens"])
                except EndpointError as e:
                    if e.kind not in refused:
                        raise
                    refusal = e
            self._settle(learned_tokens(probe, refusal), refusal)

    # -- a failing server --------------------------------------------------------------------

    def down(self, e, mid_run: bool, committed: int = 0) -> None:
        """The server failed: the rest of this run is lexical. Every file walked still enters the
        lexical plane; its sections wait without vectors for the next run that reaches the server
        (update() turns the failure into the run's exit-1 sentence). A query's refresh of a few
        files has no rest to finish: it fails, and its rows stay marked stale; failing after it had
        embedded, it says that what it committed (`committed` files) stays and the rest waits."""
        if not self.full and not mid_run:
            raise e
        if not self.full:
            kept = (f"the {committed} files committed before that are kept and searchable" if committed else
                    "nothing was committed yet")
            raise FolioError(f"{self.failed_mid_run(e)}; {kept}: {invoke('index')} again once the server "
                             f"answers to embed the rest") from None
        self.server = "down"
        self.failure = Down(e, mid_run)
        self._unreachable(e)

    def _unreachable(self, e) -> None:
        """Nothing listened at the endpoint (connection refused, or no answer to connect), or it was busy
        past the retries: said in the report, so that a watcher looks for the server again (asks it
        again) and embeds what waits once it answers."""
        from folio.failures import TLS_FAILED, Failure, Gone

        kind = getattr(e, "kind", None)
        if (kind == Failure.UNREACHABLE and getattr(e, "gone", None) == Gone.STOPPED
                and getattr(e, "server", "") != TLS_FAILED):  # TLS refused: a server is there, on another scheme
            self.report.unreachable = self.target.endpoint
        elif kind == Failure.BUSY:
            self.report.busy = self.target.endpoint

    def failed_mid_run(self, cause) -> str:
        """What happened when the server failed after it had embedded (`cause`: its EndpointError)."""
        from folio.embed import Failure, Gone

        gone = getattr(cause, "gone", None)
        if cause.kind == Failure.UNREACHABLE and gone == Gone.HUNG:
            what = "it took a request and answered nothing, not even /health: it looks hung; restart it"
        elif cause.kind == Failure.UNREACHABLE and gone == Gone.DROPPED:
            what = "it closed the connection without answering: check its log"
        elif cause.kind == Failure.UNREACHABLE:
            what = "nothing listens there any more (connection refused): it was stopped or crashed; start it again"
        elif cause.server:
            what = f"HTTP {cause.status}: {cause.server}" if cause.status else cause.server
        else:
            what = str(cause)
        return f"the embeddings server at {self.target.endpoint} failed mid-run ({what})"

    def failure_sentence(self, watched: bool = False) -> str | None:
        """The exit-1 sentence of a run whose server failed: what happened, what is kept, what waits.
        `watched`: as a watcher says it, which looks for a server that stopped listening itself."""
        if self.failure is None:
            return None
        e, mid_run = self.failure.error, self.failure.mid_run
        rep = self.report
        if mid_run:
            head = self.failed_mid_run(e)
            kept = (f"the {rep.embedded} sections embedded before that are kept; " if rep.embedded else "")
        else:
            head = getattr(e, "watched", str(e)) if watched else str(e)
            kept = ""
        waits = (f"{_count(rep.waiting, 'section')} in {_count(rep.waiting_files, 'file')} "
                 f"{'wait' if rep.waiting > 1 else 'waits'} for vectors" if rep.waiting else "no section waits for vectors")
        # "once the server answers" only for a server that did not: one that refused (no --embeddings, a
        # wrong path or key, --pooling none) answered, and the sentence before says what to change.
        from folio.embed import Failure

        when = "once the server answers" if mid_run or e.kind == Failure.UNREACHABLE else "once that is fixed"
        back = ("they are embedded once it listens again (the watcher looks for it)" if watched and self.report.unreachable
                else "they are embedded once it answers (the watcher asks it again)" if watched and self.report.busy
                else self.again(when))
        return (f"{head}; {kept}every file is in the lexical plane (queries find it by its words) and "
                f"{waits}: {back}")

    def again(self, when: str = "") -> str:
        """How to run the index again: with the flag's endpoint while the index records none (it records
        the endpoint with its first vectors; a plain `folio index` would go to the settings' own)."""
        t = self.target
        if t is not None and t.endpoint_source == "flag" and not self.store.dim:
            return (f"run `folio index --endpoint {t.endpoint}` again{' ' + when if when else ''} (a flag is not "
                    f"remembered: `folio config set endpoint {t.endpoint}` keeps it)")
        return f"{invoke('index')} again{' ' + when if when else ''}"

    # -- the token limit ---------------------------------------------------------------------

    def _settle(self, new: Tokens, refusal=None) -> None:
        """Record the token limit the server showed. A limit other than the recorded one divides every
        file again (records that did not change keep their vectors); records already planned on the
        recorded limit are planned again (Restart)."""
        if new.limit and new.limit < TOKEN_FLOOR:
            said = f" ({refusal.server})" if refusal is not None and refusal.server else ""
            raise FolioError(f"the server at {self.target.endpoint} takes at most {new.limit} tokens an input{said}; "
                             f"raise its batch size (llama-server: -b N -ub N) or use a model with a longer context")
        old, self.tokens, self.learned = self.tokens, new, True
        self.report.tokens = new.limit
        st = self.store
        if old is not None and old.limit == new.limit:
            if old.source != new.source:
                st.set_meta(**new.meta())
            return
        st.reread_all()
        st.set_meta(**new.meta(), refit=1)
        self.refit = True
        if old is not None:
            self.report.notices.append(f"the server now takes {new.describe()}, where the index recorded "
                                       f"{old.describe()}: every file is divided again (records that did not "
                                       f"change keep their vectors)")
        elif self.older:
            self.report.notices.append(f"the server takes {new.describe()}: every file is divided again, only "
                                       f"records longer than that are divided (an older folio lowered the "
                                       f"budget for the whole corpus instead; records that did not change keep "
                                       f"their vectors)")
        if self.assumed or st.next_slot():
            raise Restart()  # the files this pass chose not to read are divided again too: start it over

    def lower_limit(self, limit: int) -> None:
        """A record was refused for taking more than `limit` tokens, less than the recorded limit:
        record the server's new limit and divide every file again (Restart: the batch under way is
        planned again; what earlier batches committed is re-read)."""
        self.store.reread_all()
        self.store.set_meta(tokens=limit, tokens_from="refusal", refit=1)
        self.report.notices.append(f"the server now takes {Tokens(limit, 'refusal').describe()}, where the "
                                   f"index recorded {self.tokens.describe()}: every file is divided again "
                                   f"(records that did not change keep their vectors)")
        raise Restart()

    def count(self, text: str) -> int:
        """Tokens in what is sent for a record (its reader text), as the server counts them; a text too
        short to reach the limit whatever its tokens is not sent to be counted (its bound is returned).
        0 when the server stopped counting (the record is then sent whole, and divided if refused).
        The document prefix is part of what is sent, so it is counted too."""
        limit, prefix = self._sending()
        got = self._ahead.pop(text, None) if self._ahead_for == (limit, prefix) else None
        if got is None:
            got = self._to_send(text, limit, prefix)
        return got if isinstance(got, int) else self.counts.count(got)

    def count_ahead(self, texts: list[str]) -> None:
        """Start asking the server, `jobs` requests at once in threads, to count those of `texts`
        (records about to be fitted) that count() will send it; count() waits for the answers
        (counting.Counts)."""
        if not self.tokens or not self.tokens.limit or self.target is None or self.target.jobs < 2:
            return
        limit, prefix = self._sending()
        if self._ahead_for != (limit, prefix) or len(self._ahead) > 1 << 12:  # (those never fitted: dropped)
            self._ahead, self._ahead_for = {}, (limit, prefix)
        sent = []
        for text in texts:
            if text not in self._ahead:
                got = self._ahead[text] = self._to_send(text, limit, prefix)
                if isinstance(got, str):
                    sent.append(got)
        self.counts.submit(sent, self.target.jobs)

    def _sending(self) -> tuple[int, str]:
        """(the token limit, 0 when none is known; the document prefix sent before every record)."""
        from folio import space

        roles = self.target.roles if self.target is not None and self.target.roles is not None else \
            space.recorded_roles(self.store.meta)
        return (self.tokens.limit if self.tokens else 0), roles.document.prefix

    def _to_send(self, text: str, limit: int, prefix: str) -> int | str:
        """A bound on `text`'s tokens when it cannot reach `limit` whatever its tokens, else what is
        sent to be counted (the prefix and its reader text, kept in `read` for embedding)."""
        extra = len(prefix.encode("utf-8", "surrogatepass")) + SPECIALS
        # The reader text is the source less its markup, never longer: a short source needs no reading.
        bound = len(text.encode("utf-8", "surrogatepass")) + extra
        if bound <= limit:
            return bound
        read = self.read.get(text)  # (the same text in another file of the batch: read once)
        if read is None:
            if len(self.read) > 1 << 13:  # (those never embedded: dropped; the rest are read again)
                self.read = {}
            read = self.read[text] = reader_text(text)
        bound = len(read.encode("utf-8", "surrogatepass")) + extra
        return bound if bound <= limit else prefix + read

    @property
    def counts(self):
        """The run's token counts (counting.Counts), made on first use."""
        if self._counts is None:
            from folio.counting import Counts

            self._counts = Counts(self.get_client)
        return self._counts


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
