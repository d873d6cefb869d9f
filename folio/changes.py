"""Whether a file changed since indexing, as an index run decides it: the one verdict `folio status`,
`folio ls` and `folio doctor`'s estimate give, so none of them says "changed" where `folio index`
would re-embed nothing (a `touch`, a checkout: a new mtime, the same bytes).

Owns the rule (the stat prefilter, the racy window, the bytes deciding the rest) and RACY_NS; the
index run applies the same prefilter in SQL over the whole index (Store.clean_stamps) and compares
the hashes of the files it reads. Reads only a file whose stat alone cannot tell: what a check costs
grows with the files touched, not with the tree. Must not write or print.
"""

from __future__ import annotations

from pathlib import Path

# A stamp taken within this long of the file's mtime may predate a second write in the same clock
# tick (git's racy case): such a file is read again, whatever its stat says.
RACY_NS = 2_000_000_000


def unread(size: int, mtime_ns: int, stamp) -> bool:
    """Whether an index run passes this file by unread (the stat prefilter): the size and mtime_ns
    listed are the stamp's, and the stamp was taken well after that mtime."""
    return (size, mtime_ns) == (stamp.size, stamp.mtime_ns) and stamp.stamped_ns - stamp.mtime_ns >= RACY_NS


def changed(root: Path, path: str, size: int, mtime_ns: int, stamp) -> bool:
    """Whether the file at `path` (listed with `size` and `mtime_ns`) differs from what the index
    holds of it (`stamp`: a store Stamp), as an index run finds it: another size is a change; a file
    the stat prefilter passes by is none; any other (the same size, a new mtime: a checkout, a
    `touch`; or inside the racy window) is read and its SHA-256 compared with the stamp's. A stamp
    without one (due to be read anew: Store.reread_all) is judged by its stat alone. A file gone or
    unreadable since it was listed is not what the index holds: changed."""
    if size != stamp.size:
        return True
    if unread(size, mtime_ns, stamp):
        return False
    if not stamp.sha256:
        return mtime_ns != stamp.mtime_ns
    import hashlib

    from folio.walk import read_bytes

    try:
        return hashlib.sha256(read_bytes(root, path)).hexdigest() != stamp.sha256
    except OSError:
        return True
