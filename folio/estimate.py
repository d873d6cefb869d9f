"""How long indexing a corpus takes: `folio doctor`'s speed probe, and the wording of a duration.

Owns the sample of the corpus's own sections the probe times (spread evenly over its files, divided
as `folio index` divides them for this server), sending them as `folio index` does (in its
batches, halving one the server refuses for its size), how many sections still wait for a vector
(the index's own count, and the sample's sections per byte for files it does not hold unchanged),
and `duration`, the one wording `folio doctor` and `folio index` use. Must not print or write the
index (it only reads its stamps and counts, and the files changes.changed reads).
"""

from __future__ import annotations

import time
from pathlib import Path

from folio.verdict import PASS, Check, skip

SPEED_SAMPLE = 64  # sections of the corpus embedded to measure throughput
SAMPLE_FILES = 64  # files spread over the corpus those sections are drawn from


def speed(client, corpus_dir: Path, root: Path | None, settings, budget: int, divide: int | None = None,
          anew: bool = False) -> Check:
    """Report only: sections/s on a sample of this corpus's own sections (sent as `folio index`
    sends them, in its batches), and what that means for the sections not embedded yet. `divide`:
    the characters the long-input probe found folio divides records at for this server (sampled
    records are divided there too, and a batch the server still refuses for its size is halved, as
    `folio index` does, its records that are refused alone left out of the count). `anew`: this
    server's vectors are of another space than the index's (another dimension, or another model by
    the fingerprint probe): `folio index` embeds every section again."""
    from folio.embed import EndpointError
    from folio.reader import reader_text

    texts, ratio, entries = _sample_records(corpus_dir, settings, min(budget, divide) if divide else budget)
    if not texts:
        return skip("speed", f"no Markdown section under {corpus_dir} to time")
    size = max(1, int(settings["batch_size"]))
    sent = [reader_text(t) for t in texts]
    t0 = time.perf_counter()
    done: list[str] = []
    try:
        for i in range(0, len(sent), size):
            done += _timed(client, sent[i:i + size])
    except EndpointError as e:
        return skip("speed", f"the timed requests failed ({e.server or e})")
    took = max(time.perf_counter() - t0, 1e-6)
    if not done:
        return skip("speed", f"the server refused every one of the {len(sent)} sampled sections for its size")
    rate = len(done) / took
    chars = sum(map(len, done)) / took
    sent = done
    left, exact = _not_embedded(root, entries, ratio, anew)
    data = {"sections": len(sent), "seconds": round(took, 3), "sections_per_s": round(rate, 1),
            "chars_per_s": round(chars), "not_embedded": left, "estimate_s": round(left / rate, 1)}
    head = (f"{rate:,.0f} sections/s ({len(sent)} sections of this corpus in {took:.1f} s, "
            f"{chars:,.0f} characters/s)")
    if not left:
        return Check("speed", PASS, f"{head}: every section of this corpus has its vector", data=data)
    return Check("speed", PASS, f"{head}: about {duration(left / rate)} for the {'' if exact else '~'}{left:,} "
                                f"sections not embedded yet (`folio index --jobs N` sends N requests at once)",
                 data=data)


def _timed(client, texts: list[str]) -> list[str]:
    """Embed `texts` (one request), halving a batch the server refuses for its size; returns the ones
    embedded."""
    from folio.embed import EndpointError, Failure

    try:
        client.embed(texts)
        return texts
    except EndpointError as e:
        if e.kind not in (Failure.TOO_LARGE, Failure.REFUSED, Failure.TOO_MANY):
            raise  # about the server, not the batch
        if len(texts) == 1:
            if e.kind == Failure.TOO_MANY:
                raise
            return []  # this record alone is too long for it: `folio index` divides it further
    mid = len(texts) // 2
    return _timed(client, texts[:mid]) + _timed(client, texts[mid:])


def _sample_records(corpus_dir: Path, settings, budget: int) -> tuple[list[str], float, list]:
    """(SPEED_SAMPLE records spread evenly over the records of up to SAMPLE_FILES files spread evenly
    over the corpus, records per byte in those files, the walk's entries). Spread both ways, so the
    sample's lengths (what the server's time goes by) and its records per byte are the corpus's,
    not those of the first files in path order or of the first sections of a file (titles, short
    introductions)."""
    from folio import sections
    from folio.walk import read_bytes, walk

    entries, _ = walk(corpus_dir, settings["extensions"], settings["exclude"])
    ordered = sorted(entries, key=lambda e: e.path)
    step = max(1.0, len(ordered) / SAMPLE_FILES)
    picked = [ordered[int(i * step + step / 2)] for i in range(min(SAMPLE_FILES, len(ordered)))]
    pool, read = [], 0
    for e in picked:
        try:
            raw = read_bytes(corpus_dir, e.path)
        except OSError:
            continue
        if sections.binary_reason(raw):
            continue
        pool.extend(r.text for r in sections.parse_document(sections.decode(raw)[0], budget).records)
        read += len(raw)
    stride = max(1.0, len(pool) / SPEED_SAMPLE)
    texts = [pool[int(i * stride + stride / 2)] for i in range(min(SPEED_SAMPLE, len(pool)))]
    return texts, (len(pool) / read if read else 0.0), entries


def _not_embedded(root: Path | None, entries: list, ratio: float, anew: bool = False) -> tuple[int, bool]:
    """(sections of the corpus without a vector, exact?): the index's own count for the files it holds
    unchanged, and the sample's sections per byte for files new or changed since (or for all, with
    no index). Changed as `folio index` finds it (changes.changed): a file touched with its bytes
    unchanged costs that run no embedding, so it adds none here. Vectors embedded from an older
    record text, or of another space than the server's (`anew`), are all embedded anew by that run:
    every section is left."""
    from folio import store
    from folio.changes import changed
    from folio.errors import FolioError
    from folio.reader import VERSION as READER_VERSION

    stamps, waiting = {}, 0
    if root is not None and store.exists(root):
        try:
            st = store.Store.open(root)
        except FolioError:
            st = None
        if st is not None:
            try:
                stamps = st.stamps()
                anew = anew or (st.meta.dim and st.meta.text != READER_VERSION)
                waiting = st.counts()["sections"] if anew else st.pending_counts()[0]
            finally:
                st.close()
    fresh = [e for e in entries
             if (s := stamps.get(e.path)) is None or changed(root, e.path, e.size, e.mtime_ns, s)]
    guess = round(sum(e.size for e in fresh) * ratio)
    return waiting + guess, not fresh


def duration(seconds: float) -> str:
    """A length of time as a person says it: 40 seconds, 12 minutes, 3.5 hours."""
    if seconds < 1.5:
        return "1 second"
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"
