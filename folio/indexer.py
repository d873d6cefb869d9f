"""The incremental update: what changed, what to embed, and the order things are committed in.

Stat first (a file whose size and mtime_ns match its stamp is never opened, except inside the
2-second racy window), hash second, parse third. A section whose text hash is already indexed keeps
its vector; a renamed file keeps its slots; deleted files' records go. Work is committed in batches
at file boundaries, so a killed run keeps what it finished and the next run resumes; `refresh` does
the same for the few files behind a query's stale rows.

Owns the plan: which files are read (the stat prefilter, renames, deletions) and which records each
file read becomes (slots kept by text hash, vectors copied, records divided to the server's token
limit). The run's other jobs have their own modules: session.py (the server and its space),
embedding.py (requests, bisection), batch.py (slots, batches, commits), readahead.py (reading and
parsing ahead). Must not print: progress and notices go through callbacks and the Report.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from folio import reanalyse, timing
from folio.batch import Assembly, record_key
from folio.counting import lookahead
from folio.errors import FolioError
from folio.readahead import Listing, Parsed, WalkAhead, parse_bytes, read_ahead
from folio.reader import VERSION as TEXT_VERSION
from folio.reader import reader_text
from folio.report import Feed, Progress, Report, sample_first
from folio.session import SPECIALS, Down, Restart, Session
from folio.space import Target
from folio.store import NewFile, NewRecord
from folio.walk import Entry

RACY_NS = 2_000_000_000


class Indexer:
    """One pass of a run against one open, locked store: the records each file read becomes.
    `session` talks to the server, `batch` assembles and commits what the pass plans."""

    def __init__(self, store, root: Path, target: Target | None, budget: int, report: Report,
                 progress: Callable[[Progress], None] | None = None, renew: bool = False, full: bool = False,
                 down: Down | None = None,
                 on_wait: Callable[[str], None] | None = None):
        self.store = store
        self.root = root
        self.budget = budget
        self.report = report
        self.feed = Feed(Progress(endpoint=target.endpoint if target else "",
                                  lexical=target is None or down is not None), progress)
        self.down = down  # the failure that ended an earlier pass of this run: this one is lexical
        self.session = Session(store, target, report, full=full, renew=renew, down=down, on_wait=on_wait)
        self.batch = Assembly(store, report, budget)

    def close(self) -> None:
        self.session.close()

    def _open_server(self, longest=None) -> None:
        """The run's first talk to the server (Session.open_server), shown as calibrating; `longest`:
        the longest record waiting (batch.Wanted), sent along."""
        if self.session.target is not None:
            self.feed.tick("calibrating")
        self.session.open_server(*((longest.text, longest.label) if longest is not None else ()))
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
        """The server failed mid-run (`cause`: its EndpointError): a refresh fails, with what it
        committed kept; a full run goes on lexically (Session.down)."""
        ses = self.session
        if not ses.full:
            raise self.batch.died(ses.failed_mid_run(cause)) from None
        ses.down(cause, mid_run=True)
        self._if_down()

    def flush(self, final: bool = False) -> None:
        """Embed what the batch waits for (the server opened first), then commit it."""
        b, ses = self.batch, self.session
        if b.pending and ses.server == "unknown":
            self._open_server(b.longest())
        timing.lap("plan")
        if b.pending and ses.server == "ok":
            # httpx and numpy: only when there is something to embed
            from folio.embed import EndpointError
            from folio.embedding import ServerFailed

            self.feed.tick("embedding")
            try:
                b.embed(ses)
            except (EndpointError, ServerFailed) as e:
                self._failed(e.error if isinstance(e, ServerFailed) else e)
            finally:
                self.feed.prog.planned += b.replanned
                b.replanned = 0
        if b.pending and ses.server == "down":
            b.pending = []  # lexical only: records stay vec=0
        timing.lap("embed")
        if ses.server == "unknown" and ses.held_vectors and not final:
            return  # hold non-embedding work until the server is known good (or the run ends)
        fresh = b.commit(final and ses.full)
        if fresh:
            self.feed.tick("embedded", fresh)

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
        Also returns what it looked up for the records it was given (text -> hash, hash -> a slot
        holding its vector), for add_file; `ahead`: only ask for their counts (Session.count_ahead)."""
        from folio import sections as sec
        from folio.embed import EndpointError

        ses = self.session
        if ses.target is None or ses.server == "down" or not records:
            return list(records), {}, {}
        known: set = set()
        hashes = [record_key(s.text) for s in records]
        seen, have = {}, {}
        if not ses.refit and self.store.dim:
            have = self.store.slots_with_vectors(hashes)
            known = {r.text_hash for r in old_rows if r.vec} | set(have)
            seen = dict(zip((s.text for s in records), hashes, strict=True))
        if ses.server == "ok" and (ses.learned or not ses.learn):  # the rest counted `jobs` at a time
            ses.count_ahead([s.text for s, h in zip(records, hashes, strict=True) if h not in known])
        if ahead:
            return [], {}, {}
        out = []
        for i, (s, h) in enumerate(zip(records, hashes, strict=True)):
            if h in known:
                out.append(s)
                ses.assumed |= ses.server != "ok"
                continue
            if ses.learn and not ses.learned:  # no limit recorded, or a new one to settle: ask first
                bound = len(reader_text(s.text).encode("utf-8", "surrogatepass")) + SPECIALS
                if ses.tokens is not None and ses.server != "ok" and (not ses.tokens.limit or
                                                                      bound <= ses.tokens.limit):
                    out.append(s)  # on the recorded limit: the session plans it again if the server differs
                    ses.assumed = True
                    continue
                if ses.server == "unknown":
                    self._open_server()
                elif ses.server == "ok":
                    ses.learn_alone()  # the server was opened by check_space
                if ses.server != "ok":  # no server: lexical only, records as the budget divides them
                    return out + list(records[i:]), seen, have
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
                 parsed: Parsed | None = None) -> None:
        """Re-split one file and plan its records: reuse slots by text hash, copy or embed the rest.
        `parsed`: parse_bytes(raw, budget) done ahead in a worker (used when its budget still holds)."""
        from folio import sections as sec  # markdown-it and yaml: only when a file is read
        from folio.lexical.analysis import record_doc

        timing.lap("plan")
        if parsed is None or parsed.budget != self.budget:
            parsed = parse_bytes(raw, self.budget)
        timing.lap("parse")
        doc = parsed.document
        if parsed.binary:  # stamped with no sections: not read again until it changes, old sections go
            self.report.warnings.append(f"{entry.path}: {parsed.binary}")
            self.report.unreadable += 1
            doc = sec.Document({}, "", (), ())
        else:
            for w in ([parsed.warning] if parsed.warning else []) + list(doc.warnings):
                self.report.warnings.append(f"{entry.path}: {w}")
        b = self.batch
        fobj = NewFile(old_id, entry.path, entry.size, entry.mtime_ns, sha, time.time_ns(), doc.frontmatter, doc.title)
        b.batch.files.append(fobj)
        by_hash = defaultdict(list)
        for r in old_rows:
            by_hash[r.text_hash].append(r)
        # one lookup per file for the sections another record already holds a vector for (_fit's, when it made one)
        records, seen, have = self._fit(doc.records, old_rows)
        hashes = [seen.get(s.text) or record_key(s.text) for s in records]
        if self.store.dim:
            rest = [h for s, h in zip(records, hashes, strict=True) if s.text not in seen]
            have = {**have, **self.store.slots_with_vectors(rest)} if rest else have
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
        if ses.failure is not None:
            report.waiting, report.waiting_files = store.pending_counts()
            report.error = ses.failure_sentence()

    def failed(self) -> Down | None:
        """The failure that took the server down during this pass (None while it answers): the next
        pass of the run starts lexical with it."""
        return self.session.failure if self.session.server == "down" else None

    def files(self, entries, only: list[str] | None) -> None:
        """The pass over the files: the stat prefilter, renames and deletions, each file read planned
        (add_file), and the last batch committed. `entries`: the listed files, or a Listing; `only`:
        a query's refresh of these paths."""
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
        # waiting for vectors, is unchanged. The rest is read.
        clean, held = store.clean_stamps(RACY_NS, scope, pending)
        listing = entries if isinstance(entries, Listing) else None
        if listing is not None:
            if only is None:
                ses.verify_space(early=True)  # a no-op's one request, made while the child still lists the tree
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
        early = listing.parse_ahead(root, todo, self.budget, lambda: _warm(ses)) if listing is not None else None
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
                    if ses.server == "down" and not reanalyse.same_records(self, s.id, raw, parsed):
                        prog.read(e.size)
                        continue  # (a file read again for its words alone needs no server: reanalyse.py)
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
                    self.add_file(e, raw, sha, s.id if s else None, store.file_rows(s.id) if s else [], parsed)
                prog.read(e.size)
                self.feed.tick("file")
        finally:
            ahead.close()  # stops the workers now, even when the loop ends in an error
        for s in gone:
            if s.id not in moved_ids:
                report.deleted += 1
                self.delete_file(s.id)
        if only is None and not self.batch.pending:
            ses.verify_space()  # nothing was sent to the server: still check it serves the index's space
        self.flush(final=True)


