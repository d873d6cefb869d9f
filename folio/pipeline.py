"""One pass of an index run, as a pipeline: list -> read -> parse -> plan -> count/divide -> embed -> commit.

The stages, each in its own module, hand the next a value: the listing (readahead.Listing: the
walking child's entries, or None when the tree matches the index), the files to read (the stat
prefilter, renames, deletions: decided here), each file's bytes and Parsed document (readahead.py:
read_ahead, parse workers), the records it becomes (the plan: slots kept by text hash, vectors
copied, records over the token limit divided by the server's counts: the limit settled first,
Session.open_server, then Session.count_ahead/count),
the batch's texts embedded (Session through embedding.py; a refused record divided again:
batch.Assembly.embed), and the batch committed (Assembly.commit). The pass calls them in that
order and is the one place that decides on what they report: a server that went down (the Session
says so in `server` and `failure`; the pass shows it, and the batch under way drops what waits for
vectors; a refresh whose server failed raises out of Session.down), a changed space or token limit
(Restart: update() runs the pass again).

Owns the plan (which files are read, what records each becomes), the order of the stages, and the
run's progress (report.Progress, handed to the caller's display by report.Feed from here alone:
the stages return counts and never call up). Must not print, talk to the server except through the
Session, or commit except through the Assembly.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from folio import timing
from folio.batch import Assembly, record_key
from folio.burst import Burst
from folio.changes import RACY_NS
from folio.counting import lookahead
from folio.errors import FolioError
from folio.readahead import Listing, Parsed, parse_bytes, read_ahead
from folio.reader import VERSION as TEXT_VERSION
from folio.reader import reader_text
from folio.report import Feed, Progress, Report, sample_first
from folio.session import SPECIALS, Down, Restart, Session
from folio.space import Target
from folio.store import NewFile, NewRecord
from folio.surface import invoke
from folio.walk import Entry


class Indexer:
    """One pass of a run against one open, locked store: the records each file read becomes.
    `session` is the only one that talks to the server, `batch` assembles what the pass plans and
    commits it; the pass holds both, calls them in the stages' order, and acts on what they return
    or raise (neither holds the other, nor the pass, nor the Feed)."""

    def __init__(self, store, root: Path, target: Target | None, budget: int, report: Report,
                 progress: Callable[[Progress], None] | None = None, renew: bool = False, full: bool = False,
                 down: Down | None = None,
                 on_wait: Callable[[str], None] | None = None, burst: Burst | None = None):
        self.store = store
        self.burst = burst
        self.root = root
        self.budget = budget
        self.report = report
        self.feed = Feed(Progress(endpoint=target.endpoint if target else "",
                                  lexical=target is None or down is not None), progress)
        self.down = down  # the failure that ended an earlier pass of this run: this one is lexical
        self.session = Session(store, target, report, full=full, renew=renew, down=down, on_wait=on_wait,
                               on_tick=lambda: self.feed.tick("loading"))
        if full:  # for a no-op's one request, connected while the walking child still lists the tree
            self.session.connect_probe()
        self.batch = Assembly(store, report, budget)

    def close(self) -> None:
        self.session.close()

    def _open_server(self) -> None:
        """The server made ready for what the pass needs of it next (Session.open_server): its first
        talk, shown as calibrating, sends along the longest record the batch waits to embed, if any;
        a server already answering is asked its token limit when a record needs it."""
        ses = self.session
        first = ses.server == "unknown"
        if first and ses.target is not None:
            self.feed.tick("calibrating")
        longest = self.batch.longest() if first and self.batch.pending else None
        ses.open_server(*((longest.text, longest.label) if longest is not None else ()))
        self._if_down()

    def _if_down(self) -> None:
        """After each call that may find the server failing (Session.server "down"): the pass goes on
        lexically, shown once; when it failed (Session.failure), the batch under way drops what waits
        for vectors (it may raise Restart)."""
        ses, prog = self.session, self.feed.prog
        if ses.server != "down" or prog.lexical:
            return
        prog.lexical = True
        self.feed.tick("lexical")
        if ses.failure is not None:
            self.batch.server_down()

    def _failed(self, cause) -> None:
        """The server failed mid-run (`cause`: its EndpointError): a full run goes on lexically; a
        refresh fails, saying what it committed (Session.down raises it)."""
        self.session.down(cause, mid_run=True, committed=self.batch.committed_files)
        self._if_down()

    def flush(self, final: bool = False) -> None:
        """Embed what the batch waits for (the server opened first), then commit it: part by part
        when it is big (one big file: Assembly.embed), each part committed before the next is sent,
        so memory and what a kill loses stay those of one batch and progress moves with each part
        (a batch that replaces older vectors is committed whole once its last part is in:
        Assembly.commit). The pass's last flush (`final`) of a full run that sent the server nothing
        still checks it serves the index's space (Session.verify_space: one short request)."""
        b, ses = self.batch, self.session
        if final and ses.full and not b.pending:
            ses.verify_space()
        if b.pending and ses.server == "unknown":
            self._open_server()
        timing.lap("plan")
        while True:
            if b.pending and ses.server == "ok":
                self._embed_part()
            timing.lap("embed")
            if ses.server == "unknown" and ses.held_vectors and not final:
                return  # hold non-embedding work until the server is known good (or the run ends)
            if b.pending and ses.server != "ok":
                b.pending = []  # lexical only: records stay vec=0
            fresh = b.commit(final and ses.full and not b.pending)
            if fresh:
                self.feed.tick("embedded", fresh)
            if not b.pending:
                return

    def _embed_part(self) -> None:
        """The batch's next part embedded (Assembly.embed, the Session lent); a failing server
        recorded (_failed), Ctrl-C committing what the server answered."""
        b, ses = self.batch, self.session
        # httpx and numpy: only when there is something to embed
        from folio.embed import EndpointError
        from folio.embedding import ServerFailed

        self.feed.tick("embedding")
        try:
            b.embed(ses)
        except (EndpointError, ServerFailed) as e:
            self._failed(e.error if isinstance(e, ServerFailed) else e)
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM) while a part embeds: what the server answered is committed, the
            # rest of the batch's records waiting for their vectors, as after a failed server; the
            # next run embeds them. Not a batch that re-embeds files whose older vectors still answer.
            if not b.at_risk:
                b.pending = []
                b.commit(False)
            raise
        finally:
            self.feed.prog.planned += b.replanned
            b.replanned = 0

    def _count_coming(self, item) -> None:
        """A file read and parsed ahead of the loop: the counts its records will need are asked now
        (Session.count_ahead), so the server counts them while the run plans the files before it."""
        parsed = item[3]
        if isinstance(parsed, Parsed) and parsed.document is not None and parsed.budget == self.budget:
            self._fit(parsed.document.records, (), ahead=True)

    def _fit(self, records, old_rows, ahead: bool = False) -> tuple[list, dict, dict]:
        """The records to plan for one file: each record over the server's token limit divided by
        its counts (sections.divide_to_tokens), every other one whole. A record that already holds a
        vector passed this same limit, so it is kept uncounted (unless the limit changed since:
        `refit`). A file's records thus depend on its text, the budget and the server's limit only.
        In order: the limit, learned first when a record may be over it and none is settled
        (_open_server); the counts of the records to divide, asked together (Session.count_ahead);
        each record divided by them. With no server, a record the index holds divided keeps those
        pieces (sections.held_division). Also returns what it looked up for the records it was given
        (text -> hash, hash -> a slot holding its vector), for add_file; `ahead`: only ask for their
        counts, when the limit is settled."""
        from folio import sections as sec
        from folio.embed import EndpointError

        ses = self.session
        if ses.target is None or ses.server == "down" or not records:
            keep = bool(old_rows) and bool(self.store.dim) and not ses.refit
            return (sec.held_division(records, old_rows, record_key) if keep else list(records)), {}, {}
        known: set = set()
        hashes = [record_key(s.text) for s in records]
        seen, have = {}, {}
        if not ses.refit and self.store.dim:
            have = self.store.slots_with_vectors(hashes)
            known = {r.text_hash for r in old_rows if r.vec} | set(have)
            seen = dict(zip((s.text for s in records), hashes, strict=True))
        counted = [s for s, h in zip(records, hashes, strict=True) if h not in known]
        if not ahead and ses.learn and not ses.learned and any(_over_recorded(ses, s) for s in counted):
            self._open_server()  # no limit recorded, or a new one to settle: ask first
            if ses.server != "ok":  # no server: lexical only, records as the budget divides them
                return list(records), seen, have
        if ses.server == "ok" and (ses.learned or not ses.learn):  # the rest counted `jobs` at a time
            ses.count_ahead([s.text for s in counted])
        if ahead:
            return [], {}, {}
        out = []
        for i, (s, h) in enumerate(zip(records, hashes, strict=True)):
            if h in known:
                out.append(s)
                ses.assumed |= ses.server != "ok"
                continue
            if ses.learn and not ses.learned:  # (no record here can pass the recorded limit: not asked yet)
                out.append(s)  # on the recorded limit: the session plans it again if the server differs
                ses.assumed = True
                continue
            if ses.server == "down" or not ses.tokens.limit:
                out.append(s)
                continue
            try:
                out.extend(sec.divide_to_tokens(s, ses.tokens.limit, ses.count, ses.count_ahead))
            except EndpointError as e:
                if ses.server != "ok":
                    # counting before the space was checked: the server is not there, and the first
                    # request (flush) says so as it would have; until then the record stays as it is
                    out.append(s)
                    continue
                self._failed(e)  # the rest of the run is lexical: these records wait for vectors
                return out + list(records[i:]), seen, have
        return out, seen, have

    def add_file(self, entry: Entry, raw: bytes, sha: str, old_id: int | None, old_rows: list,
                 parsed: Parsed | None = None, waiting: bool = False) -> None:
        """Re-split one file and plan its records: reuse slots by text hash, copy or embed the rest.
        `parsed`: parse_bytes(raw, budget) done ahead in a worker (used when its budget still holds);
        kept for the burst's next pass, when a burst is given.
        `waiting`: its bytes are the ones indexed, and some of its records wait for vectors: only
        what changed in its records is written (_same_bytes)."""
        from folio import sections as sec  # markdown-it and yaml: only when a file is read
        from folio.lexical.analysis import record_doc

        timing.lap("plan")
        if parsed is None or parsed.budget != self.budget:
            parsed = parse_bytes(raw, self.budget)
        timing.lap("parse")
        if self.burst is not None:
            self.burst.keep(entry.path, sha, parsed)
        doc = parsed.document
        if parsed.binary:  # stamped with no sections: not read again until it changes, old sections go
            self.report.warnings.append(f"{entry.path}: {parsed.binary}")
            self.report.unreadable += 1
            doc = sec.Document({}, "", (), ())
        else:
            for w in ([parsed.warning] if parsed.warning else []) + list(doc.warnings):
                self.report.warnings.append(f"{entry.path}: {w}")
        # one lookup per file for the sections another record already holds a vector for (_fit's, when it made one)
        records, seen, have = self._fit(doc.records, old_rows)
        hashes = [seen.get(s.text) or record_key(s.text) for s in records]
        if self.store.dim:
            rest = [h for s, h in zip(records, hashes, strict=True) if s.text not in seen]
            have = {**have, **self.store.slots_with_vectors(rest)} if rest else have
        if waiting and not parsed.binary:
            self._same_bytes(entry, sha, old_id, raw, doc, records, hashes, old_rows, have)
            return
        b = self.batch
        fobj = NewFile(old_id, entry.path, entry.size, entry.mtime_ns, sha, time.time_ns(), doc.frontmatter, doc.title)
        b.batch.files.append(fobj)
        by_hash = defaultdict(list)
        for r in old_rows:
            by_hash[r.text_hash].append(r)
        copies: list[tuple[NewRecord, int]] = []
        kept = set()
        # the file's lexical documents: as the parse worker analysed them (its record i at local[i]'s
        # slot), the records the plan divided after it (or all, where nothing analysed them) queued here
        local = {id(s): i for i, s in enumerate(doc.records)} if parsed.lex is not None else {}
        slots = [-1] * len(local)
        lines = None
        divided = []
        prog = self.feed.prog

        def want(rec: NewRecord, text: str, label: str) -> None:
            if self.session.server != "down":  # lexical only: nothing waits for a vector
                b.want_vector(rec, text, label)
                prog.planned += 1

        for s, h in zip(records, hashes, strict=True):
            label = f"{entry.path}:{s.start}-{s.end}"
            old = by_hash[h].pop(0) if by_hash.get(h) else None
            rec = NewRecord(old.slot if old is not None else b.alloc(), fobj, s.start, s.end, s.level, s.heading,
                            s.trail, s.truncated, h, False)
            if old is not None:
                kept.add(old.slot)
                if old.vec:
                    rec.vec = True
                    self.report.reused += 1
                else:
                    want(rec, s.text, label)
            else:
                src = have.get(h)
                if src is not None:
                    copies.append((rec, src))
                    rec.vec = True
                    self.report.copied += 1
                else:
                    want(rec, s.text, label)
            b.batch.records.append(rec)
            i = local.get(id(s))
            if i is not None:
                slots[i] = rec.slot
            else:
                divided.append((rec.slot, s))
        if local:
            b.lex_file(parsed.lex, slots)
        if divided and any(s.truncated for _slot, s in divided):
            lines = sec.decode(raw)[0].split("\n")
        for slot, s in divided:
            b.lex(record_doc(slot, s, doc.title, entry.path, lines))
        if copies:
            for (rec, _src), vec in zip(copies, self.store.read_vectors([src for _rec, src in copies]), strict=True):
                b.batch.vectors[rec.slot] = vec
        for r in old_rows:
            if r.slot not in kept:
                b.batch.delete_slots.append(r.slot)
                self.report.removed += 1
        self.report.sections += len(records)
        self.feed.prog.planning(entry.size)  # its sections are counted: what is left is the files after it
        timing.lap("plan")
        if b.due():
            self.flush()

    def _same_bytes(self, entry: Entry, sha: str, file_id: int, raw: bytes, doc, records, hashes: list[str],
                    old_rows: list, have: dict) -> None:
        """A file read again with its bytes as indexed, records of it waiting for vectors (a live index's
        words pass, a run without a server): a record it holds as it is keeps its row and lexical
        document, and is given its vector if it waits (embedded, or copied: Batch.given); only records
        that differ (divided by the server's counts) are written anew, and the rows they replace go.
        The file row is restamped. Writing every record again cost as much as the words pass."""
        from folio import sections as sec
        from folio.lexical.analysis import record_doc

        b, prog, report = self.batch, self.feed.prog, self.report
        # not written: it names the file to its records (and to a record the server refuses: Assembly._split)
        fobj = NewFile(file_id, entry.path, entry.size, entry.mtime_ns, sha, 0, doc.frontmatter, doc.title)
        held: dict[tuple, list] = defaultdict(list)
        for r in old_rows:
            held[(r.text_hash, r.start, r.end, r.level, r.heading, r.trail, r.truncated)].append(r)
        copies, lines = [], None
        for s, h in zip(records, hashes, strict=True):
            same = held.get((h, s.start, s.end, s.level, s.heading, tuple(s.trail), s.truncated))
            r = same.pop(0) if same else None  # held as it is: its row and lexical document stay
            if r is not None and r.vec:
                report.reused += 1
                continue
            rec = NewRecord(b.alloc() if r is None else r.slot, fobj, s.start, s.end, s.level, s.heading,
                            tuple(s.trail), s.truncated, h, False)
            if r is None:
                b.batch.records.append(rec)
                if s.truncated and lines is None:
                    lines = sec.decode(raw)[0].split("\n")
                b.lex(record_doc(rec.slot, s, doc.title, entry.path, lines))
            if have.get(h) is not None:
                copies.append((rec, have[h], r is not None))
                rec.vec = True
                report.copied += 1
            elif self.session.server != "down":
                b.want_vector(rec, s.text, f"{entry.path}:{s.start}-{s.end}", committed=r is not None)
                prog.planned += 1
        for (rec, _src, given), vec in zip(copies, self.store.read_vectors([c[1] for c in copies]), strict=True):
            b.batch.vectors[rec.slot] = vec
            if given:
                b.batch.given.append(rec.slot)
        for rows in held.values():
            for r in rows:
                b.batch.delete_slots.append(r.slot)
                report.removed += 1
        b.batch.restamps.append((entry.size, entry.mtime_ns, time.time_ns(), file_id))
        report.sections += len(records)
        timing.lap("plan")
        if b.due():
            self.flush()

    def delete_file(self, file_id: int) -> None:
        rows = self.store.file_rows(file_id)
        self.report.removed += len(rows)
        self.batch.batch.delete_files.append(file_id)

    def restamp(self, stamp, entry: Entry) -> None:
        self.batch.batch.restamps.append((entry.size, entry.mtime_ns, time.time_ns(), stamp.id))
        self.report.restamped += 1
        if self.batch.restamps_due():
            self.flush()

    def run_pass(self, entries, only: list[str] | None) -> None:
        """One pass of the run: the space checked (a full run), the files (files), then what the pass
        settled recorded: the record-text version and the token limit in meta, the budget and the
        token limit in the Report, and what waits for vectors when the server failed."""
        ses, store, report = self.session, self.store, self.report
        if only is None and self.down is None:
            ses.check_space()
            self._if_down()
        if ses.renew and self.down is None:
            ses.renew_text()
        self.files(entries, only)
        if ses.renew and ses.failure is None:
            store.set_meta(text=TEXT_VERSION)
        if only is None and ses.learned and ses.failure is None and store.meta.refit:
            store.set_meta(refit=None)  # every file was divided under the recorded limit
        report.budget = self.budget
        report.tokens = ses.tokens.limit if ses.tokens else None
        if report.truncated:
            report.notices.append(cut_notice(report.truncated, self.budget, ses.tokens))
        if ses.failure is not None:
            report.waiting, report.waiting_files = store.pending_counts()
            report.error = ses.failure_sentence()
            report.error_watched = ses.failure_sentence(watched=True)

    def failed(self) -> Down | None:
        """The failure that took the server down during this pass (None while it answers): the next
        pass of the run starts lexical with it."""
        return self.session.failure if self.session.server == "down" else None

    def files(self, entries, only: list[str] | None) -> None:
        """The pass over the files: the stat prefilter, renames and deletions, each file read planned
        (add_file), and the last batch committed. `entries`: the listed files, or a Listing; `only`:
        a query's refresh of these paths. Files a live index's events named (Burst) that are listed
        are read whatever their stat says, and their hashes compared: an edit that keeps the size and
        puts the old mtime back is seen."""
        store, root, report = self.store, self.root, self.report
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
        ses = self.session
        pending = store.pending_file_ids() if ses.target is not None else set()
        if scope is not None and pending:  # a query's refresh: files elsewhere waiting for vectors are not its business
            pending &= {s.id for s in store.stamps_for(scope).values()}
        if pending and ses.server == "unknown":
            self._open_server()  # files wait for vectors: only worth reading when a server answers
            if ses.server == "down":
                pending = set()
        # The stat prefilter: a listed (path, size, mtime_ns) that the index holds, stamped well after that
        # mtime (a stamp taken within RACY_NS of it may predate a second write in the same tick) and not
        # waiting for vectors, is unchanged. The rest is read, and the files an event named.
        unclean = pending
        if self.burst is not None and self.burst.named and scope is None:
            unclean = pending | {s.id for s in store.stamps_for(sorted(self.burst.named)).values()}
        clean, held = store.clean_stamps(RACY_NS, scope, unclean)
        listing = entries if isinstance(entries, Listing) else None
        if listing is not None:
            # None: the tree lists exactly the files of `clean` and the index holds no other (the child's
            # count and digest say so), so nothing is read and nothing is gone
            entries = None if only is None and entries.unchanged(clean, held) else entries()
        listed = held if entries is None else len(entries)
        report.files = listed if only is None else report.files
        if entries is None:
            todo = []
        else:
            # a query names the files whose bytes it found changed, stat or no stat: read them
            # (entries may be plain (path, size, mtime_ns) tuples in the order listed: readahead.WalkAhead.result;
            # the files to read are taken in path order)
            if scope is not None:
                todo = sorted(Entry._make(e) for e in entries)
            else:
                hashes = clean.hashes()
                todo = sorted(Entry._make(e) for e in entries if hash(e) not in hashes)
        # a few files to read: the walking child parses them while this process imports what plans them
        kept = self.burst.parsed if self.burst is not None else {}
        fresh = [e for e in todo if e.path not in kept] if kept else todo
        early = listing.parse_ahead(root, fresh, self.budget, lambda: _warm(ses)) if listing is not None else None
        if kept:
            early = self.burst.early(early)
        # Full stamps (with the content hash) only for the files that will be read or have gone.
        stamps = store.stamps_for([e.path for e in todo])
        if listed - len(todo) + len(stamps) == held:
            gone_paths = []  # every file the index holds was listed
        else:
            present = {e[0] for e in entries}
            gone_paths = [p for p in store.paths_held(scope) if p not in present]
            stamps.update(store.stamps_for(gone_paths))
        gone = [stamps[p] for p in gone_paths]
        if only is None and (todo or gone_paths) and store.meta.unfinished != listed:
            # Until the final commit clears it, a query says the index may lack some of these files.
            store.set_meta(unfinished=listed)
        # Renames: a new path whose bytes equal a vanished file's keeps that file's slots.
        gone_by_sha: dict[str, list] = defaultdict(list)
        for s in gone:
            gone_by_sha[s.sha256].append(s)
        moved_ids = set()
        prog = self.feed.prog
        todo, prog.sample = sample_first(todo)  # a spread of files first: its sections per byte stand for the rest
        prog.files_total, prog.bytes_total = len(todo), sum(e.size for e in todo)
        timing.lap("stamps")
        def wants_parse(e: Entry, sha: str) -> bool:
            s = stamps.get(e.path)
            return s is None or s.sha256 != sha or s.id in pending

        ahead = read_ahead(root, todo, wants_parse, lambda: self.budget, early)
        try:
            for e, raw, sha, parsed in lookahead(ahead, self._count_coming):
                s = stamps.get(e.path)
                if isinstance(raw, FileNotFoundError):
                    # Gone between the walk and the read: what was indexed from it goes too.
                    report.warnings.append(f"{e.path}: vanished while indexing; "
                                           + ("its sections were dropped" if s is not None else "skipped"))
                    if s is not None:
                        report.deleted += 1
                        self.delete_file(s.id)
                    prog.read(e.size)
                    continue
                if isinstance(raw, OSError):
                    kept = "; its previous sections are kept" if s is not None else ""
                    report.warnings.append(f"{e.path}: could not be read ({raw.strerror or raw}); skipped{kept}")
                    report.unreadable += 1
                    prog.read(e.size)
                    continue
                report.read += 1
                timing.lap("read")
                if len(raw) != e.size:  # changed between stat and read: stamp what was read
                    e = Entry(e.path, len(raw), e.mtime_ns)
                if s is not None and s.sha256 == sha and s.id not in pending:
                    self.restamp(s, e)
                elif s is not None and not s.sha256 and (s.size, s.mtime_ns) == (e.size, e.mtime_ns) and any(
                        r.vec for r in store.file_rows(s.id)):
                    # Read again only to be divided or embedded anew (Store.reread_all: a new record text, budget
                    # or token limit). With no server to embed it, its older vectors keep answering and it
                    # stays due for the next run that reaches the server; while one answers, a failure in
                    # this batch starts the pass over without it (Session.down, Assembly).
                    if ses.server == "down" and not same_records(store, self.budget, s.id, raw, parsed):
                        prog.read(e.size)
                        continue  # (a file read again for its words alone needs no server: same_records)
                    self.batch.at_risk = True
                    self.add_file(e, raw, sha, s.id, store.file_rows(s.id), parsed)
                elif s is None and gone_by_sha.get(sha):
                    old = gone_by_sha[sha].pop(0)
                    moved_ids.add(old.id)
                    report.renamed += 1
                    self.add_file(e, raw, sha, old.id, store.file_rows(old.id), parsed)
                else:
                    if s is None:
                        report.new += 1
                    elif s.sha256 and s.sha256 != sha:  # an empty sha: read again by Store.reread_all, not changed
                        report.changed += 1
                    self.add_file(e, raw, sha, s.id if s else None, store.file_rows(s.id) if s else [], parsed,
                                  waiting=s is not None and s.sha256 == sha)
                prog.read(e.size)
                self.feed.tick("file")
        finally:
            ahead.close()  # stops the workers now, even when the loop ends in an error
        for s in gone:
            if s.id not in moved_ids:
                report.deleted += 1
                self.delete_file(s.id)
        self.flush(final=True)


