"""The lexical plane: BM25F over five fields, as pure functions over numpy arrays.

No file I/O, no network, no printing. The store persists whatever arrays
``build_segment`` returns and hands them back (possibly memory-mapped, read-only).

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

A term's hash is ``blake2b(term.encode("utf-8"), digest_size=8)`` read as a
little-endian uint64 (``term_hash``). Lookup is one ``np.searchsorted`` per
term per segment.

Which doc is live: a doc counts iff ``live[slot]`` is true AND no *later*
segment in the list holds the same slot (slots are reused when a file is
re-indexed in place: newest segment wins). Slots beyond ``len(live)`` are dead.

Analyzer (``analyze``; the same function at index and query time)
-----------------------------------------------------------------
* Tokens are Unicode words without underscores: regex ``[^\\W_]+`` -- letters
  and digits of any script ("Straße", "日本", "ch03", "42"); ``snake_case``
  splits at ``_``. camelCase is NOT split (keeps the analyzer predictable and
  cheap: ``getUserName`` is one term, ``getusername``).
* Each token is ``str.casefold()``-ed ("Straße" -> "strasse").
* ``STOPWORDS`` (a small English list) are dropped.
* A light English stemmer (``stem``) applies to pure-ASCII alphabetic tokens of
  length >= 3; digits and other scripts are left as they are. Rules in order:

  1. inflection: ``-sses -> -ss``; ``-ies -> -y`` (len > 4); ``-s`` dropped
     unless ``-ss/-us/-is``; ``-ing``/``-ed`` dropped when >= 2 letters with a
     vowel remain, then a doubled final consonant (not l/s/z) is undoubled
     (running -> run); ``-ly`` dropped when >= 4 letters remain.
  2. derivation (up to two passes, longest suffix first, >= 4 letters must
     remain): -ization -isation -ation -ition -ement -ment -ence -ance -ency
     -ancy -ness -able -ible -ive -ity -ize -ise -ent -ant -iz -is.
  3. a final ``e`` is dropped (not after ``e``, >= 2 letters remain).
  4. a final ``y`` after a consonant becomes ``i`` (apply/applies/applied).

  So independent/independence/independently -> ``independ``;
  recognise/recognised/recognize/recognition -> ``recogn``; run/runs/running
  -> ``run``; configure/configured/configuration -> ``configur``.

Index-time tokenisation gives exactly ``analyze``'s terms but runs per field column:
the texts are UTF-8 encoded and joined by a sentinel byte (0xFF, never in UTF-8), ASCII
non-alphanumerics are translated to spaces and the blob is ``bytes.split()``; each
distinct raw token is analysed once (cached) with the same regex, case folding,
stopwords and stemmer. Docs keep the input order in ``build_segment`` (last duplicate
slot wins) and are ordered by slot in ``merge_segments``.

Path field: ``tokenize_path`` drops a trailing file extension and splits on
non-word characters: ``docs/ch03-01-variables.md`` -> docs ch03 01 variables.
"""

from __future__ import annotations

import math
import re
from hashlib import blake2b
from itertools import chain

import numpy as np

FIELDS = ("body", "heading", "title", "path", "context")
WEIGHTS = (1.0, 3.0, 2.0, 1.5, 1.0)  # seed engine defaults
K1 = 1.2
B = 0.5  # seed 0.15; 0.5 measured better on both corpora (docs/lexical.md)
# Confidence floors, calibrated in docs/confidence.md (bench/confidence.py): answerable queries
# against made-up-term and chimera queries on rust-book and eips.
DEFAULT_SEPARATION_FLOOR = 0.05  # BM25F score gap (S0 - S1) / S0; the seed engine used 0.1
DEFAULT_DOC_COVERAGE_FLOOR = 0.7  # the seed engine left it off (0.0)
SEMANTIC_SEPARATION_FLOOR = 0.0  # cosine gap: measured not to tell right from wrong (off)
SEGMENT_VERSION = 1

_NF = len(FIELDS)
_TF_MAX = np.iinfo(np.uint16).max

STOPWORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "s",
        "so",
        "t",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    )  # fmt: skip
)

_WORD_RE = re.compile(r"[^\W_]+")
_EXT_RE = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_VOWELS = frozenset("aeiouy")

_STEP2 = (
    "ization", "isation", "ation", "ition", "ement", "ment", "ence", "ance",
    "ency", "ancy", "ness", "able", "ible", "ive", "ity", "ize", "ise",
    "ent", "ant", "iz", "is",
)  # fmt: skip


# --------------------------------------------------------------------------- analyzer


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


def stem(word: str) -> str:
    """Light English stemmer for a case-folded word (see module docstring)."""
    if len(word) < 3 or not (word.isascii() and word.isalpha() and word.islower()):
        return word
    w = word
    # 1. inflection
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        w = w[:-1]
    for suf in ("ing", "ed"):
        if w.endswith(suf):
            rest = w[: -len(suf)]
            if len(rest) >= 2 and _has_vowel(rest):
                w = rest
                if len(w) >= 3 and w[-1] == w[-2] and w[-1] not in "lsz" + "aeiou":
                    w = w[:-1]
            break
    if w.endswith("ly") and len(w) - 2 >= 4:
        w = w[:-2]
    # 2. derivation
    for _ in range(2):
        if not w.endswith(_STEP2):
            break
        for suf in _STEP2:
            if w.endswith(suf) and len(w) - len(suf) >= 4:
                w = w[: -len(suf)]
                break
        else:
            break
    # 3. final e
    if w.endswith("e") and len(w) >= 3 and w[-2] != "e":
        w = w[:-1]
    # 4. consonant + y -> i
    if w.endswith("y") and len(w) >= 3 and w[-2] not in _VOWELS:
        w = w[:-1] + "i"
    return w


def _term_of_word(word: str) -> str | None:
    """Analysed term for one raw token, or None for a stopword."""
    f = word.casefold()
    if f in STOPWORDS:
        return None
    return stem(f)


def term_hash(term: str) -> int:
    """Stable 64-bit id of an analysed term."""
    return int.from_bytes(blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


def analyze(text: str) -> list[str]:
    """Analysed terms of ``text`` in order (duplicates kept, stopwords dropped)."""
    out = []
    for w in _WORD_RE.findall(text):
        t = _term_of_word(w)
        if t is not None:
            out.append(t)
    return out


def query_terms(text: str) -> list[tuple[str, str]]:
    """(surface spelling, analysed term) per distinct term, in order; stopwords dropped."""
    seen: set[str] = set()
    out = []
    for w in _WORD_RE.findall(text):
        t = _term_of_word(w)
        if t is None or t in seen:
            continue
        seen.add(t)
        out.append((w, t))
    return out


def tokenize_path(path: str) -> list[str]:
    """Path components as raw words: 'docs/ch03-01-variables.md' -> docs ch03 01 variables."""
    return _WORD_RE.findall(_EXT_RE.sub("", path.replace("\\", "/")))


# --------------------------------------------------------------------------- segments


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


# ASCII bytes that can never be part of a word become spaces; bytes >= 0x80 are kept, so
# a raw token is a run of ASCII alphanumerics and non-ASCII characters. Every raw token
# is then split exactly by _WORD_RE (once per distinct token, cached): the result equals
# _WORD_RE.findall(text), at the speed of bytes.translate + bytes.split.
_SEP_TABLE = bytes(
    c if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c >= 128) else 32 for c in range(256)
)
_RAW_CACHE: dict[bytes, tuple[int, ...]] = {}
_RAW_CACHE_MAX = 2_000_000


def _raw_terms(raw: bytes) -> tuple[int, ...]:
    """Term hashes of one raw token (usually one; none for stopwords)."""
    hs = _RAW_CACHE.get(raw)
    if hs is None:
        hs = _raw_terms_uncached(raw)
        if len(_RAW_CACHE) >= _RAW_CACHE_MAX:
            _RAW_CACHE.clear()
        _RAW_CACHE[raw] = hs
    return hs