def _warm(ses) -> None:
    """Import what planning and committing a read file needs (numpy; the client when a server may
    answer): while the walking child parses the file, these load here instead of after it."""
    from folio.lexical import segments  # noqa: F401 - numpy

    if ses.target is not None and ses.server != "down":
        from folio import embed  # noqa: F401


def update(store, root: Path, target: Target | None, *, budget: int,
           entries: list[Entry] | Listing | None = None, only: list[str] | None = None, progress=None,
           report: Report | None = None, on_wait=None) -> Report:
    """Bring the store up to date with the files under root (or only the paths in `only`).
    `entries`: the listed files, or a Listing taken when first needed."""
    report = report or Report()
    report.root = str(root)
    warned = len(report.warnings)
    down = None  # the failure that ended an earlier pass of this run (see Session.down)
    for _attempt in range(3):
        del report.warnings[warned:]
        ix = Indexer(store, root, target, budget, report, progress, renew=only is None, full=only is None,
                     on_wait=on_wait, down=down)
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
    raise FolioError("the embeddings server changed its vector space twice during one run; run `folio index` again")


def run(root: Path, settings, *, rebuild: bool = False, wait: bool = True, on_wait=None, progress=None,
        budget_flag: int | None = None, keep_space: bool = False, ahead: WalkAhead | None = None,
        embed: bool = True) -> Report:
    """`folio index`: walk, update, merge this run's lexical segments, compact when worth it.
    keep_space: embed with the endpoint and model the index recorded, whatever the settings name
    now (`folio mcp`'s index tool: an agent's update never moves an index to another space).
    embed=False: the lexical plane only, no request to the server; what it left without vectors
    waits for the next run that embeds (a live index's first pass: folio.watch).
    ahead: the tree's listing, started by the caller before its imports (cli.index); run closes it."""
    from folio import space
    from folio import store as storemod

    t0 = time.perf_counter()
    report = Report()
    report.root = str(root)
    waited = []

    def waiting(sentence: str) -> None:
        waited.append(sentence)
        if on_wait:
            on_wait(sentence)

    try:
        lock = storemod.acquire_lock(root, wait=wait, on_wait=waiting)
    except BaseException as e:
        if ahead is not None:
            ahead.close()
        if isinstance(e, storemod.LockBusy):
            from folio.surface import mcp

            again = ("call the index tool again after it finishes" if mcp() else
                     "run `folio index` again after it finishes, or without --no-wait to wait for it")
            raise FolioError(f"{e}; it leaves the index at least as fresh as this run would: {again}") from None
        raise
    # The tree is listed in a child while the store is opened and its stamps read; a run that waited
    # for another writer lists it again, as it is once its turn comes.
    if ahead is None or waited:
        if ahead is not None:
            ahead.close()
        ahead = WalkAhead(root, settings["extensions"], settings["exclude"])
    try:
        if rebuild:
            report.notices += storemod.discard(root)  # under the lock: start from nothing (what it left, said)
        st = storemod.Store.open(root, write=True)
    except BaseException:
        ahead.close()
        lock.release()
        raise
    st.hold(lock)
    from folio.running import Publisher

    progress = Publisher(lock, progress)  # how far the run is, for queries and `folio status` meanwhile
    try:
        st.reload_meta()
        st.recover()
        st.check()  # a damaged index is refused with the fix, never built upon
        st.forget_credentials()
        if keep_space and st.meta.endpoint:
            target, decision = space.recorded_target(settings, st.meta)
        else:
            target, decision = space.target(settings, st.meta)  # the index keeps what built it unless told
        if decision.configured and not decision.send:
            report.notices.append(f"an API key is configured but {decision.reason}")
        if decision.configured and not decision.send:
            target.key_withheld = decision.reason
        if not embed:
            target = None
        recorded = st.meta.budget
        budget = space.budget(settings, st.meta, budget_flag).chars
        if recorded and recorded != budget:
            report.notices.append(f"the section budget changes from {recorded} to {budget} characters: "
                                  f"every file is divided again (unchanged sections keep their vectors)")
            st.reread_all()
        reanalysing = reanalyse.begin(st, report.notices)
        timing.lap("open")
        before = st.segment_names()
        fresh = st.next_slot() == 0
        listing = Listing(ahead)
        try:
            update(st, root, target, budget=budget, entries=listing, progress=progress, report=report,
                   on_wait=on_wait)
        except FolioError as e:
            from folio.embed import EndpointError

            if isinstance(e, EndpointError) and e.status in (401, 403) and decision.configured and not decision.send:
                raise FolioError(f"{e}; your API key was {decision.reason}") from None
            raise
        timing.lap("plan")
        report.warnings[:0] = listing.warnings + nesting(root)  # the tree's own, ahead of the files'
        _finish(st, before, report, fresh)
        if reanalysing:
            reanalyse.finish(st, before)
        st.save_clean()  # the next run's stat prefilter reads it whole (Store.clean_stamps)
        timing.lap("finish")
        report.model, report.endpoint = st.meta.model or "", st.meta.endpoint or ""
        if report.unreadable and not st.counts()["sections"]:
            report.error = (f"nothing could be indexed: {report.unreadable} of the {report.files} Markdown files "
                            f"under {root} could not be read as text and the rest hold no sections (see the "
                            f"warnings above); fix those files or leave them out with `exclude:` in folio.yaml")
        if report.files == 0:
            report.notices.append(f"no Markdown files under {root} (extensions: {', '.join(settings['extensions'])})")
    except Exception as e:
        from folio.errors import disk_full, full_sentence

        if disk_full(e):  # every batch before it is committed; the matrix tail past it is recovered
            raise FolioError(full_sentence(e, st.dir / "index.db", st.kept())) from None
        raise
    finally:
        ahead.close()
        progress.close()
        st.close()
    report.seconds = time.perf_counter() - t0
    return report