def same_records(store, budget: int, file_id: int, raw: bytes, parsed) -> bool:
    """Whether a file read again becomes exactly the records it holds (same texts, each with its
    vector): then planning it embeds nothing and only its lexical documents are built anew, with or
    without a server (a new budget or token limit divides it otherwise: it waits for a server)."""
    if parsed is None or parsed.budget != budget:
        parsed = parse_bytes(raw, budget)
    if parsed.binary:
        return False
    rows = store.file_rows(file_id)
    return all(r.vec for r in rows) and sorted(r.text_hash for r in rows) == sorted(
        record_key(s.text) for s in parsed.document.records)


def cut_notice(n: int, budget: int, tokens) -> str:
    """What a run that embedded `n` records with a line cut to fit says: the rest of that line is
    found by its words only. Which limits cut it (the server's tokens, the budget) and, where the
    server's physical batch set the token limit, that it can be raised."""
    over = f"max_chars ({budget:,} characters)"
    if tokens and tokens.limit:
        over = f"the server takes in one input ({tokens.limit} tokens) or than " + over
    raise_it = "; `folio doctor` says how to raise the server's limit" if tokens and tokens.source == "batch" else ""
    records = f"{n} record" + ("s" if n != 1 else "")
    return (f"{records} held a single line longer than {over}: each such line was cut to fit, so its rest is "
            f"found by its words only, not by meaning; `folio status --truncated` lists them{raise_it}")


