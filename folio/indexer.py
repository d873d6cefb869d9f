"""The incremental update: what changed, what to embed, and the order things are committed in.

Stat first (a file whose size and mtime_ns match its stamp is never opened, except inside the
2-second racy window), hash second, parse third. A section whose text hash is already indexed keeps
its vector; a renamed file keeps its slots; deleted files' records go. Work is committed in batches
at file boundaries, so a killed run keeps what it finished and the next run resumes.
Must not print: progress and notices go through callbacks and the Report.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from folio import timing
from folio.errors import FolioError
from folio.reader import VERSION as TEXT_VERSION
from folio.reader import reader_text
from folio.space import SAME_SPACE, Target, Tokens, encode_fingerprint, learned_tokens, limit_probe
from folio.walk import Entry, read_bytes, walk

RACY_NS = 2_000_000_000
# A record's key: the hash of its source text under the record-text version that embeds it, so
# that a new version gives every record a new key and re-embeds it as its file is read again.
HASH_SALT = TEXT_VERSION + "\n"
REREAD_ALL = "UPDATE files SET sha256 = '', stamped_ns = 0"  # the racy-stamp rule then reads every file
COMMIT_TEXTS = 256  # texts to embed per commit, adapted to the server's pace (see flush)
COMMIT_SECONDS = (1.0, 5.0)  # aim for a commit every 1-5 s of embedding
COMMIT_FILES = 2000  # files per commit when there is little to embed
TOKEN_FLOOR = 32  # a server taking fewer tokens an input than this is refused with the fix
SPECIALS = 8  # special tokens a tokenizer may add: a text of n UTF-8 bytes is at most n + SPECIALS tokens
LEX_PART_CHARS = 4_000_000  # text tokenised into one lexical part at a time


@dataclass
class Report:
    root: str = ""
    files: int = 0
    new: int = 0
    changed: int = 0
    deleted: int = 0
    renamed: int = 0
    restamped: int = 0
    read: int = 0  # files opened (a no-op run opens none)
    unreadable: int = 0  # files the walk listed that could not be read or are not text
    embedded: int = 0
    reused: int = 0
    copied: int = 0
    removed: int = 0
    sections: int = 0
    dead_rows: int = 0
    compacted: int = 0
    budget: int = 0
    tokens: int | None = None  # the most tokens the server takes in one input (0: it counts none for folio)
    lexical_only: bool = False
    waiting: int = 0  # sections left without vectors by a run whose server failed (next run embeds them)
    waiting_files: int = 0
    model: str = ""
    endpoint: str = ""
    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # the run finished but indexed nothing it was given: exit 1 with this
    seconds: float = 0.0


@dataclass
class Progress:
    """What a run has done and has left, handed to the progress display (the indexer never prints).
    `event`: calibrating (asking the server before the first embedding) | file | embedded | lexical."""

    event: str = "file"
    files: int = 0  # files read, of files_total
    files_total: int = 0
    bytes: int = 0  # of those files' bytes
    bytes_total: int = 0
    embedded: int = 0  # sections embedded so far
    planned: int = 0  # sections the files read so far need embedded
    lexical: bool = False  # no server answers: nothing will be embedded
    endpoint: str = ""

    def to_embed(self) -> int:
        """Sections this run embeds: exact once every file is read; until then what the files read
        need, scaled by the bytes left to read (a run reads and embeds as it goes)."""
        if self.bytes <= 0 or self.bytes >= self.bytes_total:
            return self.planned
        return max(self.planned, round(self.planned * self.bytes_total / self.bytes))


class Indexer:
    """One run against one open, locked store."""

    def __init__(self, store, root: Path, target: Target | None, budget: int, report: Report,
                 progress: Callable[[Progress], None] | None = None, renew: bool = False, full: bool = False,
                 down: tuple | None = None,
                 on_wait: Callable[[str], None] | None = None):
        self.store = store
        self.on_wait = on_wait  # says, as it happens, that the run waits (a server draining others' work)
        self.full = full  # a whole-corpus run: a failing server leaves the rest lexical, never unindexed
        self.failure: tuple | None = None  # (EndpointError, mid_run) once the server failed this run
        self.root = root
        self.target = target
        self.budget = budget
        self.report = report
        self.progress = progress
        self.prog = Progress(endpoint=target.endpoint if target else "", lexical=target is None)
        self._prog_lock = None
        self.client = None
        self.server = "unknown"  # unknown | ok | down
        if down is not None:  # the server failed earlier in this run: this pass is lexical from the start
            self.server, self.failure, self.prog.lexical = "down", down, True
        self.held_vectors = store.has_vectors()  # a space recorded before any vector landed holds nothing
        # vectors embedded from another record text (an older folio): re-embedded by a full run
        self.renew = renew and target is not None and bool(store.dim) and store.meta.get("text") != TEXT_VERSION
        self.next_slot = store.next_slot()
        self.batch = None
        self.commit_texts = COMMIT_TEXTS
        self.committed_files = 0
        self.pending_embed: list[tuple[dict, str, str]] = []  # (record, text, label)
        self.ready: dict[str, object] = {}  # text -> vector already fetched (probe/calibration requests)
        # The server's token limit, as recorded; learned (a probe that long) when none is, or while
        # files divided under another limit remain (`refit`: then every record is counted, none is kept
        # for holding a vector). A server that takes less than recorded refuses a record, and _redivide
        # records the new limit and starts the pass again. `assumed`: a record was kept on the recorded
        # limit before the server confirmed it.
        self.tokens = Tokens.recorded(store.meta)
        self.refit = self.tokens is None or bool(store.meta.get("refit"))
        self.learn = self.refit
        self.assumed = False
        self.learned = False
        self._new_batch()

    # -- network ---------------------------------------------------------------------------

    def _client(self):
        """The run's client. Every text it embeds is a document (records, calibration, the fingerprint
        probe): the document role rides on each request. Roles left to the server's model id (the
        model is only called `default`) are resolved here, on the first talk to the server."""
        if self.client is None:
            from folio import space
            from folio.embed import Client

            t = self.target
            self.client = Client(t.endpoint, t.model, api_key=t.api_key, dim=self.store.dim, timeout=t.timeout)
            if t.roles is None:
                t.roles = space.server_roles(self.client.models())
            self.client.role = t.roles.document
        return self.client

    def tick(self, event: str, embedded: int = 0) -> None:
        if self.progress is None:
            return
        if self._prog_lock is None:
            import threading

            self._prog_lock = threading.Lock()
        with self._prog_lock:  # embedding threads report too
            self.prog.event = event
            self.prog.embedded += embedded
            self.progress(self.prog)

    def close(self) -> None:
        if self.client is not None:
            self.report.notices.extend(n for n in self.client.notes if n not in self.report.notices)
            self.client.close()

    def check_space(self) -> None:
        """When the config names another endpoint/model than the index recorded, compare fingerprints."""
        from folio import space

        st, t = self.store, self.target
        if not st.dim or t is None:
            return
        recorded = space.recorded_roles(st.meta)
        roles_change = space.role_change(recorded, t.roles) if t.roles is not None else None
        if (st.meta.get("endpoint"), st.meta.get("model")) == (t.endpoint, t.model) and roles_change is None:
            if t.roles is not None and t.roles != recorded:  # the query role (or where it came from) only
                st.set_meta({"roles": t.roles.to_meta()})
                if t.roles.query != recorded.query:
                    self.report.notices.append(f"queries now use the query role {t.roles.query.describe()} "
                                               f"(was {recorded.query.describe()}); the sections' vectors are kept")
            return
        from folio.embed import PROBE_TEXT, EndpointError
        client = self._client()
        client.dim = None
        try:
            fp = client.embed([PROBE_TEXT])[0]
        except EndpointError as e:
            client.dim = st.dim
            self._down(EndpointError(f"{e} (the index was built by {st.meta.get('model')} at "
                                     f"{st.meta.get('endpoint')}, and its vectors are kept)", e.kind,
                                     status=e.status, server=e.server), mid_run=False)
            return
        roles_change = space.role_change(recorded, t.roles)
        was = f"{st.meta.get('model')} at {st.meta.get('endpoint')}"
        now = f"{t.model} at {t.endpoint}"
        what = (f"the index was built by {was}, and this run uses {now}" if (was != now or roles_change is None)
                else roles_change)
        if was != now and roles_change:
            what += f"; {roles_change}"
        if space.same_space(fp, space.fingerprint(st.meta)):
            st.set_meta({"endpoint": t.endpoint, "model": t.model, "endpoint_source": t.endpoint_source,
                         "roles": t.roles.to_meta()})
            self.report.notices.append(
                f"{what}: the same vector space (fingerprint cosine >= {SAME_SPACE}), so every vector is kept")
            self.server = "ok"
        else:
            self.report.notices.append(f"{what} — re-embedding every section")
            st.new_space(self._space_meta(fp), len(fp))
            self.held_vectors = True
            self.server = "ok"
            self.renew = False
            self.tokens, self.refit, self.learn = None, True, True
        client.dim = st.dim

    def verify_space(self) -> None:
        """A full run that sent the server nothing still asks it for the fingerprint (one short request,
        no httpx or numpy: see folio/fingerprint.py), so a server restarted on another model behind the
        same endpoint and name is caught by `folio index` even when no file changed. Another space:
        every section is embedded again (_Restart). No server listening: nothing to compare, and the
        run stays a quick no-op."""
        from folio import fingerprint, space

        st, t = self.store, self.target
        if t is None or not st.dim or self.server != "unknown":
            return
        recorded = space.recorded_roles(st.meta)  # check_space has recorded any new roles by now
        got = fingerprint.fetch(t.endpoint, t.model, t.api_key, timeout=min(t.timeout, 15.0),
                                role=recorded.document)
        if got.vector is None:
            if not got.unreachable:
                self.report.notices.append(f"the server at {t.endpoint} did not answer the fingerprint probe "
                                           f"({got.reason}), so this run could not check that it still serves "
                                           f"the index's vector space; the index was left as it was")
            return
        if fingerprint.same_space(st.meta.get("fingerprint"), got.vector):
            return
        self.report.notices.append(
            f"the server at {t.endpoint} now answers in another vector space than the one this index was built "
            f"in (another model behind the same name?) — re-embedding every section")
        st.new_space({"endpoint": t.endpoint, "model": t.model, "endpoint_source": t.endpoint_source,
                      "fingerprint": fingerprint.to_hex(got.vector), "text": TEXT_VERSION,
                      "roles": recorded.to_meta(), "tokens": None, "tokens_from": None}, len(got.vector))
        self.held_vectors = True
        raise _Restart()

    def _space_meta(self, fp) -> dict:
        t = self.target
        # another space may be another model: its token limit is learned again
        return {"endpoint": t.endpoint, "model": t.model, "endpoint_source": t.endpoint_source,
                "fingerprint": encode_fingerprint(fp), "text": TEXT_VERSION, "roles": t.roles.to_meta(),
                "tokens": None, "tokens_from": None}

    def renew_text(self) -> None:
        """The index's vectors were embedded from another record text than this folio sends (see
        folio/reader.py): once the server answers, read every file again. Its records get new keys
        (HASH_SALT) and are embedded again, file by file; until then the older vectors (same space)
        keep answering, and a killed run leaves them in place. update() records the version when the
        run completes. With no server, nothing changes and the next full run tries again."""
        from folio.embed import PROBE_TEXT, EndpointError

        client = self._client()
        client.dim = None
        try:
            client.embed([PROBE_TEXT])  # only whether it answers: _open_server checks the space
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
        with self.store.transaction() as c:
            c.execute(REREAD_ALL)

    def _open_server(self, longest: str | None = None, longest_label: str | None = None) -> None:
        """First embedding of the run: probe the space, and learn how many tokens the server takes in
        one input (when the index recorded none, or a new one is being settled)."""
        from folio import space
        from folio.embed import PROBE_TEXT, EndpointError, Failure

        if self.target is None:
            self.server = "down"
            return
        self.tick("calibrating")
        client = self._client()
        client.dim = None  # another model may answer in another dimension: the fingerprint decides
        client.wait_until_free(self.on_wait)  # not behind an interrupted run's requests: see embed.py
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
                if len(first) == 1 or e.kind not in (Failure.TOO_LARGE, Failure.REFUSED, Failure.INVALID):
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
                self._down(e, mid_run=False)
                return
            self.server = "down"
            self.report.lexical_only = True
            self.prog.lexical = True
            self.tick("lexical")
            why = "no embeddings server answers" if e.kind == Failure.UNREACHABLE else \
                f"what answers is not an embeddings server ({e.server or e.kind})"
            self.report.notices.append(
                f"{why} at {self.target.endpoint}: built the lexical plane only (queries rank by BM25F); "
                f"to turn semantic ranking on, start an OpenAI-compatible embeddings server (e.g. "
                f"`llama-server -m MODEL.gguf --embeddings --port 8080`, or `folio config set endpoint URL` "
                f"for another) and run `folio index` again")
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
                st.new_space(self._space_meta(fp), len(fp))
                self.server = "ok"
                raise _Restart()
            if self.target.roles != recorded:  # same space: the roles in force are recorded for queries
                st.set_meta({"roles": self.target.roles.to_meta()})
        else:
            st.new_space(self._space_meta(fp), len(fp))
            self.held_vectors = True
        client.dim = st.dim
        self.server = "ok"
        if longest and len(got) == 2:
            self.ready[longest] = got[1]
        if self.learn:
            self._settle(learned_tokens(probe, refusal), refusal)

    def _down(self, e, mid_run: bool) -> None:
        """The server failed: the rest of this run is lexical. Every file walked still enters the
        lexical plane; its sections wait without vectors for the next run that reaches the server
        (update() turns the failure into the run's exit-1 sentence). A query's refresh of a few
        files has no rest to finish: it fails as before, and its rows stay marked stale."""
        if not self.full:
            raise e
        self.server = "down"
        self.failure = (e, mid_run)
        self.pending_embed = []
        self.prog.lexical = True
        self.tick("lexical")
        if self.at_risk:  # committing this batch lexically would drop older vectors of unchanged files
            raise _Restart()

    def _learn_alone(self) -> None:
        """The limit probe on its own (the space was checked without it)."""
        from folio.embed import EndpointError, Failure

        client = self._client()
        probe = limit_probe(client)
        refusal = None
        if probe is not None:
            try:
                client.embed([probe[0]], labels=[f"a probe of {probe[1]} tokens"])
            except EndpointError as e:
                if e.kind not in (Failure.TOO_LARGE, Failure.REFUSED, Failure.INVALID):
                    raise
                refusal = e
        self._settle(learned_tokens(probe, refusal), refusal)

    def _settle(self, new: Tokens, refusal=None) -> None:
        """Record the token limit the server showed. A limit other than the recorded one divides every
        file again (records that did not change keep their vectors); records already planned on the
        recorded limit are planned again (_Restart)."""
        if new.limit and new.limit < TOKEN_FLOOR:
            said = f" ({refusal.server})" if refusal is not None and refusal.server else ""
            raise FolioError(f"the server at {self.target.endpoint} takes at most {new.limit} tokens an input{said}; "
                             f"raise its batch size (llama-server: -b N -ub N) or use a model with a longer context")
        old, self.tokens, self.learned = self.tokens, new, True
        self.report.tokens = new.limit
        st = self.store
        if old is not None and old.limit == new.limit:
            if old.source != new.source:
                st.set_meta(new.meta())
            return
        with st.transaction() as c:
            c.execute(REREAD_ALL)
        st.set_meta({**new.meta(), "refit": 1})
        self.refit = True
        if old is not None:
            self.report.notices.append(f"the server now takes {new.describe()}, where the index recorded "
                                       f"{old.describe()}: every file is divided again (records that did not "
                                       f"change keep their vectors)")
        elif st.next_slot():
            self.report.notices.append(f"the server takes {new.describe()}: every file is divided again, only "
                                       f"records longer than that are divided (an older folio lowered the "
                                       f"budget for the whole corpus instead; records that did not change keep "
                                       f"their vectors)")
        if self.assumed or st.next_slot():
            raise _Restart()  # the files this pass chose not to read are divided again too: start it over

    def _embed(self, texts: list[str], labels: list[str]) -> tuple[list, list[tuple[int, object]]]:
        """Vectors for texts (None where a text had to be re-divided); plus (index, error) refusals."""
        client = self._client()
        out: list = [None] * len(texts)
        refused: list = []
        size = self.target.batch_size
        sent = [reader_text(t) for t in texts]
        chunks = [(i, sent[i:i + size], labels[i:i + size]) for i in range(0, len(sent), size)]

        def run(chunk):
            start, part, labs = chunk
            got = self._embed_chunk(client, part, labs)
            self.tick("embedded", len(part))
            return start, got

        if self.target.jobs > 1 and len(chunks) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(self.target.jobs) as pool:
                results = list(pool.map(run, chunks))
        else:
            results = [run(c) for c in chunks]
        for start, (vecs, errs) in results:
            for j, v in enumerate(vecs):
                out[start + j] = v
            refused.extend((start + j, err) for j, err in errs)
        return out, refused

    def _embed_chunk(self, client, texts, labels, top: bool = True):
        """Embed a request. When the server refuses it or answers it unusably, find the input at fault by
        bisecting instead of aborting the run — unless the server fails the fixed fingerprint probe
        alike, or fails every input, in which case the server is failing and the run stops."""
        from folio.embed import PROBE_TEXT, EndpointError, Failure

        try:
            mat = client.embed(texts, labels=labels, retry_errors=top)  # halves: the probe showed the server works
            return list(mat), []
        except EndpointError as e:
            if e.kind == Failure.TOO_MANY and len(texts) > 1:
                self.target.batch_size = max(1, len(texts) // 2)
            elif e.kind == Failure.TOO_LARGE:
                pass
            elif e.kind in (Failure.REFUSED, Failure.INVALID) and e.status not in (401, 403, 404):
                if top:
                    try:
                        client.embed([PROBE_TEXT])
                    except EndpointError as dead:
                        raise _ServerFailed(dead) from None
            else:
                raise
            if len(texts) == 1:
                return [None], [(0, e)]
            mid = len(texts) // 2
            a, ea = self._embed_chunk(client, texts[:mid], labels[:mid], top=False)
            b, eb = self._embed_chunk(client, texts[mid:], labels[mid:], top=False)
            if top and e.kind != Failure.TOO_LARGE and len(ea) + len(eb) == len(texts):
                raise _ServerFailed(e) from None  # every input fails alike: the server, not one section
            return a + b, ea + [(mid + j, err) for j, err in eb]

    # -- batches -----------------------------------------------------------------------------

    def _new_batch(self) -> None:
        from folio.store import Batch

        self.batch = Batch.empty(self.next_slot)
        self.lex_docs: list[tuple] = []
        self.lex_chars = 0
        self.lex_parts: list[dict] = []
        self.pending_embed = []
        self.at_risk = False  # the batch holds a file re-read only to be re-embedded, whose vectors it replaces

    def _lex(self, doc: tuple) -> None:
        """Queue one lexical document. Tokenising holds ~30 bytes per byte of text, so a batch whose
        text outgrows LEX_PART_CHARS (one huge file) is tokenised in parts, merged at commit."""
        self.lex_docs.append(doc)
        self.lex_chars += len(doc[1])
        if self.lex_chars >= LEX_PART_CHARS:
            from folio import lexical

            self.lex_parts.append(lexical.build_segment(self.lex_docs))
            self.lex_docs, self.lex_chars = [], 0

    def _alloc(self) -> int:
        s = self.next_slot
        self.next_slot += 1
        self.batch.high_water = self.next_slot
        return s

    def flush(self, final: bool = False) -> None:
        """Embed what the batch needs, then commit it."""
        if self.pending_embed and self.server == "unknown":
            longest = max(self.pending_embed, key=lambda p: len(p[1]))
            self._open_server(longest[1], longest[2])
        timing.lap("plan")
        if self.pending_embed and self.server == "ok":
            # httpx and numpy: only when there is something to embed
            from folio.embed import EndpointError

            t0 = time.perf_counter()
            try:
                self._embed_pending()
            except (EndpointError, _ServerFailed) as e:
                if not self.full:
                    raise self._died(e) from None
                self._down(e.error if isinstance(e, _ServerFailed) else e, mid_run=True)
            # A slow server commits smaller batches (a kill loses less), a fast one larger (fewer fsyncs).
            took = time.perf_counter() - t0
            if took > COMMIT_SECONDS[1]:
                self.commit_texts = max(16, self.commit_texts // 2)
            elif took < COMMIT_SECONDS[0]:
                self.commit_texts = min(4096, self.commit_texts * 2)
        if self.pending_embed and self.server == "down":
            self.pending_embed = []  # lexical only: records stay vec=0
        timing.lap("embed")
        if self.server == "unknown" and self.held_vectors and not final:
            return  # hold non-embedding work until the server is known good (or the run ends)
        if self.lex_docs:
            from folio import lexical

            self.lex_parts.append(lexical.build_segment(self.lex_docs))
            self.lex_docs, self.lex_chars = [], 0
        if len(self.lex_parts) == 1:
            self.batch.segment = self.lex_parts[0]
        elif self.lex_parts:
            import numpy as np

            from folio import lexical

            top = max((int(p["doc_slots"].max()) for p in self.lex_parts if len(p["doc_slots"])), default=-1) + 1
            self.batch.segment = lexical.merge_segments(self.lex_parts, np.ones(top, dtype=bool))
        self.lex_parts = []
        timing.lap("lexical")
        if final and self.full and self.store.meta.get("unfinished"):
            self.batch.meta["unfinished"] = None  # the walk reached its end: every file is in the index
        if self.batch:
            self.batch.meta["budget"] = self.budget
            self.store.commit(self.batch)
            self.committed_files += len(self.batch.files)
        timing.lap("commit")
        self._new_batch()

    def failure_sentence(self) -> str | None:
        """The exit-1 sentence of a run whose server failed: what happened, what is kept, what waits."""
        if self.failure is None:
            return None
        e, mid_run = self.failure
        rep = self.report
        if mid_run:
            head = self._died(e, detail_only=True)
            kept = (f"the {rep.embedded} sections embedded before that are kept; " if rep.embedded else "")
        else:
            head = str(e)
            kept = ""
        if e.status in (401, 403) and self.target.key_withheld:
            head += f"; your API key was {self.target.key_withheld}"
        waits = (f"{_count(rep.waiting, 'section')} in {_count(rep.waiting_files, 'file')} "
                 f"{'wait' if rep.waiting > 1 else 'waits'} for vectors" if rep.waiting else "no section waits for vectors")
        return (f"{head}; {kept}every file is in the lexical plane (queries find it by its words) and "
                f"{waits}: run `folio index` again once the server answers")

    def _died(self, e, detail_only: bool = False):
        """The server failed mid-run: what was committed stays, the rest waits for the next run."""
        from folio.embed import Failure, Gone

        cause = e.error if isinstance(e, _ServerFailed) else e
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
        if detail_only:
            return f"the embeddings server at {self.target.endpoint} failed mid-run ({what})"
        kept = (f"the {self.committed_files} files committed before that are kept and searchable"
                if self.committed_files else "nothing was committed yet")
        return FolioError(
            f"the embeddings server at {self.target.endpoint} failed mid-run ({what}); {kept}: run "
            f"`folio index` again once the server answers to embed the rest")

    def _embed_pending(self) -> None:
        dedup: dict[str, int] = {}
        texts, labels, owners = [], [], []
        for rec, text, label in self.pending_embed:
            h = rec["text_hash"]
            if h in dedup:
                owners[dedup[h]].append(rec)
                continue
            dedup[h] = len(texts)
            texts.append(text)
            labels.append(label)
            owners.append([rec])
        need = [i for i, t in enumerate(texts) if t not in self.ready]
        got, refused = self._embed([texts[i] for i in need], [labels[i] for i in need]) if need else ([], [])
        vecs = [self.ready.pop(t, None) for t in texts]
        for i, v in zip(need, got, strict=True):
            vecs[i] = v
        refused = [(need[j], err) for j, err in refused]
        redo = []
        for idx, err in refused:
            for rec in owners[idx]:
                redo.append((rec, texts[idx], labels[idx], err))
        for i, v in enumerate(vecs):
            if v is None:
                continue
            for rec in owners[i]:
                self.batch.vectors[rec["slot"]] = v
                rec["vec"] = True
                self.report.embedded += 1
        self.pending_embed = []
        for rec, text, label, err in redo:
            self._redivide(rec, text, label, err)

    def _redivide(self, rec: dict, text: str, label: str, err) -> None:
        """A record the server refused: divide that record alone (by the server's token counts when it
        names its limit and counts tokens, else by its characters) and embed the pieces. Nothing else
        changes: no other record is divided for it."""
        from folio import sections as sec
        from folio.embed import Failure

        if err.kind != Failure.TOO_LARGE:
            why = f"the server refused it ({err.server})" if err.server else str(err)
            self.report.warnings.append(f"{label}: not embedded, {why}; it stays searchable lexically and the "
                                        f"next `folio index` tries it again")
            return
        whole = sec.Section(rec["start"], rec["end"], rec["level"], rec["heading"], tuple(rec["trail"]), text,
                            rec["truncated"])
        limit = err.limit if err.tokens and err.limit and err.tokens > err.limit else None
        if limit is not None and limit < TOKEN_FLOOR:
            raise FolioError(f"the server refuses even {len(text)}-character inputs ({err.server}); raise its batch "
                             f"size (llama-server: -b N -ub N) or use a model with a longer context") from None
        pieces = [whole]
        if limit is not None and self.tokens and self.tokens.limit:
            if limit < self.tokens.limit:  # the server takes less than recorded: every file is divided again
                with self.store.transaction() as c:
                    c.execute(REREAD_ALL)
                self.store.set_meta({"tokens": limit, "tokens_from": "refusal", "refit": 1})
                self.report.notices.append(f"the server now takes {Tokens(limit, 'refusal').describe()}, where the "
                                           f"index recorded {self.tokens.describe()}: every file is divided again "
                                           f"(records that did not change keep their vectors)")
                raise _Restart()  # this batch is planned again; what earlier batches committed is re-read
            pieces = sec.divide_to_tokens(whole, limit, self._count)
        if len(pieces) == 1:  # no counts (or counts the server disagrees with): by its characters
            at = int(len(text) * limit / err.tokens * sec.TOKEN_MARGIN) if limit else len(text) // 2
            pieces = sec.divide(whole, max(1, min(at, len(text) - 1)))
        if len(pieces) == 1 and pieces[0].text == text:
            self.report.warnings.append(f"{label}: not embedded, the server refused it ({err.server}) and it "
                                        f"cannot be divided; it stays searchable lexically")
            return
        planned = self._split(rec, pieces)
        # Say what folio did, not what the server advises: its refusal ("increase the physical batch
        # size") reads like an order, though nothing is left to do; `folio doctor` gives that advice.
        said = (f"{err.tokens} tokens where the server takes {err.limit}" if err.tokens and err.limit
                else "too long for the server")
        self.report.notices.append(f"{label} was {said}: folio divided it into {len(planned)} records "
                                   f"(nothing to do; `folio doctor` says how to raise the server's limit)")
        self.pending_embed.extend(planned)
        self._embed_pending()

    def _split(self, rec: dict, pieces: list) -> list[tuple[dict, str, str]]:
        """Replace a pending record by the consecutive records `pieces` (sections.Section)."""
        from folio import sections as sec

        self.batch.records.remove(rec)
        self.batch.delete_slots.append(rec["slot"])
        out = []
        for p in pieces:
            r = dict(rec, slot=self._alloc(), start=p.start, end=p.end, truncated=p.truncated or rec["truncated"],
                     text_hash=sec.text_hash(HASH_SALT + p.text), vec=False)
            self.batch.records.append(r)
            self._lex((r["slot"], p.text, p.heading, rec["_title"], rec["_path"], " ".join(p.trail[:-1])))
            out.append((r, p.text, f"{rec['_path']}:{p.start}-{p.end}"))
        return out

    def _count(self, text: str) -> int:
        """Tokens in what is sent for a record (its reader text), as the server counts them; a text too
        short to reach the limit whatever its tokens is not sent to be counted (its bound is returned).
        0 when the server stopped counting (the record is then sent whole, and divided if refused).
        The document prefix is part of what is sent, so it is counted too."""
        from folio import space

        roles = self.target.roles if self.target is not None and self.target.roles is not None else \
            space.recorded_roles(self.store.meta)
        sent = roles.document.prefix + reader_text(text)
        bound = len(sent.encode("utf-8", "surrogatepass")) + SPECIALS
        if self.tokens and bound <= self.tokens.limit:
            return bound
        return self._client().count_tokens(sent) or 0

    def _fit(self, records, old_rows) -> list:
        """The records to plan for one file: each record over the server's token limit divided by
        its counts (sections.divide_to_tokens), every other one whole. A record that already holds a
        vector passed this same limit, so it is kept uncounted (unless the limit changed since:
        `refit`). A file's records thus depend on its text, the budget and the server's limit only."""
        from folio import sections as sec
        from folio.embed import EndpointError

        if self.target is None or self.server == "down" or not records:
            return list(records)
        known: set = set()
        if not self.refit and self.store.dim:
            hashes = [sec.text_hash(HASH_SALT + s.text) for s in records]
            known = {r.text_hash for r in old_rows if r.vec} | set(self.store.slots_with_vectors(hashes))
        out = []
        for i, s in enumerate(records):
            if known and sec.text_hash(HASH_SALT + s.text) in known:
                out.append(s)
                self.assumed |= self.server != "ok"
                continue
            if self.learn and not self.learned:  # no limit recorded, or a new one to settle: ask first
                bound = len(reader_text(s.text).encode("utf-8", "surrogatepass")) + SPECIALS
                if self.tokens is not None and self.server != "ok" and (not self.tokens.limit or
                                                                        bound <= self.tokens.limit):
                    out.append(s)  # on the recorded limit: _settle plans it again if the server differs
                    self.assumed = True
                    continue
                if self.server == "unknown":
                    self._open_server()
                elif self.server == "ok":
                    self._learn_alone()  # the server was opened by check_space
                if self.server != "ok":  # no server: lexical only, records as the budget divides them
                    return out + list(records[i:])
            if self.server == "down" or not self.tokens.limit:
                out.append(s)
                continue
            try:
                out.extend(sec.divide_to_tokens(s, self.tokens.limit, self._count))
            except EndpointError as e:
                if self.server != "ok":
                    # counting before the space was checked: the server is not there, and the first
                    # request (flush) says so as it would have; until then the record stays as it is
                    out.append(s)
                    continue
                if not self.full:
                    raise self._died(e) from None
                self._down(e, mid_run=True)  # the rest of the run is lexical: these records wait for vectors
                return out + list(records[i:])
        return out

    # -- files -------------------------------------------------------------------------------

    def add_file(self, entry: Entry, raw: bytes, sha: str, old_id: int | None, old_rows: list,
                 parsed: tuple | None = None) -> None:
        """Re-split one file and plan its records: reuse slots by text hash, copy or embed the rest.
        `parsed`: parse_bytes(raw, budget) done ahead in a worker (used when its budget still holds)."""
        from folio import sections as sec  # markdown-it and yaml: only when a file is read

        timing.lap("plan")
        if parsed is None or parsed[0] != self.budget:
            parsed = parse_bytes(raw, self.budget)
        timing.lap("parse")
        _budget, binary, warn, doc = parsed
        if binary:  # stamped with no sections: not read again until it changes, old sections go
            self.report.warnings.append(f"{entry.path}: {binary}")
            self.report.unreadable += 1
            doc = sec.Document({}, "", (), ())
        else:
            for w in ([warn] if warn else []) + list(doc.warnings):
                self.report.warnings.append(f"{entry.path}: {w}")
        fobj = {"id": old_id, "path": entry.path, "size": entry.size, "mtime_ns": entry.mtime_ns, "sha256": sha,
                "stamped_ns": time.time_ns(), "frontmatter": doc.frontmatter, "title": doc.title}
        self.batch.files.append(fobj)
        by_hash = defaultdict(list)
        for r in old_rows:
            by_hash[r.text_hash].append(r)
        records = self._fit(doc.records, old_rows)
        hashes = [sec.text_hash(HASH_SALT + s.text) for s in records]
        # one lookup per file for the sections another record already holds a vector for
        have = self.store.slots_with_vectors(hashes) if self.store.dim else {}
        copies: list[tuple[dict, int]] = []
        lines = None
        kept = set()
        for s, h in zip(records, hashes, strict=True):
            rec = {"file": fobj, "start": s.start, "end": s.end, "level": s.level, "heading": s.heading,
                   "trail": s.trail, "truncated": s.truncated, "text_hash": h, "vec": False,
                   "_path": entry.path, "_title": doc.title}
            label = f"{entry.path}:{s.start}-{s.end}"
            if by_hash.get(h):
                old = by_hash[h].pop(0)
                rec["slot"] = old.slot
                kept.add(old.slot)
                if old.vec:
                    rec["vec"] = True
                    self.report.reused += 1
                else:
                    self._want_vector(rec, s.text, label)
            else:
                rec["slot"] = self._alloc()
                src = have.get(h)
                if src is not None:
                    copies.append((rec, src))
                    rec["vec"] = True
                    self.report.copied += 1
                else:
                    self._want_vector(rec, s.text, label)
            self.batch.records.append(rec)
            body = s.text
            if s.truncated:
                if lines is None:
                    lines = sec.decode(raw)[0].split("\n")
                body = "\n".join(lines[s.start - 1:s.end])
            self._lex((rec["slot"], body, s.heading, doc.title, entry.path, " ".join(s.trail[:-1])))
        if copies:
            for (rec, _src), vec in zip(copies, self.store.read_vectors([src for _rec, src in copies]), strict=True):
                self.batch.vectors[rec["slot"]] = vec
        for r in old_rows:
            if r.slot not in kept:
                self.batch.delete_slots.append(r.slot)
                self.report.removed += 1
        self.report.sections += len(records)
        timing.lap("plan")
        if len(self.pending_embed) >= self.commit_texts or len(self.batch.files) >= COMMIT_FILES:
            self.flush()

    def _want_vector(self, rec: dict, text: str, label: str) -> None:
        """Queue a record for embedding; with no server (lexical only) there is nothing to queue, and
        batches then close at COMMIT_FILES: a handful of big lexical segments, not one per 256 texts."""
        if self.server != "down":
            self.pending_embed.append((rec, text, label))
            self.prog.planned += 1

    def delete_file(self, file_id: int) -> None:
        rows = self.store.file_rows(file_id)
        self.report.removed += len(rows)
        self.batch.delete_files.append(file_id)

    def restamp(self, stamp, entry: Entry) -> None:
        self.batch.restamps.append((entry.size, entry.mtime_ns, time.time_ns(), stamp.id))
        self.report.restamped += 1
        if len(self.batch.restamps) >= 50_000:
            self.flush()


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class _ServerFailed(Exception):
    """The server could not embed even the fixed probe text: it is failing, not refusing an input."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def parse_bytes(raw: bytes, budget: int) -> tuple:
    """(budget, why the bytes are not text or None, decoding warning, Document): the part of
    add_file that needs no index, so worker processes can run it ahead of the loop."""
    from folio import sections as sec

    binary = sec.binary_reason(raw)
    if binary:
        return budget, binary, None, None
    text, warn = sec.decode(raw)
    return budget, None, warn, sec.parse_document(text, budget)


PARSE_AHEAD_BYTES = 8 << 20  # worker processes parse when at least this much is left to read
PARSE_WINDOW = 16  # files read ahead per worker


def _parse_workers() -> int:
    """How many processes parse ahead: FOLIO_PARSE_WORKERS when set (0: none), else one per core
    (up to 4) on a machine with more than one."""
    import os

    env = os.environ.get("FOLIO_PARSE_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores, 4) if cores > 1 else 0


def _worker_init(parent: int) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle, once
    _die_with_parent(parent)


def _die_with_parent(parent: int) -> None:
    """A parse worker must not outlive its run. A run killed outright (kill -9, SIGTERM) never shuts
    its pool down, and a worker waiting on the pool's queue would wait forever: it holds the queue's
    write end itself, so the pipe never reports the parent gone. On Linux the kernel kills the worker
    with its parent (PR_SET_PDEATHSIG); everywhere, a daemon thread notices the parent is gone (the
    worker is handed to another parent) within a quarter of a second and ends the process."""
    import os
    import sys
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # the thread below still ends it
    if os.getppid() != parent:  # died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="folio-parent-watch", daemon=True).start()


def _read_ahead(root: Path, todo: list[Entry], wants_parse, budget):
    """(entry, bytes or the OSError reading them, sha, parsed or None) per file of `todo`, in order.

    Reads a window of files ahead; a file `wants_parse(entry, sha)` is parsed in a worker process
    meanwhile (parse_bytes at `budget()`), once enough bytes are left to read to repay starting the
    workers: the main process then only plans, embeds and commits. A failing pool falls back to
    parsing in the loop (parsed None)."""
    import os
    from collections import deque

    workers = _parse_workers()
    explicit = "FOLIO_PARSE_WORKERS" in os.environ
    left = sum(e.size for e in todo)
    pool = None
    window: deque = deque()
    it = iter(todo)
    try:
        while True:
            while len(window) < max(1, workers) * PARSE_WINDOW:
                e = next(it, None)
                if e is None:
                    break
                left -= e.size
                try:
                    raw = read_bytes(root, e.path)
                except OSError as err:
                    window.append((e, err, None, None))
                    continue
                sha = _sha(raw)
                job = None
                if workers and wants_parse(e, sha):
                    if pool is None and (explicit or left + len(raw) >= PARSE_AHEAD_BYTES):
                        pool = _pool(workers)
                    if pool is not None:
                        try:
                            job = pool.submit(parse_bytes, raw, budget())
                        except Exception:  # noqa: BLE001 - a broken pool: parse in the loop instead
                            workers, job = 0, None
                window.append((e, raw, sha, job))
            if not window:
                return
            e, raw, sha, job = window.popleft()
            parsed = None
            if job is not None:
                try:
                    parsed = job.result()
                except Exception:  # noqa: BLE001 - a worker died: this file is parsed in the loop
                    parsed = None
            yield e, raw, sha, parsed
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _pool(workers: int):
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    # spawn: never fork a process that may hold threads, and the workers stay this process's
    # children, so their CPU time counts in its rusage (what `time folio index` shows)
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                               initargs=(os.getpid(),))


class _Restart(Exception):
    """The vector space changed under a running index: start the file pass again."""


def _sha(raw: bytes) -> str:
    import hashlib  # here: loading OpenSSL is a few ms a no-op re-index never needs

    return hashlib.sha256(raw).hexdigest()


def update(store, root: Path, target: Target | None, *, budget: int, entries: list[Entry] | None = None,
           only: list[str] | None = None, progress=None, report: Report | None = None, on_wait=None) -> Report:
    """Bring the store up to date with the files under root (or only the paths in `only`)."""
    report = report or Report(root=str(root))
    warned = len(report.warnings)
    down = None  # the failure that ended an earlier pass of this run (see Indexer._down)
    for _attempt in range(3):
        del report.warnings[warned:]
        ix = Indexer(store, root, target, budget, report, progress, renew=only is None, full=only is None,
                     on_wait=on_wait, down=down)
        try:
            if only is None and down is None:
                ix.check_space()
            if ix.renew and down is None:
                ix.renew_text()
            _pass(ix, store, root, entries, only, report)
            if ix.renew and ix.failure is None:
                store.set_meta({"text": TEXT_VERSION})
            if only is None and ix.learned and ix.failure is None and store.meta.get("refit"):
                store.set_meta({"refit": None})  # every file was divided under the recorded limit
            report.budget = ix.budget
            report.tokens = ix.tokens.limit if ix.tokens else None
            if ix.failure is not None:
                report.waiting, report.waiting_files = store.pending_counts()
                report.error = ix.failure_sentence()
            return report
        except _Restart:  # nothing of the first pass was committed: the second one counts it all again
            down = ix.failure if ix.server == "down" else down
            report.embedded = report.reused = report.copied = report.removed = report.sections = 0
            report.read = report.new = report.changed = report.deleted = report.renamed = report.restamped = 0
            report.unreadable = 0
            continue
        finally:
            ix.close()
    raise FolioError("the embeddings server changed its vector space twice during one run; run `folio index` again")


def _pass(ix: Indexer, store, root: Path, entries, only, report: Report) -> None:
    timing.lap("open")
    if only is not None:
        from folio.walk import stat_file

        scope = sorted(set(only))
        entries = []
        for p in scope:
            st = stat_file(root, p)
            if st is not None:
                entries.append(Entry(p, st[0], st[1]))
    else:
        scope = None
    report.files = len(entries) if only is None else report.files
    pending = store.pending_file_ids() if ix.target is not None else set()
    if scope is not None and pending:  # a query's refresh: files elsewhere waiting for vectors are not its business
        pending &= {s.id for s in store.stamps_for(scope).values()}
    if pending and ix.server == "unknown":
        ix._open_server()  # files wait for vectors: only worth reading when a server answers
        if ix.server == "down":
            pending = set()
    # The stat prefilter: a listed (path, size, mtime_ns) that the index holds, stamped well after that
    # mtime (a stamp taken within RACY_NS of it may predate a second write in the same tick) and not
    # waiting for vectors, is unchanged. The rest is read.
    clean, held = store.clean_stamps(RACY_NS, scope, pending)
    if scope is not None:  # a query names the files whose bytes it found changed, stat or no stat: read them
        clean = set()
    todo = [] if clean.issuperset(entries) else [e for e in entries if e not in clean]
    # Full stamps (with the content hash) only for the files that will be read or have gone.
    stamps = store.stamps_for([e.path for e in todo])
    if len(entries) - len(todo) + len(stamps) == held:
        gone_paths = []  # every file the index holds was listed
    else:
        present = {e.path for e in entries}
        gone_paths = [p for p in store.paths_held(scope) if p not in present]
        stamps.update(store.stamps_for(gone_paths))
    gone = [stamps[p] for p in gone_paths]
    if only is None and (todo or gone_paths) and store.meta.get("unfinished") != str(len(entries)):
        # Until the final commit clears it, a query says the index may lack some of these files.
        store.set_meta({"unfinished": len(entries)})
    # Renames: a new path whose bytes equal a vanished file's keeps that file's slots.
    gone_by_sha: dict[str, list] = defaultdict(list)
    for s in gone:
        gone_by_sha[s.sha256].append(s)
    moved_ids = set()
    ix.prog.files_total, ix.prog.bytes_total = len(todo), sum(e.size for e in todo)
    timing.lap("stamps")
    def wants_parse(e: Entry, sha: str) -> bool:
        s = stamps.get(e.path)
        return s is None or s.sha256 != sha or s.id in pending

    ahead = _read_ahead(root, todo, wants_parse, lambda: ix.budget)
    try:
        for n, (e, raw, sha, parsed) in enumerate(ahead, 1):
            s = stamps.get(e.path)
            if isinstance(raw, FileNotFoundError):
                # Gone between the walk and the read: what was indexed from it goes too.
                report.warnings.append(f"{e.path}: vanished while indexing; "
                                       + ("its sections were dropped" if s is not None else "skipped"))
                if s is not None:
                    report.deleted += 1
                    ix.delete_file(s.id)
                continue
            if isinstance(raw, OSError):
                kept = "; its previous sections are kept" if s is not None else ""
                report.warnings.append(f"{e.path}: could not be read ({raw.strerror or raw}); skipped{kept}")
                report.unreadable += 1
                continue
            report.read += 1
            timing.lap("read")
            if len(raw) != e.size:  # changed between stat and read: stamp what was read
                e = Entry(e.path, len(raw), e.mtime_ns)
            if s is not None and s.sha256 == sha and s.id not in pending:
                ix.restamp(s, e)
            elif s is not None and not s.sha256 and (s.size, s.mtime_ns) == (e.size, e.mtime_ns) and any(
                    r.vec for r in store.file_rows(s.id)):
                # Read again only to be divided or embedded anew (REREAD_ALL: a new record text, budget
                # or token limit). With no server to embed it, its older vectors keep answering and it
                # stays due for the next run that reaches the server; while one answers, a failure in
                # this batch starts the pass over without it (_down).
                if ix.server == "down":
                    continue
                ix.at_risk = True
                ix.add_file(e, raw, sha, s.id, store.file_rows(s.id), parsed)
            elif s is None and gone_by_sha.get(sha):
                old = gone_by_sha[sha].pop(0)
                moved_ids.add(old.id)
                report.renamed += 1
                ix.add_file(e, raw, sha, old.id, store.file_rows(old.id), parsed)
            else:
                if s is None:
                    report.new += 1
                elif s.sha256 and s.sha256 != sha:  # an empty sha: read again by REREAD_ALL, not changed
                    report.changed += 1
                ix.add_file(e, raw, sha, s.id if s else None, store.file_rows(s.id) if s else [], parsed)
            ix.prog.files, ix.prog.bytes = n, ix.prog.bytes + e.size
            ix.tick("file")
    finally:
        ahead.close()  # stops the workers now, even when the loop ends in an error
    for s in gone:
        if s.id not in moved_ids:
            report.deleted += 1
            ix.delete_file(s.id)
    if only is None and not ix.pending_embed:
        ix.verify_space()  # nothing was sent to the server: still check it serves the index's space
    ix.flush(final=True)


def run(root: Path, settings, *, rebuild: bool = False, wait: bool = True, on_wait=None, progress=None,
        budget_flag: int | None = None, keep_space: bool = False) -> Report:
    """`folio index`: walk, update, merge this run's lexical segments, compact when worth it.
    keep_space: embed with the endpoint and model the index recorded, whatever the settings name
    now (`folio mcp`'s index tool: an agent's update never moves an index to another space)."""
    from folio import space
    from folio import store as storemod

    t0 = time.perf_counter()
    report = Report(root=str(root))
    try:
        lock = storemod.acquire_lock(root, wait=wait, on_wait=on_wait)
    except storemod.LockBusy as e:
        raise FolioError(f"{e}; it leaves the index at least as fresh as this run would: run `folio index` "
                         f"again after it finishes, or without --no-wait to wait for it") from None
    try:
        if rebuild:
            storemod.remove_index(root)  # under the lock: start from nothing
        st = storemod.Store.open(root, write=True)
    except BaseException:
        lock.release()
        raise
    st.hold(lock)
    try:
        st.reload_meta()
        st.recover()
        st.check()  # a damaged index is refused with the fix, never built upon
        st.forget_credentials()
        if keep_space and st.meta.get("endpoint"):
            target, decision = space.recorded_target(settings, st.meta)
        else:
            target, decision = space.target(settings, st.meta)  # the index keeps what built it unless told
        if decision.configured and not decision.send:
            report.notices.append(f"an API key is configured but {decision.reason}")
        if decision.configured and not decision.send:
            target.key_withheld = decision.reason
        recorded = st.meta.get("budget")
        budget = space.budget(settings, st.meta, budget_flag).chars
        if recorded and int(recorded) != budget:
            report.notices.append(f"the section budget changes from {recorded} to {budget} characters: "
                                  f"every file is divided again (unchanged sections keep their vectors)")
            with st.transaction() as c:
                c.execute(REREAD_ALL)
        timing.lap("open")
        entries, warnings = walk(root, settings["extensions"], settings["exclude"])
        report.warnings.extend(warnings)
        report.warnings.extend(nesting(root))
        timing.lap("walk")
        before = st.segment_names()
        fresh = st.next_slot() == 0
        try:
            update(st, root, target, budget=budget, entries=entries, progress=progress, report=report,
                   on_wait=on_wait)
        except FolioError as e:
            from folio.embed import EndpointError

            if isinstance(e, EndpointError) and e.status in (401, 403) and decision.configured and not decision.send:
                raise FolioError(f"{e}; your API key was {decision.reason}") from None
            raise
        timing.lap("plan")
        _finish(st, before, report, fresh)
        timing.lap("finish")
        report.model, report.endpoint = st.meta.get("model") or "", st.meta.get("endpoint") or ""
        if report.unreadable and not st.counts()["sections"]:
            report.error = (f"nothing could be indexed: {report.unreadable} of the {report.files} Markdown files "
                            f"under {root} could not be read as text and the rest hold no sections (see the "
                            f"warnings above); fix those files or leave them out with `exclude:` in folio.yaml")
        if report.files == 0:
            report.notices.append(f"no Markdown files under {root} (extensions: {', '.join(settings['extensions'])})")
    except Exception as e:
        from folio.errors import disk_full, full_sentence

        if disk_full(e):  # every batch before it is committed; the matrix tail past it is recovered
            raise FolioError(full_sentence(e, st.dir)) from None
        raise
    finally:
        st.close()
    report.seconds = time.perf_counter() - t0
    return report


def refresh(reader, paths: set[str], settings) -> tuple[bool, str]:
    """A query's refresh: bring the files behind its stale rows up to date, in the index's own
    space, under the write lock taken without waiting (a query never waits for a writer).
    `reader`: the query's open store. Returns (whether the index moved, the query's notice)."""
    from folio import space
    from folio.store import LockBusy, Store, acquire_lock

    root = reader.root
    why = reader.unwritable()
    if why:
        return False, (f"({len(paths)} of the files behind this result changed; the index at {reader.dir} "
                       f"is not writable ({why}), so it was not refreshed: those rows are marked (stale))")
    try:
        lock = acquire_lock(root, wait=False)
    except LockBusy:
        return False, (f"{len(paths)} of the files behind this result changed; another folio is "
                       f"updating the index, so those rows are marked (stale)")
    except FolioError as e:  # not writable after all, or a link where the lock belongs
        return False, (f"({len(paths)} of the files behind this result changed and could not be "
                       f"re-indexed ({e}); those rows are marked (stale))")
    try:
        w = Store.open(root, write=True)
        try:
            w.recover()
            meta = w.meta
            target = None
            if meta.get("endpoint") and w.dim:
                target, _decision = space.recorded_target(settings, meta)
            before = w.segment_names()
            rep = update(w, root, target, budget=int(meta.get("budget") or settings["max_chars"]),
                         only=sorted(paths))
            merge_segments_of_run(w, before)
        finally:
            w.close()
    except FolioError as e:
        return False, (f"{len(paths)} of the files behind this result changed and could not be "
                       f"re-indexed ({e}); those rows are marked (stale)")
    finally:
        lock.release()
    # The index moved even when another writer had already caught up: the query ranks again.
    return True, (f"({len(paths)} of the files behind this result had changed; "
                  f"{rep.changed + rep.new} file(s) re-embedded before answering"
                  + (f", {rep.deleted} gone" if rep.deleted else "") + ")")


def nesting(root: Path) -> list[str]:
    """A warning when this corpus lies inside another index that holds files under it: those files
    are held twice (walk warns about the other case, an index inside this corpus)."""
    from folio import store as storemod
    from folio.config import enclosing_index

    outer = enclosing_index(root)
    if outer is None:
        return []
    rel = root.resolve().relative_to(outer).as_posix()
    try:
        st = storemod.Store.open(outer)
        try:
            n = st.files_under(rel)
        finally:
            st.close()
    except FolioError:
        n = None  # an unreadable outer index: still worth the warning
    if n == 0:
        return []
    held = "its files are" if n is None else f"{n} of its files are"
    return [f"{root} lies inside the corpus indexed at {outer}, and {held} held by both indexes; run "
            f"`folio index` in {outer} instead, or add `{rel}/` to `exclude` in {outer}/folio.yaml if the "
            f"two corpora are meant to stay apart"]


MAX_SEGMENTS = 8


def _finish(st, before: list[str], report: Report, fresh: bool = False) -> None:
    """Merge lexical segments past MAX_SEGMENTS (merge_segments_of_run), and compact when dead rows
    outnumber live ones, or when a build from nothing left any (records the server refused and that
    were divided): a new index starts with none."""
    live = st.record_count()
    dead = st.next_slot() - live
    if (dead > live and dead > 64) or (fresh and dead):
        from folio import lexical

        report.compacted = st.compact(lexical.merge_segments)
        dead = 0
    else:
        merge_segments_of_run(st, before)
    report.dead_rows = dead


def merge_segments_of_run(st, before: list[str]) -> None:
    """Past MAX_SEGMENTS, merge this run's lexical segments into one, and the newest ones by size
    tier (a lexical-only run commits a few big segments and stays under it: no merge at all). Always a run of the newest segments (a newer segment wins per slot, so only a suffix
    can merge), and a big old segment only once comparable work has piled up behind it: merging
    every segment whenever there were too many rewrote a 433k-record corpus's whole plane
    (74 s, 6 GB) on every ninth one-file refresh."""
    names = st.segment_names()
    if len(names) <= MAX_SEGMENTS:
        return  # a few segments cost a query nothing measurable; merging them costs the run a full pass
    new = [n for n in names if n not in set(before)]
    segs = st.lex_segments()
    k = max(len(new), _tail_to_merge([len(sg["post_doc"]) + 1 for sg in segs]), len(names) - MAX_SEGMENTS + 1)
    if k < 2:
        return
    import numpy as np

    from folio import lexical

    victims = names[-k:]
    slots, _ = st.live(vectors_only=False)
    live = np.zeros(st.next_slot(), dtype=bool)
    live[slots] = True
    segs = dict(zip(names, st.lex_segments(), strict=False))
    st.replace_segments(lexical.merge_segments([segs[n] for n in victims], live), victims)


def _tail_to_merge(sizes: list[int]) -> int:
    """How many of the newest segments to merge: reach back while the next older segment is at most
    four times what has been gathered, so each posting is rewritten O(log n) times overall."""
    total, k = sizes[-1], 1
    while k < len(sizes) and sizes[-k - 1] <= 4 * total:
        total += sizes[-k - 1]
        k += 1
    return k