def refresh(reader, paths: set[str], settings, deadline: float | None = None) -> tuple[bool, str]:
    """A query's refresh: bring the files behind its stale rows up to date, in the index's own
    space, under the write lock taken without waiting (a query never waits for a writer), every
    request to the server ended by `deadline` (time.monotonic(): the query's `query_timeout`).
    `reader`: the query's open store. Returns (whether the index moved, the query's notice)."""
    from folio import space
    from folio.embed import EndpointError
    from folio.planes import past, waits
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
            if meta.endpoint and w.dim:
                target, _decision = space.recorded_target(settings, meta)
                target.deadline = deadline
            before = w.segment_names()
            rep = update(w, root, target, budget=int(meta.budget or settings["max_chars"]),
                         only=sorted(paths))
            merge_segments_of_run(w, before)
        finally:
            w.close()
    except FolioError as e:
        if isinstance(e, EndpointError) and past(e, deadline):
            return False, (f"({len(paths)} of the files behind this result changed; the embeddings server at "
                           f"{reader.meta.endpoint} did not embed them {waits(settings)}: those rows are marked (stale); `folio index` re-indexes them)")
        return False, (f"{len(paths)} of the files behind this result changed and could not be "
                       f"re-indexed ({e}); those rows are marked (stale)")
    except Exception as e:
        from folio.errors import disk_full, full_reason

        if not disk_full(e):
            raise
        why, fix = full_reason(e, reader.dir / "index.db")
        return False, (f"{len(paths)} of the files behind this result changed and could not be re-indexed "
                       f"({why}), so those rows are marked (stale) and the index is as it was: {fix} and run "
                       f"`folio index`")
    finally:
        lock.release()
    # The index moved even when another writer had already caught up: the query ranks again.
    # "re-embedded" only when a section was: lines inserted above unchanged sections move their
    # ranges, and their vectors are kept (no request to the server).
    files = rep.changed + rep.new
    how = (f"{files} file(s) re-embedded before answering" if rep.embedded else
           f"{files} file(s) re-indexed before answering, nothing re-embedded (the sections' texts are "
           f"unchanged: only their lines moved)") if files or not rep.deleted else ""
    return True, (f"({len(paths)} of the files behind this result had changed; " + how
                  + (f"{', ' if how else ''}{rep.deleted} gone" if rep.deleted else "") + ")")


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
    live = st.live_count()
    dead = st.next_slot() - live
    if (dead > live and dead > 64) or (fresh and dead):
        from folio.lexical.segments import merge_segments

        report.compacted = st.compact(merge_segments)
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

    from folio.lexical.segments import merge_segments

    victims = names[-k:]
    slots, _ = st.live(vectors_only=False)
    live = np.zeros(st.next_slot(), dtype=bool)
    live[slots] = True
    segs = dict(zip(names, st.lex_segments(), strict=False))
    # written as it is merged: a first run's merge is the whole corpus's plane (store.SegmentWriter)
    st.replace_segments(lambda sink: merge_segments([segs[n] for n in victims], live, sink=sink), victims)


def _tail_to_merge(sizes: list[int]) -> int:
    """How many of the newest segments to merge: reach back while the next older segment is at most
    four times what has been gathered, so each posting is rewritten O(log n) times overall."""
    total, k = sizes[-1], 1
    while k < len(sizes) and sizes[-k - 1] <= 4 * total:
        total += sizes[-k - 1]
        k += 1
    return k