def _raw_terms_uncached(raw: bytes) -> tuple[int, ...]:
    out = []
    # pure ASCII alphanumerics are exactly one word; anything else goes through the regex
    words = (
        (raw.decode("ascii"),)
        if raw.isalnum()
        else _WORD_RE.findall(raw.decode("utf-8", "surrogatepass"))
    )
    for w in words:
        t = _term_of_word(w)
        if t is not None:
            out.append(term_hash(t))
    return tuple(out)


_SENTINEL = b"\xff"  # never occurs in UTF-8: separates texts inside one bytes blob
# A body longer than this is counted chunk by chunk into (term, count) pairs instead of going
# through the per-token arrays below, which cost ~25 bytes of memory per byte of text (a 49 MB
# single-line file peaked at 1.3 GB). The segment is the same array for array.
_HUGE = 1 << 20
_CHUNK = 1 << 20


def _term_counts(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique term hashes, their counts) of one text, read in chunks cut at separator bytes,
    so memory follows the distinct tokens of a chunk and the distinct terms, not the text's length."""
    from collections import Counter

    data = text.encode("utf-8", "surrogatepass")
    counts: Counter = Counter()
    cache: dict[bytes, tuple[int, ...]] = {}  # its own, bounded: a text of distinct tokens must not fill
    pos, n = 0, len(data)                     # the shared cache (two million entries) for one record
    while pos < n:
        end = min(pos + _CHUNK, n)
        while end < n and _SEP_TABLE[data[end]] != 32:  # never cut inside a token (or a character)
            end += 1
        for raw, k in Counter(data[pos:end].translate(_SEP_TABLE).split()).items():
            hs = cache.get(raw)
            if hs is None:
                if len(cache) >= 250_000:
                    cache.clear()
                hs = cache[raw] = _raw_terms_uncached(raw)
            for h in hs:
                counts[h] += k
        pos = end
    if not counts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    hashes = np.fromiter(counts.keys(), dtype=np.uint64, count=len(counts))
    tf = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    order = np.argsort(hashes)
    return hashes[order], tf[order]


