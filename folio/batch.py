"""Assembling one index run's commits: slots, records waiting for vectors, lexical documents, and
when a batch is embedded and committed.

Owns a record's key (its text hash under the record-text version, HASH_SALT), slot allocation, the
batch under way (store.Batch: its files, records, vectors, deletions and lexical segment), the
records waiting to be embedded (Wanted), their embedding (deduplicated by key, through
embedding.embed; a big batch, one file of many sections, in parts of the commit's pace, each
committed before the next: the batch's records in its first commit, their vectors as they come)
and the division of a record the server refuses, and the commit's pace (COMMIT_*).
Must not decide which files to read or how a file divides (pipeline.py plans), hold the Session
(the pass lends it to Assembly.embed, the only call here that talks to the server), show progress (it
returns the counts the pass shows) or print.
"""

from __future__ import annotations

import time

from folio import timing
from folio.errors import FolioError
from folio.reader import VERSION as TEXT_VERSION
from folio.report import Report
from folio.session import TOKEN_FLOOR, Restart
from folio.store import Batch, NewRecord

# A record's key: the hash of its source text under the record-text version that embeds it, so
# that a new version gives every record a new key and re-embeds it as its file is read again.
HASH_SALT = TEXT_VERSION + "\n"
COMMIT_TEXTS = 256  # texts to embed per commit, adapted to the server's pace (see flush)
COMMIT_SECONDS = (1.0, 5.0)  # aim for a commit every 1-5 s of embedding
COMMIT_FILES = 2000  # files per commit when there is little to embed
COMMIT_RESTAMPS = 50_000  # restamped files per commit
LEX_PART_CHARS = 4_000_000  # text tokenised into one lexical part at a time


_KEYS: dict[str, str] = {}  # the last texts keyed: the plan keys a file's records twice, and a
KEYS_KEPT = 4096  # corpus's revisions of a file hold the same sections, read one after another


def record_key(text: str) -> str:
    """The key a record's text is stored and reused under (records.text_hash)."""
    key = _KEYS.get(text)
    if key is None:
        from folio import sections as sec

        if len(_KEYS) >= KEYS_KEPT:
            _KEYS.clear()
        key = _KEYS[text] = sec.text_hash(HASH_SALT + text)
    return key


class Wanted:
    """A record waiting for its vector: the text to embed and the label that names it in messages;
    `committed`: the record is in the index already (committed with its batch's first part, without
    its vector), so the commit that brings its vector marks it as given one (Batch.given)."""

    __slots__ = ("record", "text", "label", "committed")

    def __init__(self, record: NewRecord, text: str, label: str):
        self.record, self.text, self.label = record, text, label
        self.committed = False


