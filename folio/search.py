"""The query: embed, scan, filter, rank, check freshness, refresh once, rank again.

A query uses the endpoint and model the index recorded, sends the fingerprint probe in the same
request as the question, scans the whole memory-mapped matrix with one product, and stats only the
files behind the rows it returns. When the recorded endpoint does not answer it ranks with the
lexical plane and says so. Must not print: notices travel in the Answer. Each step returns what
it found (the Answer is assembled once, at the end); stage times go to folio.timing.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from folio import timing
from folio.errors import FolioError


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


@dataclass(frozen=True)
class Request:
    text: str
    limit: int = 5
    where: tuple[str, ...] = ()
    exclude_pointed_by: tuple[str, ...] = ()
    identity: str = "id"
    refresh: bool = True
    mode: str = "semantic"  # semantic | lexical | hybrid
    want_confidence: bool = False


@dataclass(frozen=True)
class _Plane:
    """How a question ranks: the mode in force, one query vector per corpus (None lexically), and
    why the semantic plane was given up (a notice), if it was."""
    mode: str
    qvecs: list
    notice: str | None = None
    server_failed: bool = False  # the recorded endpoint failed: nothing is refreshed


@dataclass(frozen=True)
class _Ranking:
    """One ranking over every corpus: its rows, and what the filters and nesting did to it."""
    hits: list[Hit]
    dropped: int = 0  # documents dropped by --exclude-pointed-by
    hints: list = field(default_factory=list)  # why filters left little or nothing
    notices: list[str] = field(default_factory=list)  # files ranked once though two indexes hold them


def freshness(root: Path, stamp: dict | None) -> str:
    """current | stale | missing for one file behind a result, decided as `folio show` decides it.

    A size or mtime other than stamped is stale at once. One as stamped proves nothing (an edit
    that restores both, `touch -r`, or one inside a clock tick), so the bytes decide: the file is
    read and hashed against the stamp's SHA-256. Only the few files behind the returned rows are
    read, never the tree."""
    import hashlib

    from folio.walk import read_bytes, stat_file

    if stamp is None:
        return "missing"
    st = stat_file(root, stamp["path"])
    if st is None:
        return "missing"
    if st != (stamp["size"], stamp["mtime_ns"]):
        return "stale"
    if not stamp.get("sha256"):  # due to be divided or embedded anew (Store.reread_all), unchanged since: the stat holds
        return "current"
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


def _embed_query(store, text: str, session: Session):
    """(query vector, None, False) or (None, why the server gave no usable query vector, whether it
    may come back by itself). The one rule for a query, whatever the server did (nothing listens,
    hung, busy, broken, refused, redirected, another model): the question is ranked from the
    lexical plane and one notice says what the server did and the fix; `folio index` stops on the
    same failures with the same sentence."""
    from folio import space
    from folio.embed import PROBE_TEXT, EndpointError, Failure

    meta = store.meta
    endpoint, model = meta.endpoint, meta.model
    client, decision = session.client(store)
    try:
        # The fingerprint was embedded as a document, the question goes as a query (the roles the
        # index recorded): one request when the two differ only in their prefixes.
        roles = space.recorded_roles(meta)
        if roles.query.fields == roles.document.fields:
            vecs = client.embed([roles.document.prefix + PROBE_TEXT, roles.query.prefix + text],
                                role=space.Role("", roles.query.fields))
        else:
            vecs = [client.embed([PROBE_TEXT], role=roles.document)[0],
                    client.embed([text], role=roles.query)[0]]
    except EndpointError as e:
        if e.kind == Failure.UNREACHABLE:
            return None, f"the recorded endpoint {endpoint} does not answer", True
        transient = e.kind in (Failure.BUSY, Failure.SLOW) or (e.kind == Failure.REFUSED and (e.status or 0) >= 500)
        why = f"{e}; your API key was {decision.reason}" if (
            e.status in (401, 403) and decision.configured and not decision.send) else str(e)
        return None, f"the recorded endpoint {endpoint} gave no query vector ({why})", transient
    if not space.same_space(vecs[0], space.fingerprint(meta)):
        return None, (f"the server at {endpoint} now answers in another vector space than the one this index was "
                      f"built in (model {model}); run `folio index` to re-embed with it, or restart the server on "
                      f"the model the index was built with"), False
    return vecs[1], None, False


def run(roots: Path | list[Path], req: Request, settings) -> Answer:
    """One query over one corpus or several (one ranking; see _check_together for what may be mixed):
    a session opened for this one question."""
    with Session(roots, settings) as session:
        answer = session.query(req)
    timing.lap("close")  # unmapping the matrix: the bare script pays it at exit
    return answer


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

    def stores(self) -> list:
        """Every corpus's store, current: opened on first use; on later use its meta re-read (another
        process's index or compaction is seen) or, when index.db was replaced (`--rebuild`, removal),
        opened anew, so no cache outlives the index it came from."""
        from folio.store import Store, index_dir

        for i, root in enumerate(self.roots):
            store = self._stores[i]
            try:
                st = (index_dir(root) / "index.db").stat()
                ident = (st.st_dev, st.st_ino)
            except OSError:
                ident = None
            if store is not None and ident is not None and ident == self._ids[i]:
                store.reload_meta()
                continue
            if store is not None:
                store.close()
                self._stores[i] = None
            self._stores[i] = Store.open(root)
            self._ids[i] = ident
        return list(self._stores)

    def client(self, store):
        """(client, key decision) for a store's recorded endpoint and model; the client is made once
        per session and keeps its connection alive between questions."""
        from folio import space
        from folio.embed import Client

        target, decision = space.recorded_target(self.settings, store.meta)
        key = (target.endpoint, target.model, store.dim, target.api_key)
        client = self._clients.get(key)
        if client is None:
            client = Client(target.endpoint, target.model, api_key=target.api_key, dim=store.dim,
                            connect_retries=1, busy_retries=3, slow_retries=1,
                            timeout=min(self.settings["timeout"], 30))
            self._clients[key] = client
        return client, decision

    def query(self, req: Request) -> Answer:
        if req.where or req.exclude_pointed_by:
            from folio import filters

            filters.parse(req.where, req.exclude_pointed_by, req.identity)  # refused (exit 2) before any request
        corpora = self.stores()
        first = corpora[0].meta
        model, endpoint = first.model or "", first.endpoint or ""
        _check_together(corpora, semantic=False)
        plane = _query_vectors(corpora, req, self)
        notices = [plane.notice] if plane.notice else []
        notices += _partial(corpora, plane.mode)
        ranking = _settled(lambda: _rank(corpora, req, plane))
        _add(notices, ranking.notices)
        if req.refresh:
            moved, said = self._refresh(corpora, ranking.hits, plane)
            notices += said
            if moved:
                ranking = _settled(lambda: _rank(corpora, req, plane))
                _add(notices, ranking.notices)
        confidence = None
        if req.want_confidence and len(corpora) == 1:
            ranking, confidence = _settled(lambda: _confidence(corpora[0], req, ranking, plane))
            _add(notices, ranking.notices)
            timing.lap("confidence")
        return Answer(req.text, plane.mode, model, endpoint, self.roots, hits=ranking.hits, notices=notices,
                      hints=ranking.hints, dropped=ranking.dropped, confidence=confidence,
                      server_failed=plane.server_failed)

    def _refresh(self, corpora: list, hits: list[Hit], plane: _Plane) -> tuple[bool, list[str]]:
        """Re-index the files behind rows that are not current (indexer.refresh, per corpus): (whether
        any index moved, so the question ranks again; the notices)."""
        stale: dict[int, set[str]] = {}
        for h in hits:
            if h.freshness != "current":
                stale.setdefault(self.roots.index(h.root), set()).add(h.path)
        if not stale:
            return False, []
        if plane.server_failed:
            return False, [f"({sum(map(len, stale.values()))} of the files behind this result changed; not "
                           f"re-indexed while the server fails: those rows are marked (stale))"]
        from folio import indexer

        moved, notices = False, []
        for i, paths in sorted(stale.items()):
            done, notice = indexer.refresh(corpora[i], paths, self.settings)
            notices.append(notice)
            if done:
                corpora[i].reload_meta()
                moved = True
        return moved, notices


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


def _check_together(corpora: list, *, semantic: bool) -> None:
    """Refuse, naming the corpus, to rank indexes whose rows are not comparable: another budget
    (records cut at other places) or, for semantic ranking, another dimension or vector space."""
    from folio import space

    if len(corpora) < 2:
        return
    a = corpora[0]
    for b in corpora[1:]:
        ba, bb = a.meta.budget, b.meta.budget
        if ba and bb and ba != bb:
            raise FolioError(
                f"cannot rank {a.root} and {b.root} together: {b.root} was divided into records at a budget "
                f"of {bb} characters and {a.root} at {ba}; run `folio index {b.root} --max-chars {ba}` so "
                f"both use one budget")
        if not semantic:
            continue
        if a.dim != b.dim:
            raise FolioError(
                f"cannot rank {a.root} and {b.root} together: {b.root} holds {b.dim}-dimensional vectors "
                f"({_space(b)}) and {a.root} {a.dim}-dimensional ones ({_space(a)}); run "
                f"`folio index {b.root} --endpoint {a.meta.endpoint} --model {a.meta.model}` "
                f"to embed both with one model, or query them separately")
        ra, rb = space.recorded_roles(a.meta), space.recorded_roles(b.meta)
        if (ra.query, ra.document) != (rb.query, rb.document):
            side = "document" if ra.document != rb.document else "query"
            raise FolioError(
                f"cannot rank {a.root} and {b.root} together: {b.root} was indexed with the {side} role "
                f"{getattr(rb, side).describe()} and {a.root} with {getattr(ra, side).describe()}; run "
                f"`folio index {b.root}` with the role settings {a.root} uses (`folio config` there shows them), "
                f"or query them separately")
        if not space.same_space(space.fingerprint(a.meta), space.fingerprint(b.meta)):
            raise FolioError(
                f"cannot rank {a.root} and {b.root} together: {b.root} was embedded in another vector space "
                f"({_space(b)}) than {a.root} ({_space(a)}); run `folio index {b.root} --endpoint "
                f"{a.meta.endpoint} --model {a.meta.model}` to embed both with one model, or "
                f"query them separately")


def _space(store) -> str:
    return f"model {store.meta.model} at {store.meta.endpoint}"


def _query_vectors(corpora: list, req: Request, session: Session) -> _Plane:
    """The mode and one query vector per corpus. The question is embedded once per distinct
    recorded endpoint and model; any corpus without vectors, or an endpoint that does not answer,
    turns the whole query lexical (one ranking cannot mix planes), with a notice saying why."""
    if req.mode not in ("semantic", "hybrid"):
        return _Plane(req.mode, [None] * len(corpora))
    settings = session.settings
    empty = [s for s in corpora if not s.dim or not s.has_vectors()]
    if empty:
        which = "this index holds" if len(corpora) == 1 else f"the index at {empty[0].root} holds"
        return _Plane("lexical", [None] * len(corpora), notice=(
            f"{which} no vectors (no embeddings server answered when it was built): ranking lexically "
            f"(BM25F); to rank by meaning, start a server at {settings['endpoint']} "
            f"({settings.source('endpoint')}) and run `folio index`"))
    _check_together(corpora, semantic=True)
    timing.lap("records")
    by_space: dict[tuple, object] = {}
    qvecs = []
    for store in corpora:
        key = (store.meta.endpoint, store.meta.model, store.meta.roles)
        if key not in by_space:
            qvec, why, transient = _embed_query(store, req.text, session)
            if qvec is None:
                now = settings["endpoint"]
                return _Plane("lexical", [None] * len(corpora), server_failed=True, notice=(
                    f"{why}: ranking lexically (BM25F)" + (
                        f"; the config now names {now} ({settings.source('endpoint')})"
                        if now != store.meta.endpoint else " until it answers again" if transient else "")))
            by_space[key] = qvec
        qvecs.append(by_space[key])
    timing.lap("request")
    return _Plane(req.mode, qvecs)


def _partial(corpora: list, mode: str) -> list[str]:
    """One notice per index that answers for only part of its corpus: files the last `folio index`
    never reached (it was stopped), and, when ranking by meaning, sections still without vectors
    (the server failed during a run): a silent partial ranking would look like a complete one."""
    notices = []
    for store in corpora:
        parts = []
        walked = store.meta.unfinished
        if walked:
            missing = walked - store.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            if missing > 0:
                parts.append(f"the last `folio index` stopped before it reached {missing} of the {walked} files "
                             f"it found, so no ranking sees them")
        if mode != "lexical" and store.dim:
            waiting, files = store.pending_counts()
            if waiting:
                how = "only their words rank them" if mode == "hybrid" else "this ranking leaves them out"
                parts.append(f"{waiting} of the {store.record_count()} sections (in {files} files) have no "
                             f"vectors yet, so {how}")
        if parts:
            where = "this index" if len(corpora) == 1 else f"the index at {store.root}"
            notices.append(f"{where} is partial: {'; '.join(parts)}; run `folio index` (with the "
                           f"embeddings server up) to finish it")
    return notices


def _settled(read):
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


def _candidates(store, req: Request, vectors_only: bool, pointers=None) -> tuple:
    """(slots of the candidate records after filters and the precedence join, documents dropped by
    the join, the filters' hints)."""
    slots, file_ids = store.live(vectors_only=vectors_only)
    if not (req.where or req.exclude_pointed_by):
        return slots, 0, []
    from folio import filters

    keep, dropped, hints = filters.apply(store, slots, file_ids, req.where, req.exclude_pointed_by,
                                         req.identity, pointers)
    return slots[keep], dropped, hints


def _rank(corpora: list, req: Request, plane: _Plane) -> _Ranking:
    """One ranking over every corpus: each store's scores by slot (-inf where not a candidate),
    then the merged rows (_select) hydrated into Hits with their freshness."""
    import contextlib

    with contextlib.ExitStack() as snaps:
        for store in corpora:
            snaps.enter_context(store.snapshot())
        scored = _scores_by_slot(corpora, req, plane)
        rows = _select(corpora, scored.dense, req.limit)
        timing.lap("merge")
        files = [store.files({r.file_id for c, _score, group in rows if c == i for r in group})
                 for i, store in enumerate(corpora)]
    timing.lap("hydrate")
    verdicts = [check_files(store.root, fs) for store, fs in zip(corpora, files, strict=True)]
    timing.lap("stat")
    hits = []
    for c, score, group in rows:
        root = corpora[c].root
        f = files[c][group[0].file_id]
        hits.append(Hit(root, f["path"], group[0].start, group[-1].end, _common_trail(group), score,
                        f["frontmatter"], verdicts[c][group[0].file_id], f["sha256"][:12],
                        tuple(r.slot for r in group), pieces=len(group)))
    if scored.planes is not None:  # hybrid: where each row stood in each plane's own ranking
        hits = [replace(h, ranks=_component_ranks(scored.planes[c], h.slots))
                for (c, _score, _group), h in zip(rows, hits, strict=True)]
    timing.lap("hydrate")
    return _Ranking(hits, scored.dropped, scored.hints, scored.notices)


def _component_ranks(planes, slots: tuple[int, ...]) -> dict:
    """{plane: the best 1-based rank any piece of the row has in that plane, or None if none ranked}."""
    from folio.fusion import PLANES

    out = {}
    for name, r in zip(PLANES, planes, strict=True):
        got = [int(r[s]) for s in slots if s < len(r) and r[s] > 0]
        out[name] = min(got) if got else None
    return out


class _Scores(NamedTuple):
    dense: list  # per corpus, a float32 score for every slot
    planes: list | None  # hybrid: per corpus the component ranks, else None
    dropped: int
    hints: list
    notices: list[str]


def _scores_by_slot(corpora: list, req: Request, plane: _Plane) -> _Scores:
    """Per corpus a float32 score for every slot, and (hybrid) the component ranks.

    Scores are -inf for dead, vector-less, filtered and shadowed records (and, lexically, for
    records that share no term with the question). In hybrid mode both planes rank the same
    candidates (after filters, the join and shadowing) and fusion.fuse turns the two full
    rankings into one score; the component ranks (per corpus, (2, slots) in fusion.PLANES order)
    come back for --json. Merging and --limit then work on the fused scores as on any other.
    """
    import numpy as np

    mode = plane.mode
    dense, lexical_planes, dropped, hints = [], [], 0, []
    pointers, any_left = None, False
    if req.exclude_pointed_by and len(corpora) > 1:  # one join over every queried index
        from folio import filters

        pointers = filters.collect_pointers(corpora, req.exclude_pointed_by)
    for store, qvec in zip(corpora, plane.qvecs, strict=True):
        slots, gone, said = _candidates(store, req, vectors_only=(mode != "lexical"), pointers=pointers)
        timing.lap("records")
        any_left = any_left or len(slots) > 0
        dropped += gone
        hints += [h for h in said if h not in hints]
        if mode == "lexical":
            d = _lexical_dense(store, req.text, slots)
        else:
            m = store.matrix()
            full = m @ qvec.astype(np.float32)  # the whole memmap: cheaper than gathering live rows first
            d = np.full(len(full), -np.inf, dtype=np.float32)
            d[slots] = full[slots]
            if np.isnan(d).any():  # every stored row is finite and unit length: this one was overwritten
                from folio.store import corrupt

                raise corrupt(store.dir, f"{store.matrix_path().name} holds rows that are not numbers")
            if mode == "hybrid":
                lexical_planes.append(_lexical_dense(store, req.text, slots))
        dense.append(d)
        timing.lap("scan")
    if req.where and any_left and len(corpora) > 1:  # one index without a match is no empty result
        from folio import filters

        hints = [h for h in hints if not isinstance(h, filters.EmptyHint)]
    notices = _shadow_nested(corpora, dense)
    if mode != "hybrid":
        return _Scores(dense, None, dropped, hints, notices)
    from folio import fusion

    _shadow_nested(corpora, lexical_planes)
    fused, planes = fusion.fuse(dense, lexical_planes)
    return _Scores(fused, planes, dropped, hints, notices)


def _lexical_dense(store, text: str, slots):
    """BM25F score per slot: -inf outside `slots` and where the record shares no term with `text`."""
    import numpy as np

    scores = _lexical_scores(store, text, slots)
    d = np.full(store.next_slot(), -np.inf, dtype=np.float32)
    d[slots] = np.where(scores > 0, scores, -np.inf)
    return d


def _shadow_nested(corpora: list, dense: list) -> list[str]:
    """A file held by two of the queried indexes (one corpus inside another) is ranked once, from
    the inner index (the one `folio` run beside the file would use): its rows in the outer index's
    scores become -inf. Returns the notices saying how many."""
    import numpy as np

    notices = []
    for i, outer in enumerate(corpora):
        for j, inner in enumerate(corpora):
            if i == j or outer.root not in inner.root.parents:
                continue
            prefix = inner.root.relative_to(outer.root).as_posix() + "/"
            held = inner.stamps()
            twice = [s.id for p, s in outer.stamps().items() if p.startswith(prefix) and p[len(prefix):] in held]
            if not twice:
                continue
            shadowed = outer.slots_of_files(twice)
            dense[i][shadowed[shadowed < len(dense[i])]] = -np.inf
            note = (f"({len(twice)} file(s) are held by both {outer.root} and {inner.root}: each is ranked "
                    f"once, from {inner.root})")
            if note not in notices:
                notices.append(note)
    return notices


def _common_trail(group) -> tuple[str, ...]:
    trail = group[0].trail
    for r in group[1:]:
        n = 0
        while n < min(len(trail), len(r.trail)) and trail[n] == r.trail[n]:
            n += 1
        trail = trail[:n]
    return trail


ALIKE = 0.10  # pieces of one merged row score within this share of the run's best score of each other


def _select(corpora: list, dense: list, limit: int) -> list[tuple[int, float, list]]:
    """The `limit` best merged rows: (corpus index, score, records in file order).

    Winners come best first from a window (argpartition over every corpus's scores) that widens
    when used up; merge_touching turns them into rows. A row's score (the line-weighted mean of
    its pieces) is never above its seed's, so once `limit` rows exist and the next winner scores
    no more than the limit-th row, nothing later can place: stop there. Filters ran before
    (-inf), so neither merging nor filtering ever starves --limit.
    """
    import heapq

    import numpy as np

    flat = dense[0] if len(dense) == 1 else np.concatenate(dense)
    # Scores that print alike are alike: a BLAS product can give two identical rows scores an ulp
    # apart, so ranks compare scores at 6 decimals (what --json prints), and ties go by path, line.
    flat = np.round(flat, TIE_DECIMALS)
    offsets = np.cumsum([0] + [len(d) for d in dense])
    n = int(np.count_nonzero(np.isfinite(flat)))
    if n == 0:
        return []
    files = _FileOrder(corpora, dense)
    ties = _TieKeys(corpora)
    rows: list[tuple[int, float, list[int]]] = []

    def winners():
        window, given = min(n, max(2 * limit, limit + 8)), set()
        while True:
            order = _top(flat, window)
            owner = np.searchsorted(offsets, order, side="right") - 1
            order, owner = ties.order(order, owner, flat, offsets)
            for g, c in zip(order, owner, strict=True):
                if g in given:  # a wider window repeats the narrower one (ties may reorder)
                    continue
                given.add(g)
                if len(rows) >= limit and flat[g] <= round(heapq.nlargest(limit, (r[1] for r in rows))[-1],
                                                           TIE_DECIMALS):
                    return
                yield c, g - int(offsets[c])
            if window >= n:
                return
            window = min(n, window * 2)

    for c, group in merge_touching(winners(), files.score, files.neighbours, ALIKE * abs(float(flat.max()))):
        rows.append((c, files.mean(c, group), group))
    alike = [round(r[1], TIE_DECIMALS) for r in rows]
    if len(set(alike)) < len(alike):  # rows that score alike come in path and line order, however stored
        ties.fetch([(c, g[0]) for (c, _s, g), a in zip(rows, alike, strict=True) if alike.count(a) > 1])
    rows = [r for _a, r in sorted(zip(alike, rows, strict=True),
                                  key=lambda ar: (-ar[0], ties.key(ar[1][0], ar[1][2][0])))]
    rows = rows[:limit]
    records = [corpora[i].records([s for c, _, g in rows if c == i for s in g]) for i in range(len(corpora))]
    return [(c, score, [records[c][s] for s in g]) for c, score, g in rows]


def merge_touching(seeds, score, neighbours, tol: float):
    """Group winners into merged rows; pure, so the rule can be read (and tested) in one place.

    seeds: (corpus, slot) keys, best first (any iterable; read lazily). neighbours(key) ->
    (slot before, slot after) among the same file's records (None at either end); score(corpus,
    slot) -> float, or None for a record that is no candidate. Each seed not yet taken starts a
    row and grows over its touching neighbours, the better-scoring side first, while every piece
    of the row stays within `tol` of every other; a neighbour already in a row, or no candidate,
    stops the growth on that side. A neighbour may lie past the window: a row is then the same
    whatever --limit asked for. Yields (corpus, [slots in file order]) per row, in seed order.
    """
    taken: set = set()
    for c, slot in seeds:
        if (c, slot) in taken:
            continue
        taken.add((c, slot))
        lo = hi = score(c, slot)
        left, right = neighbours((c, slot))
        group = [slot]
        while True:
            options = []
            for side, nb in ((0, left), (1, right)):
                if nb is None or (c, nb) in taken:
                    continue
                s = score(c, nb)
                if s is not None and max(hi, s) - min(lo, s) <= tol:
                    options.append((s, side, nb))
            if not options:
                break
            s, side, nb = max(options)
            taken.add((c, nb))
            lo, hi = min(lo, s), max(hi, s)
            if side == 0:
                group.insert(0, nb)
                left = neighbours((c, nb))[0]
            else:
                group.append(nb)
                right = neighbours((c, nb))[1]
        yield c, group


TIE_DECIMALS = 6


class _TieKeys:
    """Equal scores rank by (path, start line, root), never by storage slot: an index built file by
    file over time and a clean build of the same files give the same order. Keys are read only for
    the records that tie (and kept in the store's memo while the index is unchanged)."""

    def __init__(self, corpora: list):
        self.corpora = corpora
        self.keys: list[dict[int, tuple]] = [_memo(s).setdefault("tie_keys", {}) for s in corpora]

    def fetch(self, pairs) -> None:
        need: dict[int, list[int]] = {}
        for c, slot in pairs:
            if slot not in self.keys[c]:
                need.setdefault(c, []).append(slot)
        for c, slots in need.items():
            store = self.corpora[c]
            recs = store.records(slots)
            paths = {fid: f["path"] for fid, f in store.files({r.file_id for r in recs.values()}).items()}
            for s in slots:
                r = recs.get(s)
                self.keys[c][s] = (paths.get(r.file_id, ""), r.start, str(store.root)) if r else ("", 0, "")

    def key(self, c: int, slot: int) -> tuple:
        return self.keys[c].get(slot, ())

    def order(self, order, owner, flat, offsets) -> tuple[list[int], list[int]]:
        """`order` (descending score) with each run of equal scores sorted by key."""
        vals = flat[order]
        order, owner = order.tolist(), owner.tolist()
        if len(vals) < 2 or not (vals[1:] == vals[:-1]).any():
            return order, owner
        runs, i = [], 0
        while i < len(order):
            j = i + 1
            while j < len(order) and vals[j] == vals[i]:
                j += 1
            if j - i > 1:
                runs.append((i, j))
            i = j
        self.fetch((owner[k], order[k] - int(offsets[owner[k]])) for a, b in runs for k in range(a, b))
        for a, b in runs:
            run = sorted(zip(order[a:b], owner[a:b], strict=True),
                         key=lambda go: self.key(go[1], go[0] - int(offsets[go[1]])))
            order[a:b], owner[a:b] = [g for g, _ in run], [c for _, c in run]
        return order, owner


class _FileOrder:
    """The records of the winners' files in line order, read once per file, for merge_touching.

    Records of one file touch when no other record of that file lies between them: the sectioner
    gives every non-blank line after the frontmatter to exactly one record (ranges only drop
    blank lines at their ends), so what separates two neighbours in the store is blank lines only.
    A neighbour that is no candidate (no vector yet, filtered out) still sits between: no touch.
    """

    def __init__(self, corpora: list, dense: list):
        self.corpora, self.dense = corpora, dense
        memos = [_memo(s) for s in corpora]  # kept while the index is unchanged
        self.lines: list[dict] = [m.setdefault("lines", {}) for m in memos]  # slot -> line count
        self.pos: list[dict] = [m.setdefault("file_order", {}) for m in memos]  # slot -> (file's slots, index)

    def _load(self, c: int, slot: int) -> None:
        rows = self.corpora[c].file_order(slot)
        if not rows:
            raise FolioError(f"the index at {self.corpora[c].root} changed under this query; run it again")
        order = [r[0] for r in rows]
        for i, (s, start, end) in enumerate(rows):
            self.lines[c][s] = end - start + 1
            self.pos[c][s] = (order, i)

    def score(self, c: int, slot: int) -> float | None:
        d = self.dense[c]
        v = float(d[slot]) if slot < len(d) else float("-inf")
        return v if v != float("-inf") else None

    def neighbours(self, key: tuple[int, int]) -> tuple[int | None, int | None]:
        c, slot = key
        if slot not in self.pos[c]:
            self._load(c, slot)
        order, i = self.pos[c][slot]
        return (order[i - 1] if i > 0 else None), (order[i + 1] if i + 1 < len(order) else None)

    def mean(self, c: int, group: list[int]) -> float:
        """The line-weighted mean score of a row's pieces."""
        total = weight = 0.0
        for s in group:
            lines = self.lines[c][s]
            total += self.score(c, s) * lines
            weight += lines
        return total / weight


def _top(scores, k: int, positive: bool = False):
    import numpy as np

    if positive:
        idx = np.flatnonzero(scores > 0)
        sub = scores[idx]
    else:
        idx = None
        sub = scores
    if len(sub) == 0:
        return np.zeros(0, dtype=np.int64)
    k = min(k, len(sub))
    part = np.argpartition(-sub, k - 1)[:k]
    if k < len(sub):  # every record tied with the k-th comes too: which of them made the cut is arbitrary
        part = np.flatnonzero(sub >= sub[part].min())
    part = part[np.argsort(-sub[part], kind="stable")]
    return part if idx is None else idx[part]


def _lexical_scores(store, text: str, slots):
    import numpy as np

    from folio import lexical

    # idf and lengths over every live record; only the candidates are returned.
    col, live = _collection(store)
    scores = lexical.score(lexical.analyze(text), col.segments, live, col=col)
    return np.asarray(scores, dtype=np.float32)[slots]


_MEMOS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _memo(store) -> dict:
    """What questions derive from the index alone (lexical collection statistics, tie keys, files'
    record order), kept per open store while the index is unchanged, so a warm session (`folio mcp`)
    pays for it once per state of the index rather than once per question. The store hands back the
    same live arrays until another connection commits (SQLite's data_version; a writer's store never
    keeps them): any `folio index`, refresh or compaction, by this process or another, is a commit,
    so the memo is keyed by those arrays' identity (holding them, so the identity cannot be reused)."""
    live = store.live(vectors_only=False)
    hit = _MEMOS.get(store)
    if hit is None or hit[0] is not live:
        hit = _MEMOS[store] = (live, {})
    return hit[1]


def _collection(store):
    """(lexical.Collection over every live record, the live mask by slot), from the memo."""
    import numpy as np

    from folio import lexical

    memo = _memo(store)
    segs = store.lex_segments()
    hit = memo.get("collection")
    if hit is not None and len(hit[0].segments) == len(segs) and all(
            a is b for a, b in zip(hit[0].segments, segs, strict=True)):
        return hit
    all_slots, _ = store.live(vectors_only=False)
    live = np.zeros(store.next_slot(), dtype=bool)
    live[all_slots] = True
    live.flags.writeable = False
    memo["collection"] = (lexical.Collection(segs, live), live)
    return memo["collection"]


def _confidence(store, req: Request, ranking: _Ranking, plane: _Plane) -> tuple[_Ranking, dict]:
    """(the ranking, its confidence block): coverage, missing words and support from the lexical
    statistics whatever ranked; separation from the scores that did rank (BM25F, or cosine with its
    own floor). A compaction since the ranking renumbered its slots: rank again (in a new snapshot)."""
    from folio.store import Vanished

    try:
        return ranking, _confidence_of(store, req, ranking.hits, plane.mode)
    except Vanished:
        ranking = _rank([store], req, plane)
    return ranking, _confidence_of(store, req, ranking.hits, plane.mode)


def _confidence_of(store, req: Request, hits: list[Hit], mode: str) -> dict:
    import numpy as np

    from folio import lexical

    with store.snapshot():
        _same_records(store, hits)
        col, live = _collection(store)
        rows = [h.slots for h in hits]  # a merged row counts as one, with all its pieces
        scores = np.array([h.score for h in hits], dtype=np.float64)
        floor = lexical.DEFAULT_SEPARATION_FLOOR if mode == "lexical" else lexical.SEMANTIC_SEPARATION_FLOOR
        verified = None if not hits else ("current" if hits[0].freshness == "current" else "stale")
        return lexical.confidence(req.text, rows, scores, col.segments, live, separation_floor=floor,
                                  doc_coverage_floor=lexical.DEFAULT_DOC_COVERAGE_FLOOR, verified=verified,
                                  col=col)


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
