"""`folio similar`: the sections nearest to a section already indexed, to a file's sections, or to a
text, by the vectors the index holds ("what else says this?").

A source held by the index is ranked from its stored vectors: no request to the embeddings server
(only a source section still without a vector, or a text given instead of a path, is embedded, as a
document). Each candidate scores its cosine to the nearest source section (1.0: the same text), so
near-duplicates come first; the source sections themselves are left out (in every served index that
holds the file). Candidates, filters, the shadowing of a nested index's files, the merging of
touching rows and their freshness are the query's (planes.candidates, planes.shadow_nested,
rows.select, search.hits_of). Owns finding the source's sections and vectors and scoring candidates against them:
the source read in one snapshot, the ranking (its own slots, candidates, rows, their files) in another.
Over several corpora, one whose index is damaged is left out as a query leaves it (search.Session.asked),
unless it holds the source.
Must not print, and must not write the index except through the query's refresh of a changed source.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from folio.errors import FolioError
from folio.search import Answer, Request, Session, files_of, hits_of, settled
from folio.surface import as_printed, invoke, mcp, tool

CHUNK = 16  # source vectors scanned per product: a file of many sections never makes an (N, k) array at once


@dataclass
class Source:
    """What `similar` starts from: a spec (`path`, `path:start-end`), or a text (`-`)."""
    spec: str
    root: Path | None = None  # the corpus holding the file
    path: str | None = None  # root-relative
    start: int | None = None
    end: int | None = None
    text: str | None = None
    refs: list[str] = field(default_factory=list)  # the source sections, path:start-end (root-relative)
    embedded: int = 0  # source sections sent to the server (0: every one had its vector)
    held: bool = False  # the index held the file before this command refreshed it


@dataclass
class Similar:
    answer: Answer
    source: Source
    likes: list[str]  # per row: the source section it is nearest to (path:start-end)


def parse(spec: str, base: Path) -> tuple[str, int | None, int | None]:
    """(path as given, start, end): `PATH`, or `PATH:START-END` as `folio query` prints it. A file
    whose own name ends in `:N` is a path; a range no file has (`50-10`, `0-2`) is refused, naming it."""
    from folio.show import SPEC_RE, parse_spec

    if os.path.isfile(os.path.join(base, os.path.expanduser(spec))) or not SPEC_RE.match(spec.strip()):
        return spec, None, None
    return parse_spec(spec)


def source_of(roots: list[Path], spec: str, cwd: Path | None = None) -> Source:
    """The source a spec names: the served corpus holding its file (the deepest when nested), the
    root-relative path and the range. `-`: a text, read by the caller."""
    from folio.walk import corpus_path

    base = cwd or Path.cwd()
    given, start, end = parse(spec, base)
    full = Path(os.path.normpath(os.path.join(base, os.path.expanduser(given))))
    real = Path(os.path.realpath(full))
    inside = [r for r in roots if r == full or r in full.parents or Path(os.path.realpath(r)) in real.parents]
    if not inside:
        raise FolioError(f"{given} lies in none of the corpora searched ({', '.join(map(str, roots))}): name a file "
                         f"under one of them, or add its corpus with --root")
    root = max(inside, key=lambda r: len(r.parts))
    return Source(spec, root, corpus_path(root, given, base), start, end)


def run(session: Session, source: Source, req: Request, deadline: float | None = None) -> Similar:
    """Rank every served corpus's sections by their cosine to the source's nearest section. Over
    several corpora, one whose index is damaged is left out, said in a notice, as a query leaves it
    out (Session.asked); the source's own corpus cannot be: its damage is the error, naming its index."""
    deadline = deadline or time.monotonic() + session.settings["query_timeout"]
    if req.where or req.exclude_pointed_by:
        from folio import filters

        filters.parse(req.where, req.exclude_pointed_by, req.identity)
    return session.asked(lambda: _run(session, source, req, deadline), needed=source.root)


