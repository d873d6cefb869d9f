"""`folio ls`: the documents the filters keep, gathered as data (render prints them).

A document is kept exactly when `folio query` with the same `--where`, `--exclude-pointed-by` and
`--identity` would keep its sections (filters.documents): so an agent can list what a filter keeps
in one call, without a question and without a server (no vector is read). Reads each store in a
snapshot; a file held by two of the listed indexes (one corpus inside another) is listed once, from
the inner index, as a query ranks it. Must not print.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass
class Listing:
    roots: list[Path]
    documents: list = field(default_factory=list)  # filters.Listed, in root then path order
    dropped: int = 0  # documents the join dropped
    hints: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # the refresh's


def run(roots: list[Path], where=(), exclude_pointed_by=(), identity: str = "id", settings=None) -> Listing:
    """Open each corpus's index, list, close (the CLI: one call)."""
    from folio import filters
    from folio.store import Store

    filters.parse(where, exclude_pointed_by, identity)  # refused (exit 2) before any index is opened

    def listed(kept: list[Path]) -> Listing:
        stores = []
        try:
            for root in kept:
                stores.append(Store.open(root))
            return gather(stores, where, exclude_pointed_by, identity, settings)
        finally:
            for store in stores:
                store.close()

    return leaving_out_damaged(roots, listed)


def leaving_out_damaged(roots: list[Path], listed: Callable[[list[Path]], Listing]) -> Listing:
    """`listed(roots)`; over several corpora, one whose index is damaged is left out and the others
    listed (the first notice names it and the fix), as a query ranks them. The last one left, or a
    single corpus, raises its sentence. The damaged one is the one the error names, or, for SQLite's
    error on a page it could not read, the one whose check fails (store.damage_among)."""
    from folio.store import damage_among

    left: dict[Path, str] = {}
    while True:
        kept = [root for root in roots if root not in left]
        try:
            listing = listed(kept)
        except Exception as e:
            found = damage_among(e, kept)
            if found is None:
                raise
            root, said = found
            if len(kept) == 1:
                raise said from None
            left[root] = f"{said}; until then this listing leaves out the corpus at {root}"
            continue
        listing.notices[:0] = list(left.values())
        return listing


def gather(stores: list, where=(), exclude_pointed_by=(), identity: str = "id", settings=None) -> Listing:
    """The listing over open stores (`folio mcp` keeps them open between calls). With `settings`,
    the listed files that changed since indexing (as `folio index` finds them: changes.changed,
    which reads only a file whose stat cannot tell, such as one touched) are brought up to date
    first, as a query does the files behind its rows, without the server: a gone file leaves the
    listing, an edited frontmatter is read anew; a file whose text changed keeps what the index
    holds, marked stale. A file touched with its bytes unchanged is left as it is: nothing to say.
    Every indexed file is looked at, not only the listed ones: a frontmatter edited into the filter
    (`status: Draft` for `--where status=Draft`), or a pointer added for the join, counts too."""
    listing = _listing(stores, where, exclude_pointed_by, identity)
    if settings is None:
        return listing
    every = _listing(stores, (), (), identity).documents if where or exclude_pointed_by else listing.documents
    changed = _changed(stores, every)
    if not changed:
        return listing
    from folio.search import refresh_offline

    moved, notice, kept = refresh_offline(stores, changed, settings, listing=True)
    if moved:
        listing = _listing(stores, where, exclude_pointed_by, identity)
    at = {s.root: i for i, s in enumerate(stores)}
    listing.documents = [replace(d, freshness="stale") if (at[d.root], d.path) in kept else d
                         for d in listing.documents]
    listing.notices.append(notice)
    return listing


def _listing(stores: list, where, exclude_pointed_by, identity: str) -> Listing:
    import contextlib

    from folio import filters

    with contextlib.ExitStack() as snaps:
        for store in stores:
            snaps.enter_context(store.snapshot())
        docs, dropped, hints = filters.documents(stores, where, exclude_pointed_by, identity)
    return Listing([s.root for s in stores], _once(docs, [s.root for s in stores]), dropped, hints)


def _changed(stores: list, docs: list) -> dict[int, set[str]]:
    """{store index: paths} of the listed files gone or changed since indexing (changes.changed)."""
    from folio.changes import changed
    from folio.walk import stat_file

    at = {s.root: i for i, s in enumerate(stores)}
    out: dict[int, set[str]] = {}
    for d in docs:
        st = stat_file(d.root, d.path)
        if st is None or changed(d.root, d.path, *st, d.stamp):
            out.setdefault(at[d.root], set()).add(d.path)
    return out


def _once(docs: list, roots: list[Path]) -> list:
    """Each file once: a document an outer index also holds is kept from the innermost index."""
    if len(roots) < 2:
        return docs
    depth = {r: len(Path(os.path.realpath(r)).parts) for r in roots}
    best: dict[str, object] = {}
    for d in docs:
        full = os.path.realpath(os.path.join(d.root, d.path))
        kept = best.get(full)
        if kept is None or depth[d.root] > depth[kept.root]:
            best[full] = d
    keep = {id(d) for d in best.values()}
    return [d for d in docs if id(d) in keep]
