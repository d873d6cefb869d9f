"""The query: embed, scan, filter, rank, check freshness, refresh once, rank again.

A query uses the endpoint and model the index recorded, sends the fingerprint probe in the same
request as the question, scans the whole memory-mapped matrix with one product, and stats only the
files behind the rows it returns. When the recorded endpoint does not answer it ranks with the
lexical plane and says so. Must not print: notices travel in the Answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from folio.errors import FolioError

SAME_SPACE = 0.999


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
    timings: dict = field(default_factory=dict)


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


def freshness(root: Path, stamp: dict | None) -> str:
    from folio.walk import stat_file

    if stamp is None:
        return "missing"
    st = stat_file(root, stamp["path"])
    if st is None:
        return "missing"
    return "current" if st == (stamp["size"], stamp["mtime_ns"]) else "stale"


def _embed_query(store, text: str, settings):
    """(query vector, None) or (None, reason the semantic plane is unavailable)."""
    import numpy as np

    from folio.config import key_policy
    from folio.embed import PROBE_TEXT, Client, EndpointError, cosine

    meta = store.meta
    endpoint, model = meta.get("endpoint"), meta.get("model")
    decision = key_policy(endpoint, meta.get("endpoint_source") or "index", settings)
    with Client(endpoint, model, api_key=settings["api_key"] if decision.send else None, dim=store.dim,
                connect_retries=1, busy_retries=3, timeout=30.0) as client:
        try:
            vecs = client.embed([PROBE_TEXT, text])
        except EndpointError as e:
            if e.kind == "unreachable":
                return None, f"the recorded endpoint {endpoint} does not answer"
            raise
    fp = np.frombuffer(bytes.fromhex(meta.get("fingerprint") or ""), dtype="<f4")
    if cosine(vecs[0], fp) < SAME_SPACE:
        raise FolioError(
            f"the server at {endpoint} now answers in another vector space than the one this index was built in "
            f"(model {model}); run `folio index` to re-embed with it, or restart the server on the model the "
            f"index was built with")
    return vecs[1], None


def run(root: Path, req: Request, settings) -> Answer:
    """One query against one corpus (see multi-root handling in cli)."""
    from folio.store import Store

    t0 = time.perf_counter()
    store = Store.open(root)
    try:
        answer = Answer(req.text, req.mode, store.meta.get("model") or "", store.meta.get("endpoint") or "", [root])
        mode = req.mode
        qvec = None
        if mode in ("semantic", "hybrid"):
            if not store.dim or not store.counts()["embedded"]:
                answer.notices.append(
                    "this index holds no vectors yet (it was built without an embeddings server): ranking "
                    "lexically; start a server and run `folio index` to turn semantic ranking on")
                mode = "lexical"
            else:
                qvec, why = _embed_query(store, req.text, settings)
                if qvec is None:
                    answer.notices.append(
                        f"{why}: ranking lexically (BM25F); the config now names {settings['endpoint']}"
                        f" ({settings.source('endpoint')})")
                    mode = "lexical"
        answer.mode = mode
        answer.timings["embed"] = time.perf_counter() - t0
        hits = _rank(store, root, req, mode, qvec, answer)
        stale = [h for h in hits if h.freshness != "current"]
        if stale and req.refresh:
            refreshed = _refresh(store, root, {h.path for h in stale}, settings, answer)
            if refreshed:
                store.close()
                store = Store.open(root)
                hits = _rank(store, root, req, mode, qvec, answer, second=True)
        answer.hits = hits
        if req.want_confidence:
            answer.confidence = _confidence(store, req, hits)
    finally:
        store.close()
    answer.timings["total"] = time.perf_counter() - t0
    return answer


def _refresh(store, root: Path, paths: set[str], settings, answer: Answer) -> bool:
    """Bring the files behind stale rows up to date, under the write lock taken without waiting."""
    from folio import indexer
    from folio.config import key_policy
    from folio.store import LockBusy, acquire_lock

    try:
        lock = acquire_lock(root, wait=False)
    except LockBusy:
        answer.notices.append(f"{len(paths)} of the files behind this result changed; another folio is "
                              f"updating the index, so those rows are marked (stale)")
        return False
    try:
        from folio.store import Store

        w = Store.open(root, write=True)
        try:
            w.recover()
            meta = w.meta
            target = None
            if meta.get("endpoint") and w.dim:
                src = meta.get("endpoint_source") or "index"
                decision = key_policy(meta["endpoint"], src, settings)
                target = indexer.Target(meta["endpoint"], meta.get("model") or "", src,
                                        settings["api_key"] if decision.send else None, settings["batch_size"], 1)
            before = w.segment_names()
            rep = indexer.update(w, root, target, budget=int(meta.get("budget") or settings["max_chars"]),
                                 only=sorted(paths))
            indexer.merge_segments_of_run(w, before)
        finally:
            w.close()
    except FolioError as e:
        answer.notices.append(f"{len(paths)} of the files behind this result changed and could not be "
                              f"re-indexed ({e}); those rows are marked (stale)")
        return False
    finally:
        lock.release()
    changed = rep.changed + rep.new + rep.renamed + rep.restamped + rep.deleted
    answer.notices.append(f"({len(paths)} of the files behind this result had changed; "
                          f"{rep.changed + rep.new} file(s) re-embedded before answering"
                          + (f", {rep.deleted} gone" if rep.deleted else "") + ")")
    return changed > 0


def _candidates(store, req: Request, answer: Answer, vectors_only: bool):
    """(slots, mask over slots) of candidate records after filters and the precedence join."""
    slots, file_ids = store.live(vectors_only=vectors_only)
    if req.where or req.exclude_pointed_by:
        from folio import filters

        keep, dropped, hints = filters.apply(store, slots, file_ids, req.where, req.exclude_pointed_by,
                                             req.identity)
        answer.dropped = dropped
        answer.hints = hints
        slots = slots[keep]
    return slots


def _rank(store, root: Path, req: Request, mode: str, qvec, answer: Answer, second: bool = False) -> list[Hit]:
    import numpy as np

    t = time.perf_counter()
    with store.snapshot():
        if mode == "lexical":
            slots = _candidates(store, req, answer, vectors_only=False)
            scores = _lexical_scores(store, req.text, slots)
        else:
            slots = _candidates(store, req, answer, vectors_only=True)
            m = store.matrix()
            full = m @ qvec.astype(np.float32)  # the whole memmap: cheaper than gathering live rows first
            scores = full[slots]
        answer.timings["scan" if not second else "scan2"] = time.perf_counter() - t
        order = _top(scores, req.limit, positive=(mode == "lexical"))
        chosen = slots[order]
        rows = store.records(chosen.tolist())
        files = store.files({rows[s].file_id for s in chosen.tolist()})
    hits = []
    for s, sc in zip(chosen.tolist(), scores[order].tolist(), strict=False):
        r = rows[s]
        f = files[r.file_id]
        hits.append(Hit(root, f["path"], r.start, r.end, r.trail, float(sc), f["frontmatter"],
                        freshness(root, f), f["sha256"][:12], (s,)))
    return hits


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
    part = part[np.argsort(-sub[part], kind="stable")]
    return part if idx is None else idx[part]


def _lexical_scores(store, text: str, slots):
    import numpy as np

    from folio import lexical

    n = store.next_slot()
    live = np.zeros(n, dtype=bool)
    live[slots] = True
    all_live = np.zeros(n, dtype=bool)
    all_slots, _ = store.live(vectors_only=False)
    all_live[all_slots] = True
    # idf and lengths over every live record; only the candidates are returned.
    scores = lexical.score(lexical.analyze(text), store.lex_segments(), all_live)
    return np.asarray(scores, dtype=np.float32)[slots]


def _confidence(store, req: Request, hits: list[Hit]) -> dict:
    import numpy as np

    from folio import lexical

    with store.snapshot():
        all_slots, _ = store.live(vectors_only=False)
        live = np.zeros(store.next_slot(), dtype=bool)
        live[all_slots] = True
        segs = store.lex_segments()
        ranked = np.array([h.slots[0] for h in hits], dtype=np.int64)
        lex_scores = lexical.score(lexical.analyze(req.text), segs, live) if len(ranked) else np.zeros(0)
        scores = np.asarray(lex_scores, dtype=np.float32)[ranked] if len(ranked) else np.zeros(0, np.float32)
        return lexical.confidence(req.text, ranked, scores, segs, live,
                                  separation_floor=lexical.DEFAULT_SEPARATION_FLOOR)