def _run(session: Session, source: Source, req: Request, deadline: float) -> Similar:
    import numpy as np

    from folio import planes, timing
    from folio.rows import select

    corpora = session.stores()
    for store in corpora:
        if not store.dim or not store.has_vectors():
            raise FolioError(f"the index at {store.root} holds no vectors, and {tool('similar')} ranks by them: "
                             f"{invoke('index')} {'' if mcp() else 'there '}with the embeddings server up")
    planes.check_together(corpora, semantic=True)
    notices = session.left_out()
    if source.text is None:
        _refresh_source(session, corpora, source, deadline, req.refresh, notices)
    vectors, labels = _source_vectors(session, corpora, source, deadline, notices)
    timing.lap("request")

    def ranked():
        # One committed state for the whole ranking: the source's own slots, the candidates and their
        # scores, the rows and the files behind them, as a query ranks (a writer committing between
        # two reads, a watcher or the refresh above, never pairs one state's lines with another's stamp)
        with _snapshots(corpora):
            own = _own(corpora, source, session.settings)
            dense, dropped, hints = [], 0, []
            pointers = None
            if req.exclude_pointed_by and len(corpora) > 1:
                from folio import filters

                pointers = filters.collect_pointers(corpora, req.exclude_pointed_by)
            for i, store in enumerate(corpora):
                slots, gone, said = planes.candidates(store, req, vectors_only=True, pointers=pointers)
                dropped += gone
                hints += [h for h in said if h not in hints]
                dense.append(_scan(store, vectors, slots, own.get(i, ())))
            timing.lap("scan")
            shadowed = planes.shadow_nested(corpora, dense)  # a file two indexes hold ranks once, as in a query
            rows = select(corpora, dense, req.limit)
            files = files_of(corpora, rows)
            likes = []
            for c, _score, group in rows:  # the source section each row is nearest to
                got = corpora[c].read_vectors([r.slot for r in group])
                likes.append(labels[int(np.argmax((got @ vectors.T).max(axis=0)))] if len(labels) > 1 else labels[0])
        return rows, files, likes, dropped, hints, shadowed

    rows, files, likes, dropped, hints, shadowed = settled(ranked)
    notices += shadowed
    hits = hits_of(corpora, rows, files)
    first = corpora[0].meta
    answer = Answer(source.spec, "semantic", first.model or "", first.endpoint or "", session.roots, hits=hits,
                    notices=notices, hints=hints, dropped=dropped)
    return Similar(answer, source, likes)


def _snapshots(corpora):
    import contextlib

    stack = contextlib.ExitStack()
    for store in corpora:
        stack.enter_context(store.snapshot())
    return stack


def _scan(store, vectors, slots, own):
    """Each slot's cosine to its nearest source vector, -inf outside `slots` and on the source's own."""
    import numpy as np

    from folio.planes import products

    m = store.matrix()
    best = None
    for i in range(0, len(vectors), CHUNK):
        part = vectors[i:i + CHUNK]
        # a few vectors: the matrix read once, in blocks split between threads (planes.products: at
        # 526k x 768, 4 vectors 141 ms against 266 ms for one (n, dim) x (dim, 4) product)
        d = np.asarray(m @ part[0]) if len(part) == 1 else \
            products(np.asarray(m), np.ascontiguousarray(part.T, dtype=np.float32)).max(axis=1)
        best = d if best is None else np.maximum(best, d, out=best)
    mask = np.ones(len(best), dtype=bool)
    mask[slots[slots < len(best)]] = False
    mask[[s for s in own if s < len(best)]] = True
    np.putmask(best, mask, np.float32(-np.inf))
    return best


def _refresh_source(session: Session, corpora: list, source: Source, deadline: float, refresh: bool,
                    notices: list[str]) -> None:
    """Whether the index holds the source file (`held`); one changed since indexing is re-indexed
    first (`refresh`), before its range is looked for: the range may name lines added since."""
    store = _holding(corpora, source)
    source.held = store.stamp(source.path) is not None
    if source.held and refresh and _stale(store, source.path):
        from folio import indexer

        _moved, notice = indexer.refresh(store, {source.path}, session.settings, deadline)
        notices.append(notice.replace("behind this result", "of the source"))


