"""The lexical plane's segments: building one from a batch's documents, and merging several.

Pure functions over numpy arrays: no file I/O, no network, no printing. The store persists
whatever arrays ``build_segment`` returns and hands them back (possibly memory-mapped, read-only:
folio/store/segments.py). Owns the segment layout below, building (terms from analysis.py, per
field) and merging (live documents only, renumbered by compaction). Must not analyse text itself
(analysis.py) or score (scoring.py).

Segment layout (``dict[str, np.ndarray]``)
------------------------------------------
Raw statistics only -- no idf, no length normalisation -- so any sequence of
incremental segments scores exactly like a clean build (idf, N and average
field lengths are computed over *live* docs at query time).

=============  ======================  ===============================================
key            dtype / shape           meaning
=============  ======================  ===============================================
``version``    uint32[1]               ``SEGMENT_VERSION`` (layout version)
``doc_slots``  int64[n_docs]           slot (vector row) of each doc, unique in segment
``doc_len``    uint32[n_docs, 5]       analysed-token count per field (``FIELDS`` order)
``terms``      uint64[n_terms]         term hashes, sorted ascending, unique
``offsets``    int64[n_terms + 1]      postings of ``terms[i]`` are ``offsets[i]:offsets[i+1]``
``post_doc``   int32[n_post]           index into ``doc_slots`` (ascending within a term)
``post_tf``    uint16[n_post, 5]       raw term frequency per field (saturates at 65535)
=============  ======================  ===============================================

Terms are analysis.term_hash values. Lookup is one ``np.searchsorted`` per term per segment.

Which doc is live: a doc counts iff ``live[slot]`` is true AND no *later*
segment in the list holds the same slot (slots are reused when a file is
re-indexed in place: newest segment wins). Slots beyond ``len(live)`` are dead.

Docs keep the input order in ``build_segment`` (last duplicate slot wins) and are
ordered by slot in ``merge_segments``.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from folio.lexical.analysis import (
    FIELDS,
    SENTINEL,
    Doc,
    count_terms,
    raw_terms,
    raw_tokens,
    record_doc,
    strip_extension,
)

SEGMENT_VERSION = 1

_NF = len(FIELDS)
_TF_MAX = np.iinfo(np.uint16).max


def _empty_segment() -> dict[str, np.ndarray]:
    return {
        "version": np.array([SEGMENT_VERSION], dtype=np.uint32),
        "doc_slots": np.zeros(0, dtype=np.int64),
        "doc_len": np.zeros((0, _NF), dtype=np.uint32),
        "terms": np.zeros(0, dtype=np.uint64),
        "offsets": np.zeros(1, dtype=np.int64),
        "post_doc": np.zeros(0, dtype=np.int32),
        "post_tf": np.zeros((0, _NF), dtype=np.uint16),
    }


def _stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """Stable argsort of non-negative ints < n_keys: LSD radix in 16-bit digits
    (numpy's stable sort is a radix sort for 16-bit types)."""
    keys = keys.astype(np.int64, copy=False)
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while (n_keys - 1) >> shift:
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
    return order


def _assemble(
    doc_slots: np.ndarray,
    doc_len: np.ndarray,
    terms: np.ndarray,
    tok_term: np.ndarray,
    tok_doc: np.ndarray,
    tok_field: np.ndarray,
    tok_tf: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Segment from flat occurrences (term index into sorted unique ``terms``, doc index,
    field), optionally with a count each. Equal (term, doc) occurrences must come in
    ascending field order (true for field-major input)."""
    n_docs = len(doc_slots)
    seg = _empty_segment()
    seg["doc_slots"] = np.ascontiguousarray(doc_slots, dtype=np.int64)
    seg["doc_len"] = np.ascontiguousarray(doc_len, dtype=np.uint32).reshape(n_docs, _NF)
    if len(tok_term) == 0:
        return seg
    n_terms = len(terms)
    pkey = tok_term.astype(np.int64) * n_docs + tok_doc  # term-major posting key
    order = _stable_order(pkey, n_terms * n_docs)
    pk = pkey[order]
    fs = np.asarray(tok_field)[order]
    chg = np.empty(len(pk), dtype=bool)
    chg[0] = True
    np.not_equal(pk[1:], pk[:-1], out=chg[1:])
    post_start = chg.copy()
    chg[1:] |= fs[1:] != fs[:-1]
    starts = np.flatnonzero(chg)
    if tok_tf is None:
        counts = np.diff(np.append(starts, len(pk)))
    else:
        counts = np.add.reduceat(np.asarray(tok_tf)[order].astype(np.int64), starts)
    post_idx = np.cumsum(post_start)[starts] - 1
    pkeys = pk[post_start]
    tf = np.zeros((len(pkeys), _NF), dtype=np.uint16)
    tf[post_idx, fs[starts]] = np.minimum(counts, _TF_MAX)
    post_term = pkeys // n_docs
    seg["terms"] = np.ascontiguousarray(terms, dtype=np.uint64)
    offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(post_term, minlength=n_terms), out=offsets[1:])
    seg["offsets"] = offsets
    seg["post_doc"] = (pkeys - post_term * n_docs).astype(np.int32)
    seg["post_tf"] = tf
    return seg



# A body longer than this is counted chunk by chunk into (term, count) pairs instead of going
# through the per-token arrays below, which cost ~25 bytes of memory per byte of text (a 49 MB
# single-line file peaked at 1.3 GB). The segment is the same array for array.
_HUGE = 1 << 20


def _term_counts(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique term hashes, their counts) of one text (analysis.count_terms: memory follows
    the distinct terms, not the text's length)."""
    counts = count_terms(text)
    if not counts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    hashes = np.fromiter(counts.keys(), dtype=np.uint64, count=len(counts))
    tf = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    order = np.argsort(hashes)
    return hashes[order], tf[order]


PART_CHARS = 1_000_000  # record text analysed at once by files_segment (~30 MB)


def files_segment(files) -> tuple[dict[str, np.ndarray], list[int]]:
    """One segment for the records of several files ((sections.Document, the text it was parsed from,
    its path) each) and where each file's records start in it: file k's record i is document
    starts[k] + i. A parse worker's analysis, given the records' slots by the run's plan; one
    segment for a group of files costs less than one per file (build_segment's array work is paid
    once, and a token the files share is analysed once)."""
    docs: list[Doc] = []
    starts = []
    for document, text, path in files:
        base = len(docs)
        starts.append(base)
        lines = text.split("\n") if any(s.truncated for s in document.records) else None
        docs += [record_doc(base + i, s, document.title, path, lines) for i, s in enumerate(document.records)]
    # Tokenising holds ~30 bytes per byte of text: records past PART_CHARS of it (one big file) are
    # analysed a part at a time, the parts merged (postings move whole: the same segment)
    parts, at, chars = [], 0, 0
    for i, d in enumerate(docs):
        chars += len(d[1])
        if chars >= PART_CHARS and i + 1 < len(docs):
            parts.append(build_segment(docs[at:i + 1]))
            at, chars = i + 1, 0
    if not parts:
        return build_segment(docs), starts
    parts.append(build_segment(docs[at:]))
    return merge_segments(parts, np.ones(len(docs), dtype=bool)), starts


def build_segment(docs: list[Doc]) -> dict[str, np.ndarray]:
    """One segment for ``docs`` (analysis.Doc: slot, body, heading, title, path, context).

    If a slot repeats, its last occurrence wins. Raw tfs and field lengths only.
    Tokenisation runs per field over one bytes blob (texts joined by a sentinel), so the
    per-token work is C-level: translate, split, one dict lookup. Each distinct text of a field
    is tokenised once (a document's title, path and context repeat on every record of it, and a
    corpus holding copies repeats whole bodies); its terms are then given to every record that
    holds it.
    """
    last: dict[int, int] = {}
    for i, d in enumerate(docs):
        last[int(d[0])] = i
    if len(last) != len(docs):
        docs = [docs[i] for i in sorted(last.values())]
    n_docs = len(docs)
    if n_docs == 0:
        return _empty_segment()
    slots = np.fromiter((d[0] for d in docs), dtype=np.int64, count=n_docs)
    sep = b" " + SENTINEL + b" "
    toks: list[bytes] = []
    col_ntok = []
    text_ids = []  # per field: the distinct text each record holds
    huge: dict[str, list[int]] = {}  # a huge body -> the records holding it (counted apart: _term_counts)
    for f in range(_NF):
        col = [d[f + 1] or "" for d in docs]
        if f == 0:
            for i, text in enumerate(col):
                if len(text) > _HUGE:
                    huge.setdefault(text, []).append(i)
                    col[i] = ""
        if f == 3:
            col = [strip_extension(p) for p in col]
        distinct = {t: i for i, t in enumerate(dict.fromkeys(col))}
        text_ids.append(np.fromiter(map(distinct.__getitem__, col), dtype=np.int64, count=n_docs))
        blob = sep.join([t.encode("utf-8", "surrogatepass") for t in distinct])
        t = raw_tokens(blob)
        col_ntok.append(len(t))
        toks.extend(t)
    index = {w: i for i, w in enumerate(dict.fromkeys(toks))}
    uniq = list(index)
    sent = index.get(SENTINEL, -1)
    per = [() if w == SENTINEL else raw_terms(w) for w in uniq]
    raw_k = np.fromiter(map(len, per), dtype=np.int64, count=len(uniq))
    n_flat = int(raw_k.sum())
    flat = np.fromiter(chain.from_iterable(per), dtype=np.uint64, count=n_flat)
    huge_counts = [(*_term_counts(text), holders) for text, holders in huge.items()]
    huge.clear()
    terms = np.sort(np.concatenate([flat, *(h for h, _tf, _d in huge_counts)]) if huge_counts else flat)
    # (np.unique, without the numpy.ma import it costs: ~9 ms a process)
    if len(terms):
        terms = terms[np.concatenate(([True], terms[1:] != terms[:-1]))]
    flat_term = np.searchsorted(terms, flat)
    raw_start = np.cumsum(raw_k) - raw_k
    tok_raw = np.fromiter(map(index.__getitem__, toks), dtype=np.int64, count=len(toks))
    # doc and field of every raw token: sentinels mark the text boundaries of each column
    is_sent = tok_raw == sent
    col_id = np.repeat(np.arange(_NF, dtype=np.int64), col_ntok)
    col_start = np.cumsum(col_ntok) - np.asarray(col_ntok)
    # doc index = number of sentinels seen so far inside this column
    seen = np.cumsum(is_sent)
    tok_doc = seen - np.append(0, seen)[col_start][col_id]
    tok_doc -= is_sent  # a sentinel belongs to the text it ends (it is dropped below)
    tok_k = raw_k[tok_raw]
    if n_flat == 0:
        tok_term = tok_doc = col_id = np.zeros(0, dtype=np.int64)
    elif raw_k.max() <= 1:
        keep = tok_k == 1  # drops stopwords and sentinels
        tok_doc = tok_doc[keep]
        col_id = col_id[keep]
        tok_term = flat_term[raw_start[tok_raw[keep]]]
    else:
        tok_doc = np.repeat(tok_doc, tok_k)
        col_id = np.repeat(col_id, tok_k)
        firsts = np.repeat(np.cumsum(tok_k) - tok_k, tok_k)
        within = np.arange(len(tok_doc), dtype=np.int64) - firsts
        tok_term = flat_term[np.repeat(raw_start[tok_raw], tok_k) + within]
    # tok_doc indexes the field's distinct texts (in order, so each text's terms are contiguous):
    # hand every record the terms of the text it holds
    doc_len = np.zeros((n_docs, _NF), dtype=np.int64)
    out_term, out_doc, out_field, out_tf = [], [], [], []
    for f in range(_NF):
        m = col_id == f
        f_term, f_text = tok_term[m], tok_doc[m]
        tid = text_ids[f]
        text_len = np.bincount(f_text, minlength=int(tid.max()) + 1)
        text_start = np.cumsum(text_len) - text_len
        n_occ = text_len[tid]
        doc_len[:, f] = n_occ
        if f == 0:  # the huge bodies, as (term, count) pairs: still field-major, as _assemble needs
            for hashes, tf, holders in huge_counts:
                doc_len[holders, 0] = int(tf.sum())
                ids = np.searchsorted(terms, hashes)
                for i in holders:
                    out_term.append(ids)
                    out_doc.append(np.full(len(ids), i, dtype=np.int64))
                    out_field.append(np.zeros(len(ids), dtype=np.int64))
                    out_tf.append(tf)
        total = int(n_occ.sum())
        if total == 0:
            continue
        firsts = np.repeat(np.cumsum(n_occ) - n_occ, n_occ)
        src = np.repeat(text_start[tid], n_occ) + (np.arange(total, dtype=np.int64) - firsts)
        out_term.append(f_term[src])
        out_doc.append(np.repeat(np.arange(n_docs, dtype=np.int64), n_occ))
        out_field.append(np.full(total, f, dtype=np.int64))
        out_tf.append(np.ones(total, dtype=np.int64))
    if not out_term:
        return _assemble(slots, doc_len, terms, *(np.zeros(0, dtype=np.int64),) * 3)
    return _assemble(slots, doc_len, terms, np.concatenate(out_term), np.concatenate(out_doc),
                     np.concatenate(out_field), np.concatenate(out_tf) if huge_counts else None)



def alive_masks(segments: list[dict], live: np.ndarray) -> list[np.ndarray]:
    """Per segment, bool[n_docs]: live slot and not superseded by a later segment. From the newest
    segment back, each one's documents are read from, then cleared in, one copy of `live` (the
    oldest, at millions of documents the largest, only reads it)."""
    free = np.array(live, dtype=bool)
    n = len(free)
    masks: list[np.ndarray] = [None] * len(segments)  # type: ignore[list-item]
    for i in range(len(segments) - 1, -1, -1):
        slots = np.asarray(segments[i]["doc_slots"])
        if len(slots) == 0 or (int(slots.min()) >= 0 and int(slots.max()) < n):
            masks[i] = free[slots]
            if i:
                free[slots] = False
            continue
        ok = (slots >= 0) & (slots < n)
        s = slots[ok]
        m = np.zeros(len(slots), dtype=bool)
        m[ok] = free[s]
        free[s] = False
        masks[i] = m
    return masks


MERGE_CHUNK = 1 << 20  # postings gathered per step of a merge (bounds its working memory)
MERGE_MAPPED = 16 << 20  # bytes of mapped input read between giving their pages back (mapped.release)


class Collect:
    """Where merge_segments puts its result by default: the segment as arrays in memory. A sink
    with the same four methods (folio/store/segments.py's SegmentWriter) writes it to disk as it
    comes instead, so a merge of a whole corpus holds a range of postings, not the result."""

    def head(self, seg: dict[str, np.ndarray], n_post: int) -> None:
        """The arrays known before the postings (version, doc_slots, doc_len); n_post postings follow."""
        self.seg = seg
        self.post_doc = np.empty(n_post, dtype=np.int32)
        self.post_tf = np.empty((n_post, _NF), dtype=np.uint16)
        self.pos = 0

    def postings(self, doc: np.ndarray, tf: np.ndarray) -> None:
        """The next postings, in (term, doc) order."""
        k = len(doc)
        self.post_doc[self.pos : self.pos + k] = doc
        self.post_tf[self.pos : self.pos + k] = tf
        self.pos += k

    def tail(self, terms: np.ndarray, offsets: np.ndarray) -> None:
        self.seg["terms"], self.seg["offsets"] = terms, offsets

    def done(self) -> dict[str, np.ndarray]:
        self.seg["post_doc"], self.seg["post_tf"] = self.post_doc, self.post_tf
        return self.seg


def merge_segments(
    segments: list[dict], live: np.ndarray, renumber: np.ndarray | None = None, sink=None
):
    """One segment with only the live docs (newest segment wins per slot): `sink.done()`, by
    default (Collect) the segment's arrays.

    ``renumber`` (optional): int array old_slot -> new_slot (-1 = drop).
    Docs of the result are ordered by (new) slot.

    Postings move whole (their tf rows are not re-counted): a live doc comes from exactly one
    segment, so no (term, doc) pair can occur twice and postings are only gathered and ordered.
    Working memory stays a range's size whatever the corpus size, plus the docs and the distinct
    terms of the result: the term-hash space is cut into ranges of about MERGE_CHUNK postings;
    each range is gathered from every segment (one searchsorted per segment), ordered by
    (term, doc) and handed to the sink, which writes it out (or fills the preallocated result).
    Pages of memory-mapped inputs are given back as the merge goes (mapped.release_rows), so reading
    a corpus's segments does not hold them all in this process's memory.
    """
    from folio.mapped import release, release_rows

    sink = Collect() if sink is None else sink
    masks = alive_masks(segments, live)
    slot_parts, len_parts, doc_maps = [], [], []
    base = 0
    for seg, m in zip(segments, masks, strict=True):
        slots = np.asarray(seg["doc_slots"])
        if renumber is not None:
            m = m.copy()
            ren = np.asarray(renumber)
            inr = slots < len(ren)
            new_slots = np.full(len(slots), -1, dtype=np.int64)
            new_slots[inr] = ren[slots[inr]]
            m &= new_slots >= 0
        else:
            new_slots = slots
        nkeep = int(m.sum())
        idx = np.full(len(slots), -1, dtype=np.int64)
        idx[m] = np.arange(base, base + nkeep)
        doc_maps.append(idx)
        slot_parts.append(new_slots[m])
        len_parts.append(np.asarray(seg["doc_len"])[m])
        release(seg["doc_slots"], seg["doc_len"])
        base += nkeep
    n_docs = base
    out = _empty_segment()
    if n_docs == 0:
        sink.head(out, 0)
        sink.tail(out["terms"], out["offsets"])
        return sink.done()
    slots = np.concatenate(slot_parts).astype(np.int64)
    order = np.argsort(slots, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(n_docs)
    out["doc_slots"] = np.ascontiguousarray(slots[order])
    out["doc_len"] = np.ascontiguousarray(np.concatenate(len_parts)[order], dtype=np.uint32).reshape(n_docs, _NF)
    del slot_parts, len_parts, slots, order
    # input doc index -> result doc index (-1: dropped), and the live postings of each segment
    n_post = 0
    for i, (seg, idx) in enumerate(zip(segments, doc_maps, strict=True)):
        idx = np.where(idx >= 0, rank[np.maximum(idx, 0)], -1)
        doc_maps[i] = idx
        pd = seg["post_doc"]
        for p0 in range(0, len(pd), MERGE_MAPPED // 4):
            n_post += int(np.count_nonzero(idx[np.asarray(pd[p0 : p0 + MERGE_MAPPED // 4])] >= 0))
            release(pd)
    del rank
    sink.head(out, n_post)
    term_parts, count_parts = [], []
    n_chunks = 1 << max(0, (n_post // MERGE_CHUNK).bit_length())
    bounds = np.array([k * (1 << 64) // n_chunks for k in range(n_chunks)], dtype=np.uint64)
    # where each range starts in each segment's terms: one pass per segment, not a binary search
    # per range (whose pages, touched across hundreds of segments, were what a merge held)
    cuts = []
    for seg in segments:
        c = np.empty(n_chunks + 1, dtype=np.int64)
        c[:-1] = np.searchsorted(seg["terms"], bounds)
        c[-1] = len(seg["terms"])
        cuts.append(c)
        release(seg["terms"])
    for k in range(n_chunks):
        hs, ds, tfs = [], [], []
        for seg, idx, c in zip(segments, doc_maps, cuts, strict=True):
            terms = seg["terms"]
            i0, i1 = int(c[k]), int(c[k + 1])
            if i0 >= i1:
                continue
            offs = np.asarray(seg["offsets"][i0 : i1 + 1])
            p0, p1 = int(offs[0]), int(offs[-1])
            d = idx[np.asarray(seg["post_doc"][p0:p1])]
            keep = d >= 0
            if keep.any():
                hs.append(np.repeat(np.asarray(terms[i0:i1]), np.diff(offs))[keep])
                ds.append(d[keep])
                tfs.append(np.asarray(seg["post_tf"][p0:p1])[keep])
            # this range of this segment is read: its pages go back before the next segment's come in
            release_rows(terms, i0, i1)
            release_rows(seg["offsets"], i0, i1 + 1)
            release_rows(seg["post_doc"], p0, p1)
            release_rows(seg["post_tf"], p0, p1)
        if not hs:
            continue
        h = np.concatenate(hs)
        uterms, inv = np.unique(h, return_inverse=True)
        del h, hs
        d = np.concatenate(ds)
        o = np.argsort(inv.astype(np.int64) * n_docs + d)  # (term, doc) pairs are unique
        sink.postings(d[o].astype(np.int32), np.concatenate(tfs)[o])
        term_parts.append(uterms)
        count_parts.append(np.bincount(inv, minlength=len(uterms)))
    for seg in segments:
        release(seg["terms"], seg["offsets"], seg["post_doc"], seg["post_tf"])
    if term_parts:
        terms = np.ascontiguousarray(np.concatenate(term_parts), dtype=np.uint64)
        offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.concatenate(count_parts), out=offsets[1:])
        sink.tail(terms, offsets)
    else:
        sink.tail(out["terms"], out["offsets"])
    return sink.done()
