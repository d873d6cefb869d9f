"""The query's steps: open the indexes, score, make rows, check freshness, refresh, rank again.

A query uses the endpoint and model the index recorded, sends the fingerprint probe in the same
request as the question, scans the whole memory-mapped matrix with one product, and stats only the
files behind the rows it returns. When the recorded endpoint does not answer it ranks with the
lexical plane and says so. The steps' work has its own modules: planes.py (the plane in force and
every slot's score: embedding, scan, BM25F, fusion, filters, shadowing), rows.py (merging touching
records, ties, file order), lexical/scoring.py (the confidence block's statistics). Owns the order
of the steps, the Session a query runs in (stores and clients kept open for `folio mcp`), the
partial-index notices, the freshness check and refresh, and the Answer.
Must not print: notices travel in the Answer. Each step returns what it found (the Answer is
assembled once, at the end); stage times go to folio.timing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from folio import planes, reanalyse, timing
from folio.errors import FolioError
from folio.rows import common_trail, select
from folio.window import Inexact


@dataclass(frozen=True)
class Hit:
    root: Path
    path: str  # root-relative
    start: int
    end: int
    trail: tuple[str, ...]
    score: float
    frontmatter: dict
    freshness: str  # current | stale | missing
    sha: str
    slots: tuple[int, ...]
    pieces: int = 1
    ranks: dict = field(default_factory=dict)  # component ranks (hybrid)


@dataclass
class Answer:
    query: str
    mode: str
    model: str
    endpoint: str
    roots: list[Path]
    hits: list[Hit] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    dropped: int = 0
    confidence: dict | None = None
    server_failed: bool = False  # the recorded endpoint failed: ranked lexically, nothing refreshed
    feedback: bool = False  # the semantic plane ranked a second time from the first pass's best (feedback.py)
    facets: tuple[str, ...] = ()  # the agent's facets that ranked beside the question (facets.py)


@dataclass(frozen=True)
class Request:
    text: str
    limit: int = 5
    where: tuple[str, ...] = ()
    exclude_pointed_by: tuple[str, ...] = ()
    identity: str = "id"
    refresh: bool = True
    mode: str = "hybrid"  # hybrid | semantic | lexical
    want_confidence: bool = False
    words: str | None = None  # an agent's facets (facets.py): the words the answer likely holds
    passages: tuple[str, ...] = ()  # and passages written as the answer would be


@dataclass(frozen=True)
class _Ranking:
    """One ranking over every corpus: its rows, and what the filters and nesting did to it."""
    hits: list[Hit]
    dropped: int = 0  # documents dropped by --exclude-pointed-by
    hints: list = field(default_factory=list)  # why filters left little or nothing
    notices: list[str] = field(default_factory=list)  # files ranked once though two indexes hold them
    facets: tuple[str, ...] = ()  # the facets that ranked beside the question
    aside: bool = False  # feedback stepped aside: the first pass was decisive (evidence.py)


def freshness(root: Path, stamp: dict | None) -> str:
    """current | stale | missing for one file behind a result, decided as `folio show` decides it.

    A size other than stamped is stale at once. Anything else is decided by the bytes: the file is
    read and hashed against the stamp's SHA-256, whether its mtime moved (a `touch`, a checkout: the
    same text, line ranges that hold) or not (an edit that restores both, `touch -r`, or one inside
    a clock tick). Only the few files behind the returned rows are read, never the tree."""
    import hashlib

    from folio.walk import read_bytes, stat_file

    if stamp is None:
        return "missing"
    st = stat_file(root, stamp["path"])
    if st is None:
        return "missing"
    if st[0] != stamp["size"]:
        return "stale"
    if not stamp.get("sha256"):  # due to be divided or embedded anew (Store.reread_all): only the stat can tell
        return "current" if st[1] == stamp["mtime_ns"] else "stale"
    try:
        raw = read_bytes(root, stamp["path"])
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "stale"
    return "current" if hashlib.sha256(raw).hexdigest() == stamp["sha256"] else "stale"


def check_files(root: Path, files: dict[int, dict]) -> dict[int, str]:
    """The freshness check: file id -> current | stale | missing, one stat (and one read) per
    distinct file behind the returned rows (never a walk of the tree)."""
    return {fid: freshness(root, f) for fid, f in files.items()}


def run(roots: Path | list[Path], req: Request, settings) -> Answer:
    """One query over one corpus or several (one ranking; see planes.check_together for what may be mixed):
    a session opened for this one question."""
    with Session(roots, settings) as session:
        answer = session.query(req)
    timing.lap("close")  # unmapping the matrix: the bare script pays it at exit
    return answer


REFRESH_ROUNDS = 3  # refreshes of one question at most: each takes only files no earlier one took
REBUILT_TRIES = 4  # questions asked of an index rebuilt under them before folio says it keeps changing
REBUILT_WAIT = 2.0  # seconds a removed index.db is waited for (a rebuild makes it anew at once)


class Session:
    """What a query keeps open: each corpus's store (its matrix mapped; slot map, frontmatter and
    lexical plane cached by the store) and one embeddings client per recorded endpoint (one
    keep-alive connection). The one-shot CLI opens a session for one question; `folio mcp` keeps
    one for its life. Nothing is trusted across questions: each query re-reads the index's meta
    (reopening it when another process rebuilt it), sends the fingerprint probe with the question,
    stat-checks the files behind its rows and refreshes them, exactly as a fresh process would.
    """

    def __init__(self, roots: Path | list[Path], settings):
        self.roots = _distinct(roots)
        self.settings = settings
        self._stores: list = [None] * len(self.roots)
        self._ids: list = [None] * len(self.roots)  # (st_dev, st_ino) of each open index.db
        self._clients: dict[tuple, object] = {}
        self._left: dict[Path, str] = {}  # during a question: corpora it leaves out (damaged), and why

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for i, store in enumerate(self._stores):
            if store is not None:
                store.close()
                self._stores[i] = None
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def stores(self, without=()) -> list:
        """Every corpus's store, current: opened on first use; on later use its meta re-read (another
        process's index or compaction is seen) or, when index.db was replaced (`--rebuild`, removal),
        opened anew, so no cache outlives the index it came from. `without`: roots left out (a
        listing that found their index damaged: ls.leaving_out_damaged)."""
        from folio.store import Store, identity

        for i, root in enumerate(self.roots):
            if root in self._left or root in without:
                continue
            store = self._stores[i]
            ident = identity(root)
            if store is not None and ident is not None and ident == self._ids[i]:
                store.reload_meta()
                continue
            if store is not None:
                store.close()
                self._stores[i] = None
            self._stores[i] = Store.open(root)
            self._ids[i] = ident
        return [store for root, store in zip(self.roots, self._stores, strict=True)
                if root not in self._left and root not in without]

    def client(self, store):
        """The client for a store's recorded endpoint and model (a key withheld is said in its
        refusals); made once per session, it keeps its connection alive between questions."""
        from folio import space
        from folio.embed import Client

        target, _ = space.recorded_target(self.settings, store.meta)
        key = (target.endpoint, target.model, store.dim, target.api_key)
        client = self._clients.get(key)
        if client is None:
            client = Client(target.endpoint, target.model, api_key=target.api_key, dim=store.dim,
                            connect_retries=1, busy_retries=3, slow_retries=1,
                            timeout=min(self.settings["timeout"], 30), key_withheld=target.key_withheld,
                            wait_loading=False, recorded=True)
            self._clients[key] = client
        return client

    def query(self, req: Request, deadline: float | None = None) -> Answer:
        """The answer to a question. An index removed or rebuilt while the question read it (another
        process's `folio index --rebuild`) is not damage: the question is asked again of the index
        there now, and answered from what it holds. Over several corpora, one whose index is damaged
        is left out (a notice says which, and the fix) and the question asked again of the others.
        `deadline` (time.monotonic()): when its requests to the server end; by default `query_timeout`
        from now."""
        return self.asked(lambda: self._query(req, deadline))

    def asked(self, attempt, needed: Path | None = None):
        """What `attempt()` (a ranking over self.stores(): a query's, or similar's) returns, asked again
        of the index there now when one was removed or rebuilt under it, and of the other corpora when
        one's index is damaged (left out: left_out() gives the notices to say). `needed`: a corpus it
        cannot go without (similar's source's), whose damage is the error, naming its index."""
        try:
            return self._asked(attempt, needed)
        finally:
            self._left.clear()  # the next question looks at every corpus again (it may have been rebuilt)

    def left_out(self) -> list[str]:
        """During asked(): the notices of the corpora left out, their index damaged."""
        return list(self._left.values())

    def _asked(self, attempt, needed: Path | None):
        import time

        from folio.errors import FolioError
        from folio.store import identity, sqlite_damage

        give_up, tries = time.monotonic() + REBUILT_WAIT, 0
        while True:
            before = [identity(root) for root in self.roots]
            try:
                return attempt()
            except Exception as e:  # folio's sentence, or SQLite's on a page it could not read (sqlite_damage)
                if not isinstance(e, FolioError) and not sqlite_damage(e):
                    raise
                how = self._rebuilding(before, e)
                if how is None and self._leave_out(e, needed):
                    continue
                if how is None:
                    raise
                tries += how == "rebuilt"
                if time.monotonic() > give_up or tries >= REBUILT_TRIES:
                    if how == "building":
                        raise  # no index came: the error as it was ("no index at ...")
                    raise FolioError(self._rebuilt_sentence()) from None
                time.sleep(0.05)

    def _rebuilding(self, before: list, error) -> str | None:
        """Why a failed question may succeed if asked again: "rebuilt" when an index.db was removed or
        replaced since `before` (or since its store was opened); "building" when there is no index
        (yet) where a writer has been (its lock is there): a rebuild between its removal and its new
        index.db, or a first run about to commit its schema. None: the error stands."""
        from folio.store import NoIndex, identity, index_dir

        now = [identity(root) for root in self.roots]
        if any(n != b or (opened is not None and n != opened)
               for b, n, opened in zip(before, now, self._ids, strict=True)):
            return "rebuilt"
        if isinstance(error, NoIndex) and any((index_dir(root) / "write.lock").exists() for root in self.roots):
            return "building"
        return None

    def _leave_out(self, error, needed: Path | None = None) -> bool:
        """Whether the question can go on without the corpus whose index `error` says is damaged (a
        Damaged, a part still missing after the reads again: store.Vanished, or SQLite's error on a
        page it could not read, pinned by store.damage_among): one of several, not the last one left
        and not `needed`. The last one's (or `needed`'s) SQLite error is raised as the sentence naming
        its index."""
        from folio.store import damage_among

        kept = [root for root in self.roots if root not in self._left]
        found = damage_among(error, kept)
        if found is None:
            return False
        root, said = found
        if len(kept) == 1 or root == needed:
            if said is not error:
                raise said from None
            return False
        self._left[root] = f"{said}; until then this ranking leaves out the corpus at {root}"
        i = self.roots.index(root)
        if self._stores[i] is not None:
            self._stores[i].close()
            self._stores[i] = None
        return True

    def _rebuilt_sentence(self) -> str:
        from folio.store import identity, index_dir

        gone = [root for root in self.roots if identity(root) is None]
        where = index_dir((gone or self.roots)[0])
        how = "removed, and no index is there now" if gone else "rebuilt again and again"
        return (f"the index at {where} was {how} while this query read it (a `folio index --rebuild` under way, or "
                f"a removal): run the query again once that run has committed")

    def _query(self, req: Request, deadline: float | None = None) -> Answer:
        import time

        # Every request this question makes to the server (its vector, the refresh of the files
        # behind its rows) ends by then; past it the query answers from what it has.
        deadline = deadline or time.monotonic() + self.settings["query_timeout"]
        if req.where or req.exclude_pointed_by:
            from folio import filters

            filters.parse(req.where, req.exclude_pointed_by, req.identity)  # refused (exit 2) before any request
        corpora = self.stores()
        first = corpora[0].meta
        model, endpoint = first.model or "", first.endpoint or ""
        planes.check_together(corpora, semantic=False)
        plane = planes.query_vectors(corpora, req, self, deadline)
        notices = self.left_out()
        notices += [plane.notice] if plane.notice else []
        notices += plane.left_out
        notices += _partial(corpora, plane.mode) + reanalyse.notice(corpora, plane.question.share)
        ranking = settled(lambda: _rank(corpora, req, plane))
        _add(notices, ranking.notices)
        if req.refresh:
            # A refresh can lift rows from files no round has checked yet (a changed file's row falls
            # and a deleted one's rises): each round refreshes only files not refreshed before, so
            # the rows printed are current unless a round could not make them so (marked then).
            tried: set = set()
            for _round in range(REFRESH_ROUNDS):
                moved, said = self._refresh(corpora, ranking.hits, plane, deadline, tried)
                notices += said
                if not moved:
                    break
                ranking = settled(lambda: _rank(corpora, req, plane))
                _add(notices, ranking.notices)
        confidence = None
        if req.want_confidence and len(corpora) == 1:
            ranking, confidence = settled(lambda: _confidence(corpora[0], req, ranking, plane))
            _add(notices, ranking.notices)
            confidence = _half_built(corpora[0], confidence)
            timing.lap("confidence")
        return Answer(req.text, plane.mode, model, endpoint, self.roots, hits=ranking.hits, notices=notices,
                      hints=ranking.hints, dropped=ranking.dropped, confidence=confidence,
                      server_failed=plane.server_failed, feedback=plane.feedback is not None and not ranking.aside,
                      facets=ranking.facets)

    def _refresh(self, corpora: list, hits: list[Hit], plane: planes.Plane,
                 deadline: float | None, tried: set) -> tuple[bool, list[str]]:
        """Re-index the files behind rows that are not current and not in `tried` (root, path: an
        earlier round's; they join it), per corpus (indexer.refresh, every request to the server
        ended by `deadline`): (whether any index moved, so the question ranks again; the notices)."""
        stale: dict[int, set[str]] = {}
        for h in hits:
            if h.freshness != "current" and (h.root, h.path) not in tried:
                tried.add((h.root, h.path))
                stale.setdefault([store.root for store in corpora].index(h.root), set()).add(h.path)
        if not stale:
            return False, []
        from folio import indexer

        if plane.server_failed:
            return self._refresh_offline(corpora, stale)

        moved, notices = False, []
        for i, paths in sorted(stale.items()):
            done, notice = indexer.refresh(corpora[i], paths, self.settings, deadline)
            notices.append(notice)
            if done:
                corpora[i].reload_meta()
                moved = True
        return moved, notices


    def _refresh_offline(self, corpora: list, stale: dict[int, set[str]]) -> tuple[bool, list[str]]:
        moved, notice, _kept = refresh_offline(corpora, stale, self.settings)
        return moved, [notice]


def refresh_offline(corpora: list, stale: dict[int, set[str]], settings,
                    listing: bool = False) -> tuple[bool, str, set]:
    """Changed files (per corpus index, root-relative paths) brought up to date without the server:
    the question got no vector, or the command needs none (`folio ls`). A changed file whose
    sections' texts are all unchanged (lines inserted above them, a frontmatter edit) needs no
    vector, and a gone file none: each file is refreshed on its own with a deadline already past (a
    request to the server fails at once), so those move and the rest stay stale. Returns (whether
    an index moved, the notice, the (corpus index, path) pairs left stale)."""
    import time

    from folio import indexer

    moved, kept, held, waiting = 0, set(), [], 0
    for i, paths in sorted(stale.items()):
        why = indexer.held_back(corpora[i])
        if why:  # not the server's doing: say whose index, and why
            kept |= {(i, path) for path in paths}
            held.append(f"{len(paths)} not re-indexed, as {why}")
            continue
        for path in sorted(paths):
            done, _notice = indexer.refresh(corpora[i], {path}, settings, time.monotonic() - 1)
            if done:
                corpora[i].reload_meta()
                moved += 1
            else:
                kept.add((i, path))
                waiting += 1
    parts = ([f"{moved} re-indexed without the server (nothing to embed: no section's text changed, or the "
              f"file is gone)"] if moved else [])
    parts += ([f"{waiting} not re-indexed, as their changed sections need the embeddings server, which "
               f"{'this command does not ask' if listing else 'did not answer'}"] if waiting else [])
    parts += held
    noun = "the indexed files" if listing else "the files behind this result"
    tail = ": those rows are marked (stale)" if kept else ""
    return moved > 0, f"({moved + len(kept)} of {noun} changed; {'; '.join(parts)}{tail})", kept


def _add(notices: list[str], more: list[str]) -> None:
    """Append the notices not said yet (a second ranking finds the same nesting again)."""
    notices += [n for n in more if n not in notices]


def _distinct(roots: Path | list[Path]) -> list[Path]:
    if isinstance(roots, Path):
        roots = [roots]
    out: list[Path] = []
    for r in roots:
        r = Path(r).resolve()
        if r not in out:
            out.append(r)
    if not out:
        raise FolioError("internal: a query needs at least one corpus root")
    return out


def _partial(corpora: list, mode: str) -> list[str]:
    """One notice per index that answers for only part of its corpus: files the last `folio index`
    never reached (it was stopped), and, when ranking by meaning, sections still without vectors
    (a run stopped, or its server failed, before embedding them): a silent partial ranking would look like a complete one."""
    from folio import running

    notices = []
    for store in corpora:
        parts = []
        walked = store.meta.unfinished
        run = running.current(store.root) if walked else None
        if walked:
            missing = walked - store.file_count()
            if missing > 0 and run:
                parts.append(f"{running.describe(run)}; until it reaches them, no ranking sees the {missing} of the "
                             f"{walked} files it found that it has not indexed yet")
            elif missing > 0:
                parts.append(f"the last `folio index` stopped before it reached {missing} of the {walked} files "
                             f"it found, so no ranking sees them")
        if mode != "lexical" and store.dim:
            waiting, files = store.pending_counts()
            if waiting:
                them, their = ("it", "its") if waiting == 1 else ("them", "their")
                how = f"only {their} words rank {them}" if mode == "hybrid" else f"this ranking leaves {them} out"
                parts.append(f"{waiting:,} of the {store.record_count():,} sections (in {files:,} "
                             f"file{'s' * (files != 1)}) {'have' if waiting != 1 else 'has'} no vectors yet, so {how}")
        if parts:
            where = "this index" if len(corpora) == 1 else f"the index at {store.root}"
            fix = ("it goes on by itself" if run else
                   "run `folio index` (with the embeddings server up) to finish it")
            notices.append(f"{where} is partial: {'; '.join(parts)}; {fix}")
    return notices


def settled(read):
    """Run a read; when a writer removed a file our snapshot named (it switched generations or
    merged segments under us), read again from a new snapshot instead of failing the query."""
    from folio.store import Vanished

    for attempt in range(3):
        try:
            return read()
        except Vanished:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _rank(corpora: list, req: Request, plane: planes.Plane) -> _Ranking:
    """One ranking over every corpus: each store's scores by slot (-inf where not a candidate),
    then the merged rows (rows.select) hydrated into Hits with their freshness."""
    import contextlib

    with contextlib.ExitStack() as snaps:
        for store in corpora:
            snaps.enter_context(store.snapshot())
        scored = planes.scores_by_slot(corpora, req, plane)
        floored = plane.mode == "lexical"  # a file's path and title score its every record alike (rows.py)
        try:
            rows = select(corpora, scored.dense, req.limit, scored.windowed, planes=scored.judges, floored=floored)
        except Inexact:  # the hybrid windows do not decide these rows: rank every record (window.py)
            scored = scored.full()
            rows = select(corpora, scored.dense, req.limit, planes=scored.judges, floored=floored)
        timing.lap("merge")
        files = files_of(corpora, rows)
    timing.lap("hydrate")
    hits = hits_of(corpora, rows, files)
    if scored.planes is not None:  # hybrid: where each row stood in each plane's own ranking
        hits = [replace(h, ranks=planes.component_ranks(scored.names, scored.planes[c], h.slots))
                for (c, _score, _group), h in zip(rows, hits, strict=True)]
    timing.lap("hydrate")
    return _Ranking(hits, scored.dropped, scored.hints, scored.notices, scored.facets, scored.aside)


def files_of(corpora: list, rows) -> list[dict]:
    """Per corpus, the files behind rows.select's rows (read inside the ranking's snapshot)."""
    return [store.files({r.file_id for c, _score, group in rows if c == i for r in group})
            for i, store in enumerate(corpora)]


def hits_of(corpora: list, rows, files: list[dict]) -> list[Hit]:
    """rows.select's rows as Hits, each with its file's freshness (one stat, and one read, per file)."""
    verdicts = [check_files(store.root, fs) for store, fs in zip(corpora, files, strict=True)]
    timing.lap("stat")
    hits = []
    for c, score, group in rows:
        f = files[c][group[0].file_id]
        hits.append(Hit(corpora[c].root, f["path"], group[0].start, group[-1].end, common_trail(group), score,
                        f["frontmatter"], verdicts[c][group[0].file_id], f["sha256"][:12],
                        tuple(r.slot for r in group), pieces=len(group)))
    return hits


def _confidence(store, req: Request, ranking: _Ranking, plane: planes.Plane) -> tuple[_Ranking, dict]:
    """(the ranking, its confidence block): coverage, missing words and support from the lexical
    statistics whatever ranked; separation from the scores that did rank (BM25F, or cosine with its
    own floor). A compaction since the ranking renumbered its slots: rank again (in a new snapshot)."""
    from folio.store import Vanished

    try:
        return ranking, _confidence_of(store, ranking, plane)
    except Vanished:
        ranking = _rank([store], req, plane)
    return ranking, _confidence_of(store, ranking, plane)


def _confidence_of(store, ranking: _Ranking, plane: planes.Plane) -> dict:
    import numpy as np

    from folio.lexical import scoring

    hits = ranking.hits
    with store.snapshot():
        _same_records(store, hits)
        col, live = planes.collection(store)
        rows = [h.slots for h in hits]  # a merged row counts as one, with all its pieces
        scores = np.array([h.score for h in hits], dtype=np.float64)
        # BM25F's own floor where BM25F scored the rows; a fusion (hybrid, or facets) has none
        floor = (scoring.DEFAULT_SEPARATION_FLOOR if plane.mode == "lexical" and not ranking.facets else
                 scoring.SEMANTIC_SEPARATION_FLOOR)
        verified = None if not hits else ("current" if hits[0].freshness == "current" else "stale")
        block = scoring.confidence(plane.question.text, rows, scores, col.segments, live, separation_floor=floor,
                                   doc_coverage_floor=scoring.DEFAULT_DOC_COVERAGE_FLOOR, verified=verified,
                                   col=col, terms=plane.question.distinct)
        return {**block, "verified": verified}  # in every block (null: no row), as --json documents it


def _half_built(store, confidence: dict) -> dict:
    """A ranking over an index that holds fewer than half the files its run found (a first `folio
    index` under way, or stopped) cannot be grounded, whatever its rows: the answer may be in a file
    not indexed yet. The band drops to partial, and the block says how much is indexed."""
    walked = store.meta.unfinished
    if not walked:
        return confidence
    held = store.file_count()
    if held * 2 >= walked:
        return confidence
    capped = {**confidence, "indexed_files": held, "found_files": walked}
    if capped["band"] in ("grounded", "weak"):
        capped["band"] = "partial"
    return capped


def _same_records(store, hits: list[Hit]) -> None:
    """Raise Vanished unless every hit's first slot still names the record it was ranked as (a
    compaction between two snapshots renumbers slots)."""
    from folio.store import Vanished

    rows = store.records([h.slots[0] for h in hits])
    files = store.files({r.file_id for r in rows.values()})
    for h in hits:
        r = rows.get(h.slots[0])
        if r is None or r.start != h.start or files[r.file_id]["path"] != h.path:
            raise Vanished(f"the index at {store.root} was compacted while this query read it")