def _source_vectors(session: Session, corpora: list, source: Source, deadline: float, notices: list[str]):
    """(the source's vectors (k, dim), a label per vector), its rows and vectors read in one snapshot
    (a refresh that failed mid-run may have committed part of the file: the rows are read with the
    matrix they name; one another writer replaced meanwhile is read again). A section without a
    vector yet is embedded from the file's lines, read once."""
    import numpy as np

    if source.text is not None:
        return _embed_text(session, corpora[0], source, deadline)
    store = _holding(corpora, source)

    def read():
        with store.snapshot():
            rows = _rows(store, source, session.settings)
            have = [r for r in rows if r.vec]
            return rows, have, (store.read_vectors([r.slot for r in have]) if have else
                                np.zeros((0, store.dim), np.float32))

    rows, have, vectors = settled(read)  # a writer switched the matrix's generation under the snapshot: again
    labels = [f"{source.path}:{r.start}-{r.end}" for r in have]
    missing = [r for r in rows if not r.vec]
    if missing:
        from folio import sections as sec
        from folio.walk import read_bytes

        try:  # read once: a file deleted (or replaced) since its rows were looked at is said, not a traceback
            raw = read_bytes(store.root, source.path)
        except FileNotFoundError:
            raise _gone(source.path) from None
        except OSError as e:
            raise FolioError(f"{source.path} could not be read ({e.strerror or e})") from None
        lines = sec.decode(raw)[0].split("\n")
        texts = ["\n".join(lines[r.start - 1:r.end]) for r in missing]
        try:
            got = _embed(session, store, texts, deadline)
        except FolioError as e:
            if not have:
                up = "once the server is up" if mcp() else "with the server up"
                raise FolioError(f"{source.spec}: its sections have no vector yet and the embeddings server did not "
                                 f"embed them ({e}); {invoke('index')} {up}") from None
            notices.append(f"{len(missing)} of the source's sections have no vector yet and the server did not embed "
                           f"them ({e}): ranked from the other {len(have)}")
        else:
            vectors = np.concatenate([vectors, got])
            labels += [f"{source.path}:{r.start}-{r.end}" for r in missing]
            source.embedded = len(missing)
    source.refs = labels
    return vectors, labels


def _holding(corpora: list, source: Source):
    """The store of the corpus holding the source's file (never left out: Session.asked's `needed`)."""
    return next(store for store in corpora if store.root == source.root)


def _own(corpora: list, source: Source, settings) -> dict:
    """{corpus index: slots} of the source's sections in the state being ranked, in every served index
    that holds its file, so the source never ranks as its own neighbour ({} for a text)."""
    if source.text is not None:
        return {}
    i = [store.root for store in corpora].index(source.root)
    try:
        rows = _rows(corpora[i], source, settings)
    except FolioError:  # the file or its range gone since its vectors were read: none of it ranks
        rows = []
    return {i: [r.slot for r in rows], **_copies(corpora, i, source.path)}


def _copies(corpora: list, i: int, path: str) -> dict:
    """{corpus index: slots} of the source file as the other served indexes hold it (one corpus nested
    in another: both hold its files), so the source never ranks as its own neighbour."""
    full = os.path.realpath(os.path.join(corpora[i].root, path))
    out = {}
    for j, store in enumerate(corpora):
        rel = os.path.relpath(full, os.path.realpath(store.root))
        if j == i or rel.startswith(".."):
            continue
        stamp = store.stamp(rel.replace(os.sep, "/"))
        if stamp is not None:
            out[j] = [int(s) for s in store.slots_of_files([stamp.id])]
    return out


def _gone(path: str) -> FolioError:
    name = "give as `ref` a file that exists" if mcp() else "name a file that exists"
    return FolioError(f"{path} no longer exists: it was deleted after it was indexed; {name}, {as_printed()}, "
                      f"or restore it and {invoke('index')}")