def build_segment(docs: list[tuple[int, str, str, str, str, str]]) -> dict[str, np.ndarray]:
    """One segment for ``docs`` = (slot, body, heading, title, path, context) per record.

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
    sep = b" " + _SENTINEL + b" "
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
            col = [_EXT_RE.sub("", p, count=1) for p in col]
        distinct = {t: i for i, t in enumerate(dict.fromkeys(col))}
        text_ids.append(np.fromiter(map(distinct.__getitem__, col), dtype=np.int64, count=n_docs))
        blob = sep.join([t.encode("utf-8", "surrogatepass") for t in distinct])
        t = blob.translate(_SEP_TABLE).split()
        col_ntok.append(len(t))
        toks.extend(t)
    index = {w: i for i, w in enumerate(dict.fromkeys(toks))}
    uniq = list(index)
    sent = index.get(_SENTINEL, -1)
    per = [() if w == _SENTINEL else _raw_terms(w) for w in uniq]
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


def _alive_masks(segments: list[dict], live: np.ndarray) -> list[np.ndarray]:
    """Per segment, bool[n_docs]: live slot and not superseded by a later segment."""
    live = np.asarray(live, dtype=bool)
    n = len(live)
    claimed = np.zeros(n, dtype=bool)
    masks: list[np.ndarray] = [None] * len(segments)  # type: ignore[list-item]
    for i in range(len(segments) - 1, -1, -1):
        slots = np.asarray(segments[i]["doc_slots"])
        ok = (slots >= 0) & (slots < n)
        s = slots[ok]
        m = np.zeros(len(slots), dtype=bool)
        m[ok] = live[s] & ~claimed[s]
        claimed[s] = True
        masks[i] = m
    return masks


MERGE_CHUNK = 1 << 18  # postings gathered per step of a merge (bounds its working memory)


def merge_segments(
    segments: list[dict], live: np.ndarray, renumber: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """One segment with only the live docs (newest segment wins per slot).

    ``renumber`` (optional): int array old_slot -> new_slot (-1 = drop).
    Docs of the result are ordered by (new) slot.

    Postings move whole (their tf rows are not re-counted): a live doc comes from exactly one
    segment, so no (term, doc) pair can occur twice and postings are only gathered and ordered.
    Memory stays near the size of the result: the term-hash space is cut into ranges of about
    MERGE_CHUNK postings; each range is gathered from every segment (one searchsorted per
    segment), ordered by (term, doc) and written into the preallocated result, so working
    arrays stay a range's size whatever the corpus size.
    """
    masks = _alive_masks(segments, live)
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
        base += nkeep
    if base == 0:
        return _empty_segment()
    n_docs = base
    slots = np.concatenate(slot_parts).astype(np.int64)
    order = np.argsort(slots, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(n_docs)
    out = _empty_segment()
    out["doc_slots"] = np.ascontiguousarray(slots[order])
    out["doc_len"] = np.ascontiguousarray(np.concatenate(len_parts)[order], dtype=np.uint32).reshape(n_docs, _NF)
    del slot_parts, len_parts, slots, order
    # input doc index -> result doc index (-1: dropped), and the live postings of each segment
    n_post = 0
    for i, (seg, idx) in enumerate(zip(segments, doc_maps, strict=True)):
        idx = np.where(idx >= 0, rank[np.maximum(idx, 0)], -1)
        doc_maps[i] = idx
        pd = np.asarray(seg["post_doc"])
        if len(pd):
            n_post += int(np.count_nonzero(idx[pd] >= 0))
    post_doc = np.empty(n_post, dtype=np.int32)
    post_tf = np.empty((n_post, _NF), dtype=np.uint16)
    term_parts, count_parts = [], []
    n_chunks = 1 << max(0, (n_post // MERGE_CHUNK).bit_length())
    bounds = [np.uint64(k * (1 << 64) // n_chunks) for k in range(n_chunks)] + [None]
    pos = 0
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        hs, ds, tfs = [], [], []
        for seg, idx in zip(segments, doc_maps, strict=True):
            terms = seg["terms"]
            i0 = int(np.searchsorted(terms, lo)) if lo else 0
            i1 = int(np.searchsorted(terms, hi)) if hi is not None else len(terms)
            if i0 >= i1:
                continue
            offs = np.asarray(seg["offsets"][i0 : i1 + 1])
            p0, p1 = int(offs[0]), int(offs[-1])
            d = idx[np.asarray(seg["post_doc"][p0:p1])]
            keep = d >= 0
            if not keep.any():
                continue
            hs.append(np.repeat(np.asarray(terms[i0:i1]), np.diff(offs))[keep])
            ds.append(d[keep])
            tfs.append(np.asarray(seg["post_tf"][p0:p1])[keep])
        if not hs:
            continue
        h = np.concatenate(hs)
        uterms, inv = np.unique(h, return_inverse=True)
        del h, hs
        d = np.concatenate(ds)
        o = np.argsort(inv.astype(np.int64) * n_docs + d)  # (term, doc) pairs are unique
        k = len(o)
        post_doc[pos : pos + k] = d[o]
        post_tf[pos : pos + k] = np.concatenate(tfs)[o]
        pos += k
        term_parts.append(uterms)
        count_parts.append(np.bincount(inv, minlength=len(uterms)))
    if not term_parts:
        return out
    out["terms"] = np.ascontiguousarray(np.concatenate(term_parts), dtype=np.uint64)
    offsets = np.zeros(len(out["terms"]) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(count_parts), out=offsets[1:])
    out["offsets"] = offsets
    out["post_doc"] = post_doc
    out["post_tf"] = post_tf
    return out


# --------------------------------------------------------------------------- scoring


class Collection:
    """Query-time statistics over live docs: alive masks, N, average field lengths.

    Depends only on the segments and the live mask, not on the question: a caller that knows
    neither changed (search.Session, between questions to an unchanged index) builds it once and
    passes it to ``score`` and ``confidence``."""

    def __init__(self, segments: list[dict], live: np.ndarray):
        self.segments = segments
        self.n_slots = len(live)
        self.masks = _alive_masks(segments, live)
        self._by_slot: list = [None] * len(segments)  # per segment, (doc indices in slot order, their slots)
        n = 0
        tot = np.zeros(_NF, dtype=np.float64)
        for seg, m in zip(segments, self.masks, strict=True):
            k = int(m.sum())
            if k:
                n += k
                tot += np.asarray(seg["doc_len"])[m].sum(axis=0, dtype=np.float64)
        self.N = n
        avg = tot / n if n else np.ones(_NF)
        self.avglen = np.where(avg > 0, avg, 1.0)

    def _postings(self, term: str):
        h = np.uint64(term_hash(term))
        for i, (seg, m) in enumerate(zip(self.segments, self.masks, strict=True)):
            terms = seg["terms"]
            j = int(np.searchsorted(terms, h))
            if j >= len(terms) or terms[j] != h:
                continue
            lo, hi = int(seg["offsets"][j]), int(seg["offsets"][j + 1])
            pd = np.asarray(seg["post_doc"][lo:hi])
            am = m[pd]
            if not am.any():
                continue
            yield i, seg, pd[am], np.asarray(seg["post_tf"][lo:hi])[am]

    def postings(self, term: str):
        """[(segment, alive doc indices, tf rows)] for the live postings of ``term``."""
        return [(seg, pd, tf) for _i, seg, pd, tf in self._postings(term)]

    def docs_of(self, i: int, slots: np.ndarray) -> np.ndarray:
        """Doc index in segment ``i`` of each slot (-1 where the segment holds none)."""
        if self._by_slot[i] is None:
            ds = np.asarray(self.segments[i]["doc_slots"])
            order = np.argsort(ds, kind="stable")
            self._by_slot[i] = (order, ds[order])
        order, sorted_slots = self._by_slot[i]
        if len(sorted_slots) == 0:
            return np.full(len(slots), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(sorted_slots, slots), len(sorted_slots) - 1)
        return np.where(sorted_slots[pos] == slots, order[pos], -1)

    def idf(self, df: int) -> float:
        return math.log((self.N - df + 0.5) / (df + 0.5) + 1.0)


def _distinct(query: list[str]) -> list[str]:
    return list(dict.fromkeys(query))


def score(query: list[str], segments: list[dict], live: np.ndarray, *, weights=None, k1: float | None = None,
          b: float | None = None, col: Collection | None = None) -> np.ndarray:
    """BM25F scores per slot, float32[len(live)]; 0 for non-matching and dead slots.

    ``weights``/``k1``/``b`` default to WEIGHTS/K1/B (overridable for bench/lexical_tune.py).
    ``col``: the Collection of these segments and live mask, when the caller keeps one.
    """
    col = col or Collection(segments, live)
    out = np.zeros(col.n_slots, dtype=np.float64)
    w = np.asarray(WEIGHTS if weights is None else weights, dtype=np.float64)
    K1_, B_ = (K1 if k1 is None else k1), (B if b is None else b)
    for term in _distinct(query):
        plist = col.postings(term)
        if not plist:
            continue
        idf = col.idf(sum(len(p[1]) for p in plist))
        for seg, pd, tf in plist:
            lens = np.asarray(seg["doc_len"])[pd]
            norm = (1.0 - B_) + B_ * (lens / col.avglen)
            tft = (tf * (w / norm)).sum(axis=1)
            out[np.asarray(seg["doc_slots"])[pd]] += idf * tft * (K1_ + 1.0) / (tft + K1_)
    return out.astype(np.float32)


def _r4(x: float) -> float:
    return round(min(1.0, max(0.0, float(x))), 4)


def confidence(
    query_text: str,
    ranked_slots,
    ranked_scores: np.ndarray,
    segments: list[dict],
    live,
    *,
    separation_floor: float,
    doc_coverage_floor: float = 0.0,
    verified: str | None = None,
    col: Collection | None = None,
) -> dict:
    """The confidence block for a ranked list (lexical or semantic).

    ``ranked_slots``: per ranked row, a slot, or a tuple of slots for a row merged from several
    records (the row holds a term when any of its records does); ``ranked_scores`` one per row.

    * coverage: idf mass of the query's distinct terms with df > 0 over the idf
      mass of all of them (0 if that is 0).
    * doc_coverage: idf mass of query terms present in the top-ranked row
      (``ranked_slots[0]``) over the query's idf mass; 1.0 when there are no results.
    * support: number of ranked rows that contain at least one query term (live
      postings). For lexical results this equals the count of scores > 0 (a BM25F
      score is > 0 exactly when a query term occurs); for semantic results
      (cosine scores) it counts rows that actually mention a query word.
    * separation: over S = the ranked scores > 0, sorted descending:
      (S0 - S1) / S0 if |S| >= 2, 1.0 if |S| == 1, 0.0 if |S| == 0.
    * missing: query words with df 0, in the user's spelling, in order.
    * ``verified`` (optional, from the freshness check): "stale" lands in partial;
      included in the block only when given.

    Numbers are clamped to [0, 1] and rounded to 4 dp before the ladder runs:
    support == 0 -> none; missing or stale -> partial; doc_coverage <
    doc_coverage_floor -> partial; separation < separation_floor -> weak;
    else grounded. answerable = band != "none".
    """
    col = col or Collection(segments, live)
    rows = [np.atleast_1d(np.asarray(r, dtype=np.int64)) for r in ranked_slots]
    flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    n_rows = len(rows)
    scores = np.asarray(ranked_scores, dtype=np.float64).ravel()
    qt = query_terms(query_text)
    contains = np.zeros(n_rows, dtype=bool)
    top_has: list[bool] = []
    idfs: list[float] = []
    missing: list[str] = []
    present: list[bool] = []
    for surface, term in qt:
        plist = list(col._postings(term))
        df = sum(len(p[2]) for p in plist)
        idfs.append(col.idf(df))
        present.append(df > 0)
        if df == 0:
            missing.append(surface)
        hit = np.zeros(n_rows, dtype=bool)
        for i, _seg, pd, _tf in plist:  # a row's doc in this segment among the term's (ascending) postings
            docs = col.docs_of(i, flat)
            at = np.minimum(np.searchsorted(pd, docs), len(pd) - 1)
            hit[owner[(docs >= 0) & (pd[at] == docs)]] = True
        contains |= hit
        top_has.append(bool(n_rows) and bool(hit[0]))
    total = sum(idfs)
    coverage = sum(i for i, p in zip(idfs, present, strict=True) if p) / total if total > 0 else 0.0
    if n_rows == 0:
        doc_cov = 1.0
    else:
        doc_cov = (
            sum(i for i, h in zip(idfs, top_has, strict=True) if h) / total if total > 0 else 0.0
        )
    s = np.sort(scores[scores > 0])[::-1]
    if len(s) >= 2:
        separation = (s[0] - s[1]) / s[0]
    elif len(s) == 1:
        separation = 1.0
    else:
        separation = 0.0
    support = int(contains.sum())
    coverage, doc_cov, separation = _r4(coverage), _r4(doc_cov), _r4(separation)
    if support == 0:
        band = "none"
    elif missing or verified == "stale" or doc_cov < doc_coverage_floor:
        band = "partial"
    elif separation < separation_floor:
        band = "weak"
    else:
        band = "grounded"
    block = {
        "band": band,
        "answerable": band != "none",
        "coverage": coverage,
        "separation": separation,
        "separation_floor": float(separation_floor),
        "doc_coverage": doc_cov,
        "doc_coverage_floor": float(doc_coverage_floor),
        "support": support,
        "missing": missing,
    }
    if verified is not None:
        block["verified"] = verified
    return block
