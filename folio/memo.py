"""What a question derives from the index alone, kept per open store while the index is unchanged.

Owns the one rule for keeping such values (lexical collection statistics, tie keys, each file's
record order) between questions: they are keyed by the store's live arrays, which the store renews
whenever any connection commits. Must not read the index itself or decide what is kept (planes.py
and rows.py put their values in).
"""

from __future__ import annotations

import weakref

_MEMOS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def memo(store) -> dict:
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
