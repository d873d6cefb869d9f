"""When an index's lexical plane is analysed again: the analysis version it records, and what a run
and a query do about an older one.

The lexical segments hold term hashes made under analysis.ANALYSIS_VERSION's rules (meta
`analysis`; an index that records none was built under version 1). `folio index` over an index of
another version reads every file again (Store.reread_all): each record keeps its slot and its
vector (its text did not change, so nothing is embedded again) and its lexical document is built
anew; once no file is left to read, the version is recorded and the segments that only held
superseded documents go. Until then a query still answers from the older terms, and says so in one
sentence when its question holds an identifier (the terms that changed). Must not analyse text or
build segments (folio/lexical/), nor print.
"""

from __future__ import annotations

from folio.lexical import ANALYSIS_VERSION
from folio.surface import invoke


def begin(store, notices: list[str]) -> bool:
    """Before a run's pass: whether the index's lexical plane is due to be analysed again (every file
    read again, with a notice saying why); an empty index records the version at once."""
    if store.meta.analysis == ANALYSIS_VERSION:
        return False
    if not store.file_count():
        store.set_meta(analysis=ANALYSIS_VERSION)
        return False
    notices.append("this index's lexical plane was built under older rules (identifiers were matched by "
                   "their parts only): every file is read again to rebuild it (no section is embedded again)")
    store.reread_all()
    return True


def finish(store, before: list[str]) -> None:
    """After a run's pass: once no file waits to be read again, record the version and remove the
    segments of `before` (those that existed when the run began) whose documents all were superseded."""
    if store.meta.analysis == ANALYSIS_VERSION or store.rereads_left():
        return
    import numpy as np

    from folio.lexical.segments import alive_masks

    slots, _ = store.live(vectors_only=False)
    live = np.zeros(store.next_slot(), dtype=bool)
    live[slots] = True
    names, segs = store.segment_names(), store.lex_segments()
    dead = [n for n, m in zip(names, alive_masks(segs, live), strict=True) if n in before and not m.any()]
    if dead:
        store.replace_segments(None, dead)
    store.set_meta(analysis=ANALYSIS_VERSION)


def notice(corpora: list, share: float) -> list[str]:
    """A query's one sentence when an index it ranks from was analysed under older rules and the
    question holds an identifier (`share`: lexical.analysis.identifier_share's of the question;
    the older rules matched an identifier by its parts only)."""
    old = [s for s in corpora if s.meta.analysis != ANALYSIS_VERSION and s.file_count()]
    if not old or not share:
        return []
    where = "this index's" if len(corpora) == 1 else f"the index at {old[0].root}'s"
    return [f"{where} lexical plane was built under older rules that match an identifier by its parts "
            f"only; {invoke('index')} to rebuild it (no section is embedded again)"]
