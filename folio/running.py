"""A run in progress, as other processes see it: how far `folio index` (or a live index's run) is and
about how long is left, so a query or `folio status` meanwhile says "a run is under way" instead of
"the last run stopped".

The run holding the write lock publishes a note in the lock file (store.write_note; Publisher wraps
the run's progress callback and writes at most every EVERY seconds, and at every commit); others
read it without taking the lock (current). A run killed leaves its last note with a pid no longer
alive: that is a run that stopped. Owns the note's contents and the estimate of time left. Must
not print, and must not touch `.folio/` but through the store's lock functions.
"""

from __future__ import annotations

import os
import time

EVERY = 0.5  # seconds between two notes (a commit always writes one)
MEASURE = 2.0  # seconds of a pace measured before a time left is estimated from it


class Publisher:
    """The run's progress callback (`show`, or None), which also publishes the run's progress in the
    lock file `lock` for other processes; close() clears the note."""

    def __init__(self, lock, show=None):
        self.lock, self.show = lock, show
        self.started = time.time()
        self.t0 = time.monotonic()
        self.pace = None  # (monotonic time, sections embedded, files read) when the pace started to count
        self.last = 0.0
        self._write(None)

    def __call__(self, p) -> None:
        if self.show is not None:
            self.show(p)
        now = time.monotonic()
        if self.pace is None and p.event in ("file", "embedding", "embedded", "lexical"):
            self.pace = (now, p.embedded, p.files)
        if p.event == "embedded" or now - self.last >= EVERY:
            self.last = now
            self._write(p, now)

    def _write(self, p, now: float | None = None) -> None:
        from folio.store import write_note

        fields = [f'"pid": {os.getpid()}', f'"started": {self.started:.3f}', f'"updated": {time.time():.3f}']
        if p is not None and p.event == "loading" and not p.files_total:
            # its server loading its model (llama-server's 503 "Loading model") before this run walked the
            # tree (a first build waits there, its words indexed by the run before it): no count yet
            fields.append('"loading": true')
        elif p is not None:
            to_embed = max(p.to_embed(), p.embedded)
            fields += [f'"files": {p.files}', f'"files_total": {p.files_total}', f'"embedded": {p.embedded}',
                       f'"to_embed": {to_embed}', f'"lexical": {"true" if p.lexical else "false"}']
            if p.event == "loading":  # its server loading its model (llama-server's 503 "Loading model")
                fields.append('"loading": true')
            left = self._left(p, to_embed, now)
            if left is not None:
                fields.append(f'"left": {left:.1f}')
        write_note(self.lock, ("{" + ", ".join(fields) + "}").encode())

    def _left(self, p, to_embed: int, now: float | None) -> float | None:
        """Seconds left at the pace measured so far: sections embedded per second (files read per
        second when nothing is embedded), once MEASURE seconds of it are behind."""
        if self.pace is None or now is None or now - self.pace[0] < MEASURE:
            return None
        took = now - self.pace[0]
        if not p.lexical and to_embed and p.embedded > self.pace[1]:
            return (to_embed - p.embedded) / ((p.embedded - self.pace[1]) / took)
        if p.files_total and p.files > self.pace[2]:
            return (p.files_total - p.files) / ((p.files - self.pace[2]) / took)
        return None

    def close(self) -> None:
        from folio.store import write_note

        write_note(self.lock, b"")


def current(root) -> dict | None:
    """The note of the run writing the index at `root` now (None when no run is: no note, or the pid
    that wrote it is gone)."""
    import json

    from folio.store import read_note

    for _attempt in range(2):  # a note read while it is being rewritten: read it again
        raw = read_note(root)
        if not raw or not raw.strip():
            return None
        try:
            note = json.loads(raw)
            pid = int(note["pid"])
            break
        except (ValueError, KeyError, TypeError):
            continue
    else:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass  # another user's process: alive
    return note


def describe(note: dict, sections: int = 0) -> str:
    """`a folio index run (pid 123) is under way: it has read 40 of 112 files and embedded 310 of
    about 900 sections; about 2 minutes left`. `sections`: the sections the index holds, said as
    indexed by their words while the run, not walking yet, waits for its server to load a model."""
    from folio.estimate import duration

    where = "in this process" if note["pid"] == os.getpid() else f"pid {note['pid']}"
    parts = []
    if note.get("files_total"):  # 0: listing, or nothing to read (a run embedding what waits)
        parts.append(f"read {note['files']:,} of {note['files_total']:,} files")
        if not note.get("lexical") and note.get("to_embed"):
            parts.append(f"embedded {note['embedded']:,} of about {note['to_embed']:,} sections")
    how_far = f": it has {' and '.join(parts)}" if parts else ": it is listing the files"
    if note.get("loading") and parts:
        how_far += " and waits for the embeddings server to load its model"
    elif note.get("loading") and sections:
        how_far = (f": the words of {sections:,} sections are indexed (queries rank them by their words now), and "
                   f"it waits for the embeddings server to load its model to embed them")
    elif note.get("loading"):
        how_far = ": it waits for the embeddings server to load its model"
    left = f"; about {duration(note['left'])} left" if note.get("left") else ""
    return f"a `folio index` run ({where}) is under way{how_far}{left}"