class Assembly:
    """The batches of one run against one open, locked store."""

    def __init__(self, store, report: Report, budget: int):
        self.store = store
        self.report = report
        self.budget = budget
        self.next_slot = store.next_slot()
        self.commit_texts = COMMIT_TEXTS
        self.committed_files = 0
        self.replanned = 0  # sections planned for embedding since the pass last counted them (_redivide)
        self.new_batch()

    def new_batch(self) -> None:
        self.batch = Batch.empty(self.next_slot)
        self.lex_docs: list[tuple] = []  # lexical.analysis.Doc
        self.lex_chars = 0
        self.lex_parts: list[dict] = []
        self.lex_groups: dict[int, tuple] = {}  # segments the parse workers analysed, their slots (lex_file)
        self.pending: list[Wanted] = []
        self.grouped = False  # pending ordered by key (a part never parts one text's records: embed)
        self.fresh = 0  # records given a vector from the server in this batch: counted in progress once committed
        self.at_risk = False  # the batch holds a file re-read only to be re-embedded, whose vectors it replaces

    def lex(self, doc: tuple) -> None:
        """Queue one lexical document (lexical.analysis.Doc). Tokenising holds ~30 bytes per byte of text, so a batch whose
        text outgrows LEX_PART_CHARS (one huge file) is tokenised in parts, merged at commit."""
        self.lex_docs.append(doc)
        self.lex_chars += len(doc.body)
        if self.lex_chars >= LEX_PART_CHARS:
            from folio.lexical.segments import build_segment

            self.lex_parts.append(build_segment(self.lex_docs))
            self.lex_docs, self.lex_chars = [], 0

    def lex_file(self, lex: tuple, slots) -> None:
        """Queue one file's lexical documents as a parse worker analysed them (Parsed.lex: its group's
        segment, lexical.segments.files_segment, and where the file starts in it), its record i given
        slot `slots[i]` (-1: a record the plan divided, queued apart with lex). The group's other
        documents have no slot in this batch (-1) until their files are planned in it."""
        import numpy as np

        seg, start = lex
        got = self.lex_groups.get(id(seg))
        if got is None:
            got = self.lex_groups[id(seg)] = (seg, np.full(len(seg["doc_slots"]), -1, dtype=np.int64))
        got[1][start:start + len(slots)] = slots

    def alloc(self) -> int:
        s = self.next_slot
        self.next_slot += 1
        self.batch.high_water = self.next_slot
        return s

    def want_vector(self, rec: NewRecord, text: str, label: str, committed: bool = False) -> None:
        """Queue a record for embedding (the pass queues none with no server: lexical only, batches then
        close at COMMIT_FILES, a handful of big lexical segments, not one per 256 texts). `committed`:
        the record is in the index already, without its vector (its vector is given: Batch.given)."""
        w = Wanted(rec, text, label)
        w.committed = committed
        self.pending.append(w)
        self.grouped = False

    def due(self) -> bool:
        """Whether the batch holds enough to embed and commit now (at a file boundary)."""
        return len(self.pending) >= self.commit_texts or len(self.batch.files) >= COMMIT_FILES

    def restamps_due(self) -> bool:
        return len(self.batch.restamps) >= COMMIT_RESTAMPS

    def server_down(self) -> None:
        """The server failed and the run goes on lexically: what waits for vectors waits for the next run."""
        self.pending = []
        if self.at_risk:  # committing this batch lexically would drop older vectors of unchanged files
            raise Restart()

    def longest(self) -> Wanted:
        """The longest text waiting: sent along with the run's first request (Session.open_server)."""
        return max(self.pending, key=lambda p: len(p.text))

    def embed(self, session) -> None:
        """Embed the next part of what the batch waits for through `session` (its vectors land in the
        batch; a failure raises, what the server answered before it kept; `replanned` says by how
        much the sections planned for embedding changed, a refused record divided). A part is all of
        it, unless it holds twice the commit pace or more (one big file): then `commit_texts` of it
        (every record of a text in the same part), the rest left in `pending` for the parts after
        the commit (the pass commits each part: memory and a kill's loss stay those of one batch).
        A slow server commits smaller parts (a kill loses less), a fast one larger (fewer fsyncs)."""
        pending, n = self.pending, len(self.pending)
        if n >= 2 * self.commit_texts:
            if not self.grouped:  # a text's records side by side, in the order their texts first come
                by_key: dict[str, list[Wanted]] = {}
                for w in pending:
                    by_key.setdefault(w.record.text_hash, []).append(w)
                pending = [w for ws in by_key.values() for w in ws]
                self.grouped = True
            n = self.commit_texts
            last = pending[n - 1].record.text_hash
            while n < len(pending) and pending[n].record.text_hash == last:
                n += 1
        part, self.pending = pending[:n], pending[n:]
        t0 = time.perf_counter()
        try:
            self._embed_part(session, part)
        finally:
            took = time.perf_counter() - t0
            if took > COMMIT_SECONDS[1]:
                self.commit_texts = max(16, self.commit_texts // 2)
            elif took < COMMIT_SECONDS[0]:
                self.commit_texts = min(4096, self.commit_texts * 2)

    def commit(self, final: bool) -> int:
        """Commit the batch (`final`: a whole-corpus run's last, which clears `unfinished`) and start
        the next; returns the records it gave a vector from the server (what progress counts). What
        still waits for vectors after a part (embed) is committed without them and carried into the
        next batch, whose commits mark each record as given its vector as it comes. A batch that replaces
        older vectors (at_risk) is committed whole once its last part is in, so a failure meanwhile
        leaves the older vectors answering: until then its parts' vectors are written to their rows
        ahead of that commit (Store.write_ahead) and let go."""
        if self.pending and self.at_risk:
            self.store.write_ahead(self.batch.vectors, self.batch.high_water)
            self.batch.vectors = {}
            return 0
        if self.lex_docs:
            from folio.lexical.segments import build_segment

            self.lex_parts.append(build_segment(self.lex_docs))
            self.lex_docs, self.lex_chars = [], 0
        if len(self.lex_parts) == 1 and not self.lex_groups:
            self.batch.segment = self.lex_parts[0]
        elif self.lex_parts or self.lex_groups:
            import numpy as np

            from folio.lexical.segments import merge_segments

            parts = [{**seg, "doc_slots": slots} for seg, slots in self.lex_groups.values()] + self.lex_parts
            top = max((int(p["doc_slots"].max()) for p in parts if len(p["doc_slots"])), default=-1) + 1
            self.batch.segment = merge_segments(parts, np.ones(top, dtype=bool))
        self.lex_parts, self.lex_groups = [], {}
        timing.lap("lexical")
        if final and self.store.meta.unfinished is not None:
            self.batch.set_meta(unfinished=None)  # the walk reached its end: every file is in the index
        fresh = 0
        if self.batch:
            self.batch.set_meta(budget=self.budget)
            self.store.commit(self.batch)
            self.committed_files += len(self.batch.files)
            fresh = self.fresh  # progress counts what a killed run keeps: what is committed
        timing.lap("commit")
        carry, grouped = self.pending, self.grouped
        self.new_batch()
        if carry:
            for w in carry:  # every record of the batch is in the index now
                w.committed = True
            self.pending, self.grouped = carry, grouped
        return fresh

    def _embed_part(self, session, part: list[Wanted]) -> None:
        from folio.embedding import embed

        dedup: dict[str, int] = {}
        texts, labels, owners = [], [], []
        for w in part:
            h = w.record.text_hash
            if h in dedup:
                owners[dedup[h]].append(w)
                continue
            dedup[h] = len(texts)
            texts.append(w.text)
            labels.append(w.label)
            owners.append([w])
        ready = session.ready
        vecs = [ready.pop(t, None) for t in texts]
        need = [i for i, v in enumerate(vecs) if v is None]
        try:
            got, refused = embed(session, [texts[i] for i in need], [labels[i] for i in need]) if need else \
                ([], [])
        except (Exception, KeyboardInterrupt) as e:  # the server failed, or Ctrl-C: what it answered is kept
            self._take(vecs, owners, need, getattr(e, "partial", ((), ()))[0])
            raise
        self._take(vecs, owners, need, got)
        for j, err in refused:
            for w in owners[need[j]]:
                self._redivide(session, w, err)

    def _take(self, vecs: list, owners: list, need: list[int], got) -> None:
        """Give each record its vector: `vecs` (None where it is still wanted) per distinct text,
        `got` the server's answers for the texts at `need` (None where it refused one)."""
        for i, v in zip(need, got, strict=False):
            vecs[i] = v
        for i, v in enumerate(vecs):
            if v is None:
                continue
            for w in owners[i]:
                rec = w.record
                self.batch.vectors[rec.slot] = v
                rec.vec = True
                if w.committed:  # in the index without its vector: its record now says it has one
                    self.batch.given.append(rec.slot)
                self.report.embedded += 1
                self.report.truncated += rec.truncated  # a line cut to fit: the run says so (pipeline)
                self.fresh += 1

    def _redivide(self, session, w: Wanted, err) -> None:
        """A record the server refused: divide that record alone (by the server's token counts when it
        names its limit and counts tokens, else by its characters) and embed the pieces. Nothing else
        changes: no other record is divided for it."""
        from folio import sections as sec
        from folio.embed import Failure

        rec, text, label = w.record, w.text, w.label
        self.replanned -= 1  # its pieces are planned instead, or it is not embedded at all
        if err.kind != Failure.TOO_LARGE:
            why = f"the server refused it ({err.server})" if err.server else str(err)
            self.report.warnings.append(f"{label}: not embedded, {why}; it stays searchable lexically and the "
                                        f"next `folio index` tries it again")
            return
        whole = sec.Section(rec.start, rec.end, rec.level, rec.heading, tuple(rec.trail), text, rec.truncated)
        limit = err.limit if err.tokens and err.limit and err.tokens > err.limit else None
        if limit is not None and limit < TOKEN_FLOOR:
            raise FolioError(f"the server refuses even {len(text)}-character inputs ({err.server}); raise its batch "
                             f"size (llama-server: -b N -ub N) or use a model with a longer context") from None
        pieces = [whole]
        tokens = session.tokens
        if limit is not None and tokens and tokens.limit:
            if limit < tokens.limit:  # the server takes less than recorded: every file is divided again
                session.lower_limit(limit)  # raises Restart: this batch is planned again
            pieces = sec.divide_to_tokens(whole, limit, session.count)
        if len(pieces) == 1:  # no counts (or counts the server disagrees with): by its characters
            at = int(len(text) * limit / err.tokens * sec.TOKEN_MARGIN) if limit else len(text) // 2
            pieces = sec.divide(whole, max(1, min(at, len(text) - 1)))
        if len(pieces) == 1 and pieces[0].text == text:
            self.report.warnings.append(f"{label}: not embedded, the server refused it ({err.server}) and it "
                                        f"cannot be divided; it stays searchable lexically")
            return
        planned = self._split(w, pieces)
        self.replanned += len(planned)
        # Say what folio did, not what the server advises: its refusal ("increase the physical batch
        # size") reads like an order, though nothing is left to do; `folio doctor` gives that advice.
        said = (f"{err.tokens} tokens where the server takes {err.limit}" if err.tokens and err.limit
                else "too long for the server")
        self.report.notices.append(f"{label} was {said}: folio divided it into {len(planned)} records "
                                   f"(nothing to do; `folio doctor` says how to raise the server's limit)")
        self._embed_part(session, planned)

    def _split(self, w: Wanted, pieces: list) -> list[Wanted]:
        """Replace a pending record by the consecutive records `pieces` (sections.Section)."""
        rec = w.record
        if not w.committed:
            self.batch.records.remove(rec)
        self.batch.delete_slots.append(rec.slot)
        from folio.lexical.analysis import record_doc

        out = []
        path, title = rec.file.path, rec.file.title
        for p in pieces:
            r = rec.replace(slot=self.alloc(), start=p.start, end=p.end, truncated=p.truncated or rec.truncated,
                            text_hash=record_key(p.text), vec=False)
            self.batch.records.append(r)
            self.lex(record_doc(r.slot, p, title, path))
            out.append(Wanted(r, p.text, f"{path}:{p.start}-{p.end}"))
        return out