def _over_recorded(ses, s) -> bool:
    """Whether record `s` may take more tokens than the limit the session has not learned yet: no
    limit is recorded, the server answers already (it is asked), or the record's reader text may
    pass the recorded limit (a text of n UTF-8 bytes is at most n + SPECIALS tokens)."""
    if ses.tokens is None or ses.server == "ok":
        return True
    bound = len(reader_text(s.text).encode("utf-8", "surrogatepass")) + SPECIALS
    return bool(ses.tokens.limit) and bound > ses.tokens.limit


def _warm(ses) -> None:
    """Import what planning and committing a read file needs (numpy; the client when a server may
    answer): while the walking child parses the file, these load here instead of after it."""
    from folio.lexical import segments  # noqa: F401 - numpy

    if ses.target is not None and ses.server != "down":
        from folio import embed  # noqa: F401


def update(store, root: Path, target: Target | None, *, budget: int,
           entries: list[Entry] | Listing | None = None, only: list[str] | None = None, progress=None,
           report: Report | None = None, on_wait=None, burst: Burst | None = None) -> Report:
    """Bring the store up to date with the files under root (or only the paths in `only`).
    `entries`: the listed files, or a Listing taken when first needed; `burst`: a live index's (Burst)."""
    report = report or Report()
    report.root = str(root)
    warned = len(report.warnings)
    down = None  # the failure that ended an earlier pass of this run (see Session.down)
    for _attempt in range(3):
        del report.warnings[warned:]
        ix = Indexer(store, root, target, budget, report, progress, renew=only is None, full=only is None,
                     on_wait=on_wait, down=down, burst=burst)
        try:
            ix.run_pass(entries, only)
            return report
        except Restart:  # nothing of the first pass was committed: the second one counts it all again
            down = ix.failed() or down
            report.embedded = report.reused = report.copied = report.removed = report.sections = 0
            report.read = report.new = report.changed = report.deleted = report.renamed = report.restamped = 0
            report.unreadable = 0
            continue
        finally:
            ix.close()
    raise FolioError(f"the embeddings server changed its vector space twice during one run; {invoke('index')} again")
