"""How each plane scores a question: one float per slot and corpus, before any row is made.

The semantic plane embeds the question (once per recorded endpoint and model, with the fingerprint
probe in the same request) and scans the whole memory-mapped matrix with one product (with a
passage facet, both vectors in one read of it, split between threads: products); the lexical
plane scores BM25F over the segments (folio/lexical/); hybrid fuses the two full rankings
(fusion.py). Both rank the same candidates: live records after the filters, the precedence join and
the shadowing of files two queried indexes hold (in hybrid, a record without a vector yet is ranked
by the lexical plane alone, its lexical rank standing in for the semantic one: fusion.fuse). Owns the plane in force for a question (a corpus
without vectors or an endpoint that fails turns it lexical, with the notice saying why), which
indexes may rank together (one budget; for the semantic plane one space), the candidates, the
per-slot scores (-inf where a record is no candidate) and each row's component ranks. Must not
make rows (rows.py), read the files behind them or print.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

from folio import timing
from folio.errors import FolioError
from folio.memo import memo
from folio.surface import invoke


@dataclass(frozen=True)
class Plane:
    """How a question ranks: the mode in force, one query vector per corpus (None lexically), and a
    notice: why the semantic plane was given up, if it was, or that it ranked a cut question."""
    mode: str
    qvecs: list
    notice: str | None = None
    server_failed: bool = False  # the recorded endpoint failed: nothing is refreshed
    feedback: tuple | None = None  # feedback.Knobs when the semantic plane ranks a second time
    pvecs: list | None = None  # per corpus the passages' one vector (facets.py), when passages rank
    words: tuple | None = None  # the words facet's terms, when it ranks (facets.py)
    question: tuple | None = None  # the question analysed, once (lexical.analysis.Query)
    left_out: tuple[str, ...] = ()  # notices for the facets this plane cannot rank


def embed_query(store, text: str, session, deadline: float | None = None, passages: tuple[str, ...] = ()):
    """(vectors: the question's, then each passage's, None, False, a note or None) or (None, why the
    server gave no usable query vector, whether it may come back by itself, None). The passages (an
    agent's facet) go in the question's request, embedded as documents. A question or passage
    longer than the model takes is cut to fit and asked once more (the note says so); the lexical
    plane still reads all of it. The one rule for a query, whatever the server did (nothing listens,
    hung, busy, broken, refused, redirected, another model, no answer by `deadline`, a
    time.monotonic() value: the query's `query_timeout`): the question is ranked from the lexical
    plane and one notice says what the server did and the fix; `folio index` stops on the same
    failures with the same sentence."""
    from folio import space
    from folio.embed import EndpointError, Failure

    meta = store.meta
    endpoint, model = meta.endpoint, meta.model
    note = None
    try:
        client = session.client(store)
        roles = space.recorded_roles(meta)
        try:
            vecs = _ask(client, roles, text, passages, deadline)
        except EndpointError as e:
            if e.kind != Failure.TOO_LARGE or past(e, deadline):
                raise
            text, passages, note = _cut(text, passages, e, meta)
            if note is None:  # nothing of the question's was too long: the refusal stands
                raise
            vecs = _ask(client, roles, text, passages, deadline)
    except EndpointError as e:
        if past(e, deadline):
            return None, f"the embeddings server at {endpoint} gave no query vector {waits(session.settings)}", True, None
        if e.kind == Failure.UNREACHABLE:
            return None, f"the recorded endpoint {endpoint} does not answer", True, None
        transient = e.kind in (Failure.BUSY, Failure.SLOW) or (e.kind == Failure.REFUSED and (e.status or 0) >= 500)
        return None, f"the recorded endpoint {endpoint} gave no query vector ({e})", transient, None
    if not space.same_space(vecs[0], space.fingerprint(meta)):
        return None, (f"the server at {endpoint} now answers in another vector space than the one this index was "
                      f"built in (model {model}); {invoke('index')} to re-embed with it, or restart the server on "
                      f"the model the index was built with"), False, None
    return vecs[1:], None, False, note


def _ask(client, roles, text: str, passages: tuple[str, ...], deadline: float | None) -> list:
    """The probe's, the question's and each passage's vectors. The fingerprint and any passage are
    embedded as documents, the question as a query (the roles the index recorded): one request
    when the two differ only in their prefixes."""
    from folio import space
    from folio.embed import PROBE_TEXT

    docs = [PROBE_TEXT, *passages]
    if roles.query.fields == roles.document.fields:
        return client.embed([roles.document.prefix + docs[0], roles.query.prefix + text,
                             *(roles.document.prefix + p for p in passages)],
                            role=space.Role("", roles.query.fields), deadline=deadline)
    got = client.embed(docs, role=roles.document, deadline=deadline)
    return [got[0], client.embed([text], role=roles.query, deadline=deadline)[0], *got[1:]]


def _cut(text: str, passages: tuple[str, ...], refusal, meta) -> tuple[str, tuple[str, ...], str | None]:
    """The question and passages cut to what the model takes, from the server's refusal (the
    longest input's tokens against its limit) or else the index's recorded limit at ~2 characters a
    token, and the note that says so (with the fix: a shorter text ranks by all of it); None when
    none was longer than that."""
    longest = max([text, *passages], key=len)
    if refusal.tokens and refusal.limit and refusal.tokens > refusal.limit:
        keep = int(len(longest) * refusal.limit / refusal.tokens * 0.9)
        limit = refusal.limit
    else:
        limit = refusal.limit or meta.tokens or 512
        keep = 2 * limit
    keep = max(1, keep)

    def cut(t: str) -> str:
        if len(t) <= keep:
            return t
        head = t[:keep]
        return head.rsplit(None, 1)[0] if " " in head[keep // 2:] else head

    short, parts = cut(text), tuple(cut(p) for p in passages)
    which = [w for w, before, after in (("the question", [text], [short]), ("a passage", passages, parts))
             if any(len(a) < len(b) for a, b in zip(after, before, strict=True))]
    if not which:
        return text, passages, None
    words = ", and by words whole" if short != text else ""  # the lexical plane reads the whole question
    note = (f"({' and '.join(which)} ran past the {limit} tokens the model takes in one input: ranked by meaning "
            f"from its first {keep:,} characters or so{words}; shorten it to rank by meaning whole)")
    return short, parts, note


def past(e, deadline: float | None) -> bool:
    """Whether an EndpointError is the query's own deadline running out (the server may be busy
    with other work, such as an index run), not something the server did."""
    import time

    from folio.embed import Failure

    return deadline is not None and e.kind == Failure.SLOW and time.monotonic() >= deadline - 0.5


def waits(settings) -> str:
    """How long a query waited for the server, the setting that says so, and the fix."""
    return (f"in the {settings['query_timeout']} s a query waits for it (`query_timeout`; it may be busy, "
            f"e.g. with an index run; raise `query_timeout` to wait longer)")


def check_together(corpora: list, *, semantic: bool) -> None:
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


def query_vectors(corpora: list, req, session, deadline: float | None = None) -> Plane:
    """The mode and one query vector per corpus. The question is embedded once per distinct
    recorded endpoint and model (with the passages, if any), every request ended by `deadline`; any
    corpus without vectors, or an endpoint that does not answer in time, turns the whole query
    lexical (one ranking cannot mix planes), with a notice saying why. The facets the plane in
    force ranks are decided here, once (facets.in_force)."""
    from dataclasses import replace

    from folio import facets
    from folio.lexical.analysis import analyze, query

    plane = _vectors(corpora, req, session, deadline)
    words, passages, said = facets.in_force(plane.mode, req.words, req.passages)
    return replace(plane, words=tuple(analyze(req.words)) if words else None,
                   pvecs=plane.pvecs if passages else None, left_out=tuple(said), question=query(req.text))


def _vectors(corpora: list, req, session, deadline: float | None) -> Plane:
    if req.mode not in ("semantic", "hybrid"):
        return Plane(req.mode, [None] * len(corpora))
    settings = session.settings
    empty = [s for s in corpora if not s.dim or not s.has_vectors()]
    if empty:
        which = "this index holds" if len(corpora) == 1 else f"the index at {empty[0].root} holds"
        return Plane("lexical", [None] * len(corpora), notice=f"{which} no vectors{_why_none(empty[0], settings)}")
    check_together(corpora, semantic=True)
    timing.lap("records")
    from folio import facets

    passages = req.passages  # a semantic plane is asked for: every passage ranks in it
    by_space: dict[tuple, object] = {}
    qvecs, pvecs, note = [], [], None
    for store in corpora:
        key = (store.meta.endpoint, store.meta.model, store.meta.roles)
        if key not in by_space:
            vecs, why, transient, cut = embed_query(store, req.text, session, deadline, passages)
            if vecs is None:
                now, source = settings["endpoint"], settings.source("endpoint")
                return Plane("lexical", [None] * len(corpora), server_failed=True, notice=(
                    f"{why}: ranking lexically (BM25F)" + (
                        f"; the config now names {now} ({source}): {invoke('index')} to move the index to it (the "
                        f"vectors are kept when it serves the same model)"
                        if now != store.meta.endpoint and source != "default"
                        else " until it answers again" if transient else "")))
            by_space[key] = (vecs[0], facets.mean_vector(vecs[1:]) if passages else None)
            note = note or cut
        qvecs.append(by_space[key][0])
        pvecs.append(by_space[key][1])
    timing.lap("request")
    from folio import feedback

    return Plane(req.mode, qvecs, notice=note, feedback=feedback.knobs(settings["feedback"], req.mode),
                 pvecs=pvecs if passages else None)


def _why_none(store, settings) -> str:
    """Why an index holds no vector, as far as it knows, and the fix: the notice's tail. Built with
    no server giving vectors (no space recorded: none answered, or it refused), a run that stopped
    before its first commit of a vector (a full disk, a kill), none of its sections embedded yet, or
    no section at all: never the one for another."""
    from folio import running

    meta = store.meta
    run = running.current(store.root)  # a first build's run, also past its walk (waiting for a model to load)
    if not run and meta.unfinished is None and store.record_count() == 0:
        return (" (it holds no section: no Markdown file was found under its root when it was indexed): "
                f"add .md files and {invoke('index')}")
    if run:
        why, fix = f" yet ({running.describe(run)})", "sections are ranked by meaning as their vectors are committed"
    elif meta.unfinished is not None:
        why, fix = " yet (the last `folio index` stopped before it committed any)", f"{invoke('index')} to finish it"
    elif not store.dim:
        # none answered, or the one asked refused (a key, --pooling none, no --embeddings): the run said which
        why = " (no embeddings server gave it vectors when it was built)"
        fix = (f"to rank by meaning, {invoke('index')} once an embeddings server gives vectors at "
               f"{settings['endpoint']} ({settings.source('endpoint')})")
    else:
        why, fix = " yet (none of its sections was embedded)", f"{invoke('index')} with the server at {meta.endpoint} up"
    return f"{why}: ranking lexically (BM25F); {fix}"


def candidates(store, req, vectors_only: bool, pointers=None) -> tuple:
    """(slots of the candidate records after filters and the precedence join, documents dropped by
    the join, the filters' hints)."""
    slots, file_ids = store.live(vectors_only=vectors_only)
    if not (req.where or req.exclude_pointed_by):
        return slots, 0, []
    from folio import filters

    keep, dropped, hints = filters.apply(store, slots, file_ids, req.where, req.exclude_pointed_by,
                                         req.identity, pointers)
    return slots[keep], dropped, hints


def component_ranks(names, planes, slots: tuple[int, ...]) -> dict:
    """{list: the best 1-based rank any piece of the row has in that rank list, or None if none
    ranked}, for each list named (a None name: a list that did not rank this question)."""
    out = {}
    for name, r in zip(names, planes, strict=True):
        if name is None:
            continue
        got = [int(r[s]) for s in slots if s < len(r) and r[s] > 0]
        out[name] = min(got) if got else None
    return out


class Scores(NamedTuple):
    dense: list  # per corpus, a float32 score for every slot
    planes: list | None  # fused: per corpus the component ranks, else None
    dropped: int
    hints: list
    notices: list[str]
    windowed: object = None  # window.Windowed: dense holds only the windows' records (rows.select)
    full: object = None  # with windowed: () -> these Scores by the full path, when the windows cannot decide
    names: tuple = ()  # fused: the rank list of each row of `planes` (None where a list did not rank)
    facets: tuple = ()  # the facets that ranked beside the question (facets.py)
    judges: list | None = None  # fused: per weighed plane and facet, (per corpus its own scores, whether they are
    # BM25F's) (rows.select merges by them)
    aside: bool = False  # hybrid: feedback stepped aside, the first pass being decisive (evidence.py)


def scores_by_slot(corpora: list, req, plane: Plane) -> Scores:
    """Per corpus a float32 score for every slot, and (fused) the component ranks.

    Scores are -inf for dead, vector-less, filtered and shadowed records (and, lexically, for
    records that share no term with the question). In hybrid mode both planes rank the same
    candidates (after filters, the join and shadowing) and fusion.fuse turns the two full
    rankings, and any facet's (facets.py: the words in the lexical plane, the passages in the
    semantic one, in force in the mode's planes), into one score; the component ranks (per
    corpus, (lists, slots) in `names` order) come back for --json. --limit then works on the fused
    scores as on any other, and touching rows merge only where each weighed plane's own scores,
    and each facet's (`judges`), would merge them too. At WINDOW_MIN slots and up, only the records of some list's
    window get their fused score (window.py: the same bits; -inf elsewhere): `windowed` says so to
    rows.select, and `full` ranks in full when the windows cannot decide.
    """
    import numpy as np

    from folio import facets

    mode = plane.mode
    dense, lexical_planes, dropped, hints = [], [], 0, []
    worded, passaged = [], []  # per corpus the facets' scores (words: BM25F, passages: cosine)
    pointers, any_left = None, False
    if req.exclude_pointed_by and len(corpora) > 1:  # one join over every queried index
        from folio import filters

        pointers = filters.collect_pointers(corpora, req.exclude_pointed_by)
    unjudged = []  # hybrid: per corpus, the candidates without a vector yet (fusion.fuse)
    counted = 0  # hybrid: the candidates over every corpus (fusion.fuse: a BM25 list's zeros)
    for c, (store, qvec) in enumerate(zip(corpora, plane.qvecs, strict=True)):
        slots, gone, said = candidates(store, req, vectors_only=(mode == "semantic"), pointers=pointers)
        timing.lap("records")
        any_left = any_left or len(slots) > 0
        dropped += gone
        hints += [h for h in said if h not in hints]
        everyone = slots
        counted += len(slots)
        if mode == "lexical":
            d = lexical_dense(store, plane.question.terms, slots)
        else:
            if mode == "hybrid":  # the lexical plane ranks every candidate, the semantic one those with a vector
                slots, waiting = _with_vectors(store, slots)
                unjudged.append(waiting)
            d = _scan(store, qvec if plane.pvecs is None else np.stack([qvec, plane.pvecs[c]]), slots)
            if plane.pvecs is not None:
                d, p = d
                passaged.append(p)
            if np.isnan(d.min()):  # every stored row is finite and unit length: this one was overwritten
                from folio.store import corrupt

                raise corrupt(store.dir, f"{store.matrix_path().name} holds rows that are not numbers")
            if mode == "hybrid":
                lexical_planes.append(lexical_dense(store, plane.question.terms, everyone))
        if plane.words is not None:
            worded.append(lexical_dense(store, plane.words, everyone))
        dense.append(d)
        timing.lap("scan")
    if req.where and any_left and len(corpora) > 1:  # one index without a match is no empty result
        from folio import filters

        hints = [h for h in hints if not isinstance(h, filters.EmptyHint)]
    notices = shadow_nested(corpora, dense)
    from folio import feedback, fusion

    more = tuple(fusion.Facet(name, scores, facets.weight(name), semantic=name == facets.PASSAGE)
                 for name, scores in ((facets.WORDS, worded), (facets.PASSAGE, passaged)) if scores)
    for f in more:
        shadow_nested(corpora, f.scores)
    if mode != "hybrid" and not more:
        if plane.feedback and any_left:
            dense = feedback.semantic(corpora, plane.qvecs, dense, plane.feedback)
            timing.lap("feedback")
        return Scores(dense, None, dropped, hints, notices)
    from folio import evidence

    nothing = [np.zeros(0, dtype=np.float32)] * len(corpora)
    if mode == "hybrid":
        shadow_nested(corpora, lexical_planes)
        sure = evidence.weigh(corpora, [collection(s) for s in corpora], plane.question, lexical_planes,
                              _weights(plane.question.share))  # the collections: memo hits, the lexical plane read them
    else:  # one plane and its facets: the plane's own list, and nothing in the other
        dense, lexical_planes, unjudged = (nothing, dense, None) if mode == "lexical" else (dense, nothing, None)
        sure = evidence.Evidence(None, False, "")
    weights = sure.weights
    knobs = plane.feedback if any_left and mode != "lexical" and not sure.decisive else None  # a decisive first pass stands
    # (its scores, whether it scores words: rows.select merges by a file's floor there)
    judges = [(p, p is lexical_planes) for p, w in zip((dense, lexical_planes), weights or (1.0, 1.0), strict=True)
              if w > 0 and p is not nothing]
    judges += [(f.scores, f.name == "words") for f in more if f.weight > 0]  # a facet's list earns rows as a plane does
    names = tuple(None if (n == "lexical" and mode == "semantic") or (n == "semantic" and mode == "lexical") else n
                  for n in fusion.names(more))
    said = tuple(f.name for f in more)

    def full() -> Scores:
        fused, planes, rest = fusion.fuse(dense, lexical_planes, unjudged=unjudged, weights=weights, more=more,
                                          candidates=counted)
        if knobs:
            fused, planes = feedback.hybrid(corpora, plane.qvecs, dense, fused, planes, rest, knobs,
                                            fusion.all_weights(weights, more))
            timing.lap("feedback")  # fusion and feedback (without feedback, fusion goes to "merge")
        return Scores(fused, planes, dropped, hints, notices, names=names, facets=said, judges=judges,
                      aside=sure.decisive)

    from folio import window

    size = window.wanted([max(len(d), len(x)) for d, x in zip(dense, lexical_planes, strict=True)], knobs)
    if size:  # a large corpus: only the records that can reach a row are ranked exactly (window.py)
        try:
            fused, planes, windowed = window.rank(corpora, plane.qvecs, dense, lexical_planes, unjudged, weights,
                                                  knobs, size, more, counted)
            if knobs:
                timing.lap("feedback")
            return Scores(fused, planes, dropped, hints, notices, windowed, full, names, said, judges,
                          sure.decisive)
        except window.Inexact:
            pass
    return full()


def _weights(share: float):
    """(semantic, lexical) fusion weights: a question made of identifiers is the lexical plane's to
    rank (an exact name the semantic plane reads as its common parts), so the semantic plane weighs
    1 - the share of the question's words that are identifiers (analysis.identifier_share): a bare
    identifier ranks as the lexical plane does, a question in plain words fuses both at 1. Measured in
    docs/benchmarks.md ("Ranking: identifiers")."""
    return (1.0 - share, 1.0) if share else None


def _with_vectors(store, slots):
    """(the candidates holding a vector, a bool per slot marking the candidates that wait for one)."""
    import numpy as np

    vec_slots, _ = store.live(vectors_only=True)
    if len(vec_slots) == len(store.live(vectors_only=False)[0]):
        return slots, np.zeros(0, dtype=bool)  # the index is whole: nothing waits
    has = np.zeros(store.next_slot(), dtype=bool)
    has[vec_slots] = True
    waiting = np.zeros(store.next_slot(), dtype=bool)
    waiting[slots[~has[slots]]] = True
    return slots[has[slots]], waiting


BLOCK = 256  # matrix rows multiplied by every vector at once when several scan (in the cache: L2 holds a block)


def _scan(store, qvec, slots):
    """Cosine per slot over the whole memory-mapped matrix (one product: cheaper than gathering the
    live rows first), -inf outside `slots`. The product's own array is masked in place, not copied
    by index. Several vectors (a (k, dim) array: the question's and the passages'): the matrix is
    read once, a block of BLOCK rows at a time multiplied by every vector while it is in the cache,
    the blocks split between threads (products); one such array per vector."""
    import numpy as np

    m = store.matrix()
    if qvec.ndim == 2:
        both = products(np.asarray(m), np.ascontiguousarray(qvec.T, dtype=np.float32)).T
        out = _outside(store, slots, len(m))
        rows = []
        for d in both:
            d = np.ascontiguousarray(d)
            np.putmask(d, out, np.float32(-np.inf))
            rows.append(d)
        return rows
    d = np.asarray(m @ qvec.astype(np.float32))
    np.putmask(d, _outside(store, slots, len(d)), np.float32(-np.inf))
    return d


def products(m, vecs):
    """m (n, dim) x vecs (dim, k) as (n, k), the matrix read once: BLOCK rows at a time, the rows
    split evenly between up to one thread per core (each block's product releases the GIL). Neither
    one (n, dim) x (dim, k) product (OpenBLAS packs the whole matrix for it) nor one matrix-vector
    product per vector (the matrix read k times): at 526k x 768 and k = 2 on two cores, 200 ms and
    130 ms against 75 ms this way, one plain product taking 66 ms (docs/ranking.md, Cost)."""
    import numpy as np

    n = len(m)
    prod = np.empty((n, vecs.shape[1]), dtype=np.float32)
    threads = max(1, min(os.cpu_count() or 1, 8, n // BLOCK))
    step = -(-n // threads)

    def part(lo: int, hi: int) -> None:
        for a in range(lo, hi, BLOCK):
            b = min(a + BLOCK, hi)
            np.matmul(m[a:b], vecs, out=prod[a:b])

    if threads == 1:
        part(0, n)
        return prod
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(part, i * step, min(n, (i + 1) * step)) for i in range(threads)]:
            f.result()
    return prod


def _outside(store, slots, n: int):
    """bool[n], True where a slot is no candidate; kept in the memo for the unfiltered candidates
    (the store's own live arrays), made anew for filtered ones."""
    import numpy as np

    kept = memo(store).setdefault("outside", [])
    for held, mask in kept:
        if held is slots and len(mask) == n:
            return mask
    mask = np.ones(n, dtype=bool)
    mask[slots[slots < n]] = False
    if any(slots is store.live(vectors_only=v)[0] for v in (True, False)):
        kept.append((slots, mask))
    return mask


def lexical_dense(store, terms: list[str], slots):
    """BM25F score per slot: -inf outside `slots` and where the record shares none of `terms` (a
    question's, lexical.analysis.analyze). Only the documents holding a term are touched
    (scoring.score_slots)."""
    import numpy as np

    from folio.lexical.scoring import score_slots

    # idf and lengths over every live record; only the candidates are returned.
    col, _live = collection(store)
    d = score_slots(list(terms), col)
    if slots is not store.live(vectors_only=False)[0]:  # every live record is a candidate there
        np.putmask(d, _outside(store, slots, len(d)), np.float32(-np.inf))
    return d


def shadow_nested(corpora: list, dense: list) -> list[str]:
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


def collection(store):
    """(lexical Collection over every live record, the live mask by slot), from the memo."""
    import numpy as np

    from folio.lexical.scoring import Collection

    kept = memo(store)
    segs = store.lex_segments()
    hit = kept.get("collection")
    if hit is not None and len(hit[0].segments) == len(segs) and all(
            a is b for a, b in zip(hit[0].segments, segs, strict=True)):
        return hit
    all_slots, _ = store.live(vectors_only=False)
    live = np.zeros(store.next_slot(), dtype=bool)
    live[all_slots] = True
    live.flags.writeable = False
    kept["collection"] = (Collection(segs, live), live)
    return kept["collection"]
