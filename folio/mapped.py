"""Pages of a memory-mapped file, given back once read.

A read-only file mapping keeps every page it has read resident in the process (its RSS) until the
mapping goes, though the kernel could drop them: a run that reads a corpus's lexical segments or
its whole matrix through their mappings (a merge, compaction) would hold them all. `release` asks
the kernel to drop a mapping's pages from this process now (MADV_DONTNEED: on a read-only file
mapping the pages stay in the page cache and a later read maps them again, so nothing read
changes). Owns nothing else; numpy is not imported here.
"""

from __future__ import annotations

import contextlib
import mmap

_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_WIDE = 2 << 20  # a read may map in the whole large page-cache folio around it: up to this much


def _mapping(a):
    """The open mapping an array was read from (numpy.memmap, as np.load(mmap_mode='r') and
    np.memmap give it), or None: an array in memory, a closed mapping, a platform without madvise."""
    m = getattr(a, "_mmap", None)
    if _DONTNEED is None or m is None or getattr(m, "closed", False):
        return None
    return m


def release(*arrays) -> None:
    """Drop the resident pages of each array mapped from a file; anything else is left as it is."""
    for a in arrays:
        m = _mapping(a)
        if m is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                m.madvise(_DONTNEED)


def release_rows(a, start: int, stop: int) -> None:
    """Drop the resident pages holding rows [start, stop) of an array mapped from a file (a whole
    numpy.memmap), widened to 2 MiB boundaries: a read maps in the page-cache folio around it, which
    on recent kernels can be that large. A reader that moves through many files a range at a time (a
    merge of hundreds of segments) gives back each range once read, so what it holds is one range of
    one file, whatever the number of files."""
    m = _mapping(a)
    if m is None:
        return
    at = getattr(a, "offset", 0) % mmap.ALLOCATIONGRANULARITY  # where the array's data begins in its mapping
    row = a.strides[0] if a.ndim else a.itemsize
    lo = (at + start * row) // _WIDE * _WIDE
    hi = min(len(m), -(-(at + stop * row) // _WIDE) * _WIDE)
    if hi > lo:
        with contextlib.suppress(OSError, ValueError):
            m.madvise(_DONTNEED, lo, hi - lo)
