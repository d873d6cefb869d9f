"""`folio index` around its pass: the lock, the store opened, the pass run, the run finished.

Stat first (a file whose size and mtime_ns match its stamp is never opened, except inside the
2-second racy window), hash second, parse third. A section whose text hash is already indexed keeps
its vector; a renamed file keeps its slots; deleted files' records go. Work is committed in batches
at file boundaries, so a killed run keeps what it finished and the next run resumes; `refresh` does
the same for the few files behind a query's stale rows.

Owns a run's frame: the walking child taken (the one folio.entry forked, else one started here)
and stopped however the run ends, the write lock, the store opened and checked, the target and
budget settled, the pass (pipeline.update) run, this run's lexical segments merged, the clean set
saved, and the files behind a query's stale rows refreshed.
The pass itself, its stages and its progress are pipeline.py's. Must not print: notices and
warnings go to the Report.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from folio import reanalyse, timing
from folio.errors import FolioError
from folio.pipeline import update
from folio.readahead import Listing, WalkAhead, take_early
from folio.report import Report
from folio.surface import invoke
from folio.walk import nesting

__all__ = ["run", "words_first", "refresh", "update", "merge_segments_of_run"]


class _Loading(BaseException):
    """A run's server is loading its model (its first "loading" progress): words_first stops it there.
    Not an Exception, so that no handler on the way takes it for a failure (as watch.Yielded)."""


def words_first(root: Path, settings, *, progress=None, on_wait=None, **given) -> Report:
    """run(), where a server still loading its model (llama-server answers 503 "Loading model" on every
    route, a minute or more for a big model) does not hold back the lexical plane: the run stops as
    it starts to wait (what it committed stays), the words of every file are indexed (run with
    embed=False: queries rank them at once), then a run waits for the model and embeds them, as a
    live index does every burst (folio.watch). One Report for them (Report.followed_by); the
    loading sentence is said once."""
    t0 = time.perf_counter()
    said: set[str] = set()

    def say(text: str) -> None:
        if text not in said:
            said.add(text)
            if on_wait:
                on_wait(text)

    def stop_on_loading(p) -> None:
        if p.event == "loading":
            raise _Loading()
        if progress:
            progress(p)

    try:
        return run(root, settings, progress=stop_on_loading, on_wait=say, **given)
    except _Loading:
        pass
    given.pop("rebuild", None)  # discarded already, by the run stopped
    words = run(root, settings, progress=progress, on_wait=say, embed=False, **given)
    say(f"the words of {words.sections} sections are indexed (queries rank them lexically now); "
        f"folio waits for the model to embed them ...")
    both = words.followed_by(run(root, settings, progress=progress, on_wait=say, **given))
    both.seconds = time.perf_counter() - t0  # the run stopped too
    return both


def run(root: Path, settings, *, rebuild: bool = False, wait: bool = True, on_wait=None, progress=None,
        budget_flag: int | None = None, keep_space: bool = False, embed: bool = True,
        burst=None, after_words=None) -> Report:
    """`folio index`: walk, update, merge this run's lexical segments, compact when worth it.
    keep_space: embed with the endpoint and model the index recorded, whatever the settings name
    now (`folio mcp`'s index tool: an agent's update never moves an index to another space).
    embed=False: the lexical plane only, no request to the server; what it left without vectors
    waits for the next run that embeds (a live index's first pass: folio.watch).
    burst: a live index's burst (burst.Burst: the files its events named, the documents its words
    pass parsed for its vectors pass). after_words: the burst's two passes in this one run (one
    lock, one store opened, one listing): the words first, with no server (their Report handed to
    `after_words(report)`, which says whether the vectors pass follows), then the vectors; returns
    the vectors pass's Report (the words' when it does not follow).
    The tree is listed by a walking child: the one folio.entry forked for `folio index` before its
    imports when it lists this root with these settings (readahead.take_early), else one started
    here; run stops it, however it ends."""
    from folio import space
    from folio import store as storemod

    t0 = time.perf_counter()
    report = Report()
    report.root = str(root)
    waited = []
    # listing while this process takes the lock, opens the store and reads its stamps: a no-op
    # re-index costs about the longer of the two
    ahead = take_early(root, settings["extensions"], settings["exclude"])

    def waiting(sentence: str) -> None:
        waited.append(sentence)
        if on_wait:
            on_wait(sentence)

    try:
        lock = storemod.acquire_lock(root, wait=wait, on_wait=waiting)
    except BaseException as e:
        if ahead is not None:
            ahead.close()
        if isinstance(e, storemod.LockBusy):
            from folio.surface import mcp

            again = ("call the index tool again after it finishes" if mcp() else
                     "run `folio index` again after it finishes, or without --no-wait to wait for it")
            raise storemod.LockBusy(f"{e}; it leaves the index at least as fresh as this run would: {again}") from None
        raise
    # The tree is listed in a child while the store is opened and its stamps read; a run that waited
    # for another writer lists it again, as it is once its turn comes.
    if ahead is None or waited:
        if ahead is not None:
            ahead.close()
        ahead = WalkAhead(root, settings["extensions"], settings["exclude"])
    listing = Listing(ahead)
    built_by = None  # --rebuild: the endpoint and model that built the index (empty when it cannot say)
    try:
        if rebuild:
            built_by = storemod.read_meta(root)
            report.notices += storemod.discard(root)  # under the lock: start from nothing (what it left, said)
        st = storemod.Store.open(root, write=True)
    except BaseException:
        ahead.close()
        lock.release()
        raise
    st.hold(lock)
    from folio.running import Publisher

    progress = Publisher(lock, progress)  # how far the run is, for queries and `folio status` meanwhile
    try:
        st.reload_meta()
        st.recover()
        st.check()  # a damaged index is refused with the fix, never built upon
        st.forget_credentials()
        if keep_space and st.meta.endpoint:
            target, _ = space.recorded_target(settings, st.meta)
        else:
            # the index keeps what built it unless told; a rebuild too (a flag's endpoint recorded with the
            # vectors: the default one would leave it lexical)
            target, _ = space.target(settings, built_by if built_by is not None else st.meta)
        if target.key_withheld:
            report.notices.append(f"an API key is configured but {target.key_withheld}")
        if not embed:
            target = None
        recorded = st.meta.budget
        budget = space.budget(settings, st.meta, budget_flag).chars
        if recorded and recorded != budget:
            report.notices.append(f"the section budget changes from {recorded} to {budget} characters: "
                                  f"every file is divided again (unchanged sections keep their vectors)")
            st.reread_all()
        reanalysing = reanalyse.begin(st, report.notices)
        timing.lap("open")
        around = nesting(root)  # the tree's warnings about the indexes around it and inside it
        for words in ([True, False] if after_words is not None else [False]):
            if after_words is not None and not words:  # the vectors pass, with the listing the words pass took
                if not after_words(report):
                    return report
                report, reanalysing, t0 = Report(), False, time.perf_counter()
                report.root = str(root)
            before = st.segment_names()
            fresh = st.next_slot() == 0
            update(st, root, None if words else target, budget=budget, entries=listing, progress=progress,
                   report=report, on_wait=on_wait, burst=burst)
            timing.lap("plan")
            report.warnings[:0] = listing.warnings + around  # the tree's own, ahead of the files'
            _finish(st, before, report, fresh)
            if reanalysing:
                reanalyse.finish(st, before)
            st.save_clean()  # the next run's stat prefilter reads it whole (Store.clean_stamps)
            timing.lap("finish")
            _said(st, root, settings, report)
            report.seconds = time.perf_counter() - t0
    except Exception as e:
        from folio.errors import disk_full, full_sentence

        if disk_full(e):  # every batch before it is committed; the matrix tail past it is recovered
            raise FolioError(full_sentence(e, st.dir / "index.db", st.kept())) from None
        if not os.path.lexists(st.dir / "index.db"):  # `rm -rf .folio`, `git clean -x` under a run (or a watcher)
            raise FolioError(f"{st.dir} was removed while this run was writing the index there, so nothing "
                             f"of it is kept: {invoke('index')} again to build it anew") from None
        raise
    finally:
        ahead.close()
        progress.close()
        st.close()
    return report


def _said(st, root: Path, settings, report: Report) -> None:
    """What a pass's Report says of the index once it ends: its model and endpoint, and why nothing
    could be indexed."""
    report.model, report.endpoint = st.meta.model or "", st.meta.endpoint or ""
    if report.unreadable and not st.counts()["sections"]:
        report.error = (f"nothing could be indexed: {report.unreadable} of the {report.files} Markdown files "
                        f"under {root} could not be read as text and the rest hold no sections (see the "
                        f"warnings above); fix those files or leave them out with `exclude:` in folio.yaml")
    if report.files == 0:
        report.notices.append(f"no Markdown files under {root} (extensions: {', '.join(settings['extensions'])})")


def held_back(reader) -> str | None:
    """Why no refresh can write `reader`'s index now, whatever the server does (None: one can): it is
    not writable, or another folio holds its write lock (probed without waiting, and let go)."""
    from folio.store import LockBusy, acquire_lock

    why = reader.unwritable()
    if why:
        return f"the index at {reader.dir} is not writable ({why})"
    try:
        acquire_lock(reader.root, wait=False).release()
    except LockBusy:
        return f"another folio is updating the index at {reader.dir}"
    except FolioError as e:
        return str(e)
    return None


def refresh(reader, paths: set[str], settings, deadline: float | None = None) -> tuple[bool, str]:
    """A query's refresh: bring the files behind its stale rows up to date, in the index's own
    space, under the write lock taken without waiting (a query never waits for a writer), every
    request to the server ended by `deadline` (time.monotonic(): the query's `query_timeout`).
    `reader`: the query's open store. Returns (whether the index moved, the query's notice)."""
    from folio import space
    from folio.embed import EndpointError
    from folio.planes import past, waits
    from folio.store import LockBusy, Store, acquire_lock

    root = reader.root
    why = reader.unwritable()
    if why:
        return False, (f"({len(paths)} of the files behind this result changed; the index at {reader.dir} "
                       f"is not writable ({why}), so it was not refreshed: those rows are marked (stale))")
    try:
        lock = acquire_lock(root, wait=False)
    except LockBusy:
        return False, (f"{len(paths)} of the files behind this result changed; another folio is "
                       f"updating the index at {reader.dir}, so those rows are marked (stale)")
    except FolioError as e:  # not writable after all, or a link where the lock belongs
        return False, (f"({len(paths)} of the files behind this result changed and could not be "
                       f"re-indexed ({e}); those rows are marked (stale))")
    try:
        w = Store.open(root, write=True)
        try:
            w.recover()
            meta = w.meta
            target = None
            if meta.endpoint and w.dim:
                target, _decision = space.recorded_target(settings, meta)
                target.deadline = deadline
            before = w.segment_names()
            rep = update(w, root, target, budget=int(meta.budget or settings["max_chars"]),
                         only=sorted(paths))
            merge_segments_of_run(w, before)
        finally:
            w.close()
    except FolioError as e:
        if isinstance(e, EndpointError) and past(e, deadline):
            return False, (f"({len(paths)} of the files behind this result changed; the embeddings server at "
                           f"{reader.meta.endpoint} did not embed them {waits(settings)}: those rows are marked (stale); `folio index` re-indexes them)")
        return False, (f"{len(paths)} of the files behind this result changed and could not be "
                       f"re-indexed ({e}); those rows are marked (stale)")
    except Exception as e:
        from folio.errors import disk_full, full_reason

        if not disk_full(e):
            raise
        why, fix = full_reason(e, reader.dir / "index.db")
        return False, (f"{len(paths)} of the files behind this result changed and could not be re-indexed "
                       f"({why}), so those rows are marked (stale) and the index is as it was: {fix} and "
                       f"{invoke('index')}")
    finally:
        lock.release()
    # The index moved even when another writer had already caught up: the query ranks again.
    # "re-embedded" only when a section was: lines inserted above unchanged sections move their
    # ranges, and their vectors are kept (no request to the server).
    files = rep.changed + rep.new
    if not files and not rep.deleted:  # touched, bytes as they were (a checkout): only the stamp moved
        return True, (f"({len(paths)} of the files behind this result had a new modification time and the same "
                      f"bytes: nothing to re-index)")
    how = (f"{files} file(s) re-embedded before answering" if rep.embedded else
           f"{files} file(s) re-indexed before answering, nothing re-embedded (no section's text changed: "
           f"their lines, their frontmatter or the sections around them did)") if files else ""
    return True, (f"({len(paths)} of the files behind this result had changed; " + how
                  + (f"{', ' if how else ''}{rep.deleted} gone" if rep.deleted else "") + ")")


MAX_SEGMENTS = 8


def _finish(st, before: list[str], report: Report, fresh: bool = False) -> None:
    """Merge lexical segments past MAX_SEGMENTS (merge_segments_of_run), and compact when dead rows
    outnumber live ones, or when a build from nothing left any (records the server refused and that
    were divided): a new index starts with none."""
    live = st.live_count()
    dead = st.next_slot() - live
    if (dead > live and dead > 64) or (fresh and dead):
        from folio.lexical.segments import merge_segments

        report.compacted = st.compact(merge_segments)
        dead = 0
    else:
        merge_segments_of_run(st, before)
    report.dead_rows = dead


def merge_segments_of_run(st, before: list[str]) -> None:
    """Past MAX_SEGMENTS, merge this run's lexical segments into one, and the newest ones by size
    tier (a lexical-only run commits a few big segments and stays under it: no merge at all). Always a run of the newest segments (a newer segment wins per slot, so only a suffix
    can merge), and a big old segment only once comparable work has piled up behind it: merging
    every segment whenever there were too many rewrote a 433k-record corpus's whole plane
    (74 s, 6 GB) on every ninth one-file refresh."""
    names = st.segment_names()
    if len(names) <= MAX_SEGMENTS:
        return  # a few segments cost a query nothing measurable; merging them costs the run a full pass
    new = [n for n in names if n not in set(before)]
    segs = st.lex_segments()
    k = max(len(new), _tail_to_merge([len(sg["post_doc"]) + 1 for sg in segs]), len(names) - MAX_SEGMENTS + 1)
    if k < 2:
        return
    import numpy as np

    from folio.lexical.segments import merge_segments

    victims = names[-k:]
    slots, _ = st.live(vectors_only=False)
    live = np.zeros(st.next_slot(), dtype=bool)
    live[slots] = True
    segs = dict(zip(names, st.lex_segments(), strict=False))
    # written as it is merged: a first run's merge is the whole corpus's plane (store.SegmentWriter)
    st.replace_segments(lambda sink: merge_segments([segs[n] for n in victims], live, sink=sink), victims)


def _tail_to_merge(sizes: list[int]) -> int:
    """How many of the newest segments to merge: reach back while the next older segment is at most
    four times what has been gathered, so each posting is rewritten O(log n) times overall."""
    total, k = sizes[-1], 1
    while k < len(sizes) and sizes[-k - 1] <= 4 * total:
        total += sizes[-k - 1]
        k += 1
    return k