def _rows(store, source: Source, settings) -> list:
    """The source's rows in the index, or why there are none and the fix (`source.held`: the index
    held the file before this command refreshed it; a refresh drops a file deleted since it was indexed)."""
    from folio.show import never_indexed

    path, full = source.path, os.path.join(store.root, source.path)
    stamp = store.stamp(path)
    if stamp is not None and not os.path.exists(full) and any(not r.vec for r in store.file_rows(stamp.id)):
        stamp = None  # deleted, and not all of it embedded (the index could not be refreshed): not to be read
    if stamp is None:
        # Over MCP the source is the tool's `ref` (or its `text`); there is no stdin to pipe a file into
        if os.path.isdir(full):
            name = "give one of its files as `ref`" if mcp() else "name one of its files"
            raise FolioError(f"{path} is a directory, and {tool('similar')} starts from one file or section: {name} "
                             f"({tool('ls')} lists them){',' if mcp() else ''} {as_printed()}")
        if os.path.isfile(full) and never_indexed(path, settings["extensions"]):
            instead = ("given as `text` instead of `ref`" if mcp() else
                       f"with `folio similar - < {shlex.quote(path)}`")
            raise FolioError(f"{path} is not a file folio indexes (only {', '.join(settings['extensions'])} files, "
                             f"`extensions` in folio.yaml, and no hidden names): compare its text instead, {instead}")
        if os.path.isfile(full):
            follows = ("this server indexes a file as it is written unless its `watch` setting is off" if mcp() else
                       "a running `folio mcp` or `folio index --watch` indexes it as it is written")
            text = ("give the file's text as `text` instead of `ref`" if mcp() else
                    "give its text on stdin (`folio similar - < FILE`)")
            raise FolioError(f"{path} is not in the index at {store.root} yet: {invoke('index')} ({follows}), or {text}")
        if source.held:
            raise _gone(path)
        raise FolioError(f"{path} is not in the index at {store.root}, nor on disk: give "
                         f"{'`ref`' if mcp() else 'a path'} {as_printed()}")
    every = store.file_rows(stamp.id)
    rows = every
    if source.start is not None:
        rows = [r for r in every if r.end >= source.start and r.start <= source.end]
        last = max((r.end for r in every), default=0)
        if not rows and every and source.start > last:
            raise FolioError(f"{path}:{source.start}-{source.end} lies past the end of {path}, whose sections end at "
                             f"line {last}: give a range within 1-{last}, {as_printed()}, or the path alone"
                             f"{' as `ref`' if mcp() else ''} for all of its sections")
        if not rows:
            rows_from = "" if mcp() else " (`folio query` or `folio ls`)"
            raise FolioError(f"{path} holds no indexed section at lines {source.start}-{source.end}: give a "
                             f"range a query row gives{rows_from}, or the path alone{' as `ref`' if mcp() else ''} "
                             f"for all of its sections")
    elif not rows:
        raise FolioError(f"{path} holds no section (it is empty, or not text)")
    return rows


def _stale(store, path: str) -> bool:
    from folio.search import freshness

    return freshness(store.root, store.stamp(path)._asdict()) != "current"


def _embed_text(session: Session, store, source: Source, deadline: float):
    """A text given instead of a path: divided into sections as a file would be, each embedded as a document."""
    from folio import sections as sec

    budget = int(store.meta.budget or session.settings["max_chars"])
    doc = sec.parse_document(source.text, budget)
    records = [r for r in doc.records if r.text.strip()]
    if not records:
        if mcp():
            raise FolioError("`text` holds no section to compare (only frontmatter, or blank lines): give the "
                             "draft's Markdown")
        # a usage error, as an empty `folio query ''` is (exit 2): nothing was given to compare
        raise FolioError("the text given on stdin holds no section (it is empty, or only frontmatter or blank lines): "
                         "give the draft to compare, e.g. `folio similar - < note.md`", exit_code=2)
    vectors = _embed(session, store, [r.text for r in records], deadline)
    labels = [f"-:{r.start}-{r.end}" for r in records]
    source.refs, source.embedded = labels, len(records)
    return vectors, labels


def _embed(session: Session, store, texts: list[str], deadline: float):
    """Texts embedded as the index embeds its sections (the reader's text, the document role)."""
    from folio import space
    from folio.embed import PROBE_TEXT
    from folio.reader import reader_text

    client = session.client(store)
    role = space.recorded_roles(store.meta).document
    got = client.embed([PROBE_TEXT] + [reader_text(t) for t in texts], role=role, deadline=deadline)
    if not space.same_space(got[0], space.fingerprint(store.meta)):  # the fingerprint rides along, as a query's
        raise FolioError(f"the server at {store.meta.endpoint} now answers in another vector space than the one the "
                         f"index at {store.root} was built in: {invoke('index')} to re-embed with it")
    return got[1:]
