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


def release(*arrays) -> None:
    """Drop the resident pages of each array mapped from a file (numpy.memmap, as np.load(mmap_mode='r')
    and np.memmap give it); anything else (an array in memory, a platform without madvise) is left as it is."""
    if _DONTNEED is None:
        return
    for a in arrays:
        m = getattr(a, "_mmap", None)
        if m is None or getattr(m, "closed", False):
            continue
        with contextlib.suppress(OSError, ValueError, AttributeError):
            m.madvise(_DONTNEED)
