"""The slot map: every slot's owner, kept in index.db beside the records it is derived from.

`slotmap(chunk, data)`: int64 per slot, little-endian, `file_id * 2 + vec`, or -1 where no record
holds the slot; SLOTMAP_CHUNK slots per blob, chunk k holding slots k*SLOTMAP_CHUNK...; kept when
meta.slotmap = 1. A query reads it instead of every record row (2 ms against 75 ms at 119k records).

Owns reading the map (whole, checked against the records count, or None so callers read the records
themselves), the live slots a query ranks (live), the writer's copy of it (`_slots`: the whole map,
or a _Partial holding only the chunks its commits touched, read while the cleanset row says the map
is as the last full run left it), and writing back the chunks a commit touched, in the commit's own
transaction (rebuilt whole from the records when there is none, or after a new space or compaction).
Must not write the records or files tables, or commit: it runs inside the Store's transactions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from folio.store.directory import corrupt
from folio.store.records import damaged_value, in_chunks, marks

SLOTMAP_CHUNK = 8192  # slots per slotmap blob (64 KiB): a commit rewrites the one or two it touches


class SlotMap:
    """The Store's slot map (uses its conn, write, meta, dir, reader cache `_cache` and kept_live; owns `_slots`,
    the writer's copy, None until its first commit reads it)."""

    conn: sqlite3.Connection
    write: bool
    _cache: dict
    _slots: object
    kept_live: Callable[[], int | None]

    def live(self, *, vectors_only: bool = True):
        """(slots, file_ids) as read-only int arrays for records whose vector is valid (or all records).

        Read from the slot map when the index keeps one (a few blobs), else from every record row.
        A reader keeps the last answer while no other connection has committed (SQLite's
        data_version): one query asks for it up to three times (candidates, lexical statistics,
        confidence).
        """
        import itertools

        import numpy as np

        try:
            version = None if self.write else self.conn.execute("PRAGMA data_version").fetchone()[0]
            hit = self._cache.get(vectors_only)
            if version is not None and hit is not None and hit[0] == version:
                return hit[1]
            owners = self._cache.get("owners")  # both kinds of answer come from one read of the map
            owners = owners[1] if version is not None and owners is not None and owners[0] == version else None
            if owners is None:
                owners = self.slot_owners()
                if version is not None and owners is not None:
                    owners.flags.writeable = False
                    self._cache["owners"] = (version, owners)
            if owners is not None:
                # Both answers from one pass: on a whole index (every record has its vector) they are
                # one pair of arrays, so the query's candidates and those with a vector are one object.
                slots = np.flatnonzero(owners >= 0)
                held = owners[slots]
                every = (slots, held >> 1)
                vec = (held & 1).astype(bool)
                both = {False: every, True: every if vec.all() else (slots[vec], every[1][vec])}
                for pair in both.values():
                    for a in pair:
                        a.flags.writeable = False
                if version is not None:
                    self._cache[not vectors_only] = (version, both[not vectors_only])
                out = both[vectors_only]
            else:
                sql = "SELECT slot, file_id FROM records" + (" WHERE vec = 1" if vectors_only else "")
                arr = np.fromiter(itertools.chain.from_iterable(self.conn.execute(sql)), dtype=np.int64).reshape(-1, 2)
                out = (arr[:, 0], arr[:, 1])
        except sqlite3.DatabaseError as e:
            raise corrupt(self.dir / "index.db", str(e)) from None
        except (ValueError, TypeError):  # a file_id that is not a number (a hand edit)
            raise _not_numbers(self) from None
        for a in out:
            a.flags.writeable = False
        if version is not None:
            self._cache[vectors_only] = (version, out)
        return out

    def slot_owners(self, n_records: int | None = None):
        """The slot map (int64 per slot: file_id * 2 + vec, -1 = no record), or None when this index
        keeps none or it disagrees with the records (then callers read the records themselves).
        `n_records`: the records count, where the caller knows it (live_count)."""
        import numpy as np

        if not self.meta.slotmap:
            return None
        full = SLOTMAP_CHUNK * 8
        try:
            # each blob copied once, into the map as it comes (not a list of them joined after)
            chunks = self.conn.execute("SELECT COUNT(*) FROM slotmap").fetchone()[0]
            owners = np.empty(chunks * SLOTMAP_CHUNK, dtype="<i8")
            got = owners.view(np.uint8)
            at = 0
            for i, (c, d) in enumerate(self.conn.execute("SELECT chunk, data FROM slotmap ORDER BY chunk")):
                if c != i or i >= chunks or not isinstance(d, bytes) or (i < chunks - 1 and len(d) != full) or len(d) % 8:
                    return None  # not as a commit writes it: the records say instead
                got[at:at + len(d)] = np.frombuffer(d, dtype=np.uint8)
                at += len(d)
            if n_records is None:  # the count the cleanset row keeps, while there is one (cleanset.py)
                n_records = self.kept_live()
                if n_records is None:
                    n_records = self.conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise corrupt(self.dir / "index.db", str(e)) from None
        owners = owners[:at // 8]
        if int(np.count_nonzero(owners >= 0)) != n_records:
            return None
        return owners

    def record_count(self) -> int:
        """Number of records (live rows): for a writer that has committed, its slot map's count (the
        map was checked against this count when read, and each commit wrote back every slot it
        touched); else read from an index rather than the table."""
        if self.write and isinstance(self._slots, _Partial):
            return self._slots.count
        if self.write and self._slots is not None:
            import numpy as np

            return int(np.count_nonzero(self._slots >= 0))
        return self.conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]

    def _slots_before(self, c, batch, owners, live: int | None = None):
        """Inside commit's transaction, before it changes records: (slots the batch touches, the
        writer's slot map), the map read once per writer; (None, None) when there is no usable map."""
        if owners is None:
            # the map as the last full run left it (the cleanset row it wrote is still there, so no
            # file, and so no record, changed since): only the chunks this commit touches are read
            owners = _Partial.open(c, live) if live is not None and self._clean_kept() else None
        if owners is None:
            owners = self.slot_owners(live)
            if owners is None:
                return None, None
            owners = owners.copy()
        touched = list(batch.delete_slots) + [r.slot for r in batch.records] + batch.given
        for chunk in in_chunks(batch.delete_files):
            touched += [r[0] for r in c.execute(f"SELECT slot FROM records WHERE file_id IN ({marks(chunk)})", chunk)]
        return touched, owners

    def _slots_after(self, c, touched: list[int] | None, owners):
        """Inside commit's transaction, after it changed records: the touched slots read back and
        written; returns the map (derived from every record when there was none)."""
        if touched is None:
            return self._rebuild_slot_map(c)
        if not touched:
            return owners  # a commit of stamps alone (the run after an edit re-stamps it) never loads numpy
        if isinstance(owners, _Partial):
            return owners.update(c, touched, self.dir / "index.db")
        import numpy as np

        old_len = len(owners)
        slots = np.asarray(touched, dtype=np.int64)
        top = int(slots.max())
        if top >= old_len:
            owners = np.concatenate([owners, np.full(top + 1 - old_len, -1, np.int64)])
        owners[slots] = -1
        for slot, owner in _owners_of(c, slots.tolist(), self.dir / "index.db"):
            owners[slot] = owner
        dirty = set((slots // SLOTMAP_CHUNK).tolist())
        if len(owners) > old_len:  # every chunk the map grew through is written, even one no slot touched
            dirty.update(range(max(old_len - 1, 0) // SLOTMAP_CHUNK, (len(owners) - 1) // SLOTMAP_CHUNK + 1))
        _write_slot_chunks(c, owners, sorted(dirty))
        return owners

    def _rebuild_slot_map(self, c):
        """Derive the whole slot map from the records (first commit of an index without one, a new
        vector space, compaction), inside the caller's transaction; returns it."""
        import numpy as np

        try:
            arr = np.array(c.execute("SELECT slot, file_id, vec FROM records").fetchall(), dtype=np.int64).reshape(-1, 3)
        except (ValueError, TypeError):  # a file_id or vec that is not a number (a hand edit)
            raise _not_numbers(self) from None
        owners = np.full(int(arr[:, 0].max()) + 1 if len(arr) else 0, -1, dtype=np.int64)
        owners[arr[:, 0]] = arr[:, 1] * 2 + (arr[:, 2] != 0)
        _write_slot_chunks(c, owners, range(-(-len(owners) // SLOTMAP_CHUNK)))
        self._put_meta(slotmap=1)
        return owners


class _Partial:
    """A writer's slot map read in part (SlotMap._slots_before): how many slots it covers, the chunks
    read so far, and how many slots are owned (the records count). A commit reads the chunks its
    slots fall in (and the last one, when the map grows), sets those slots from the records as a
    whole map does, and writes them back."""

    __slots__ = ("length", "chunks", "count")

    def __init__(self, length: int, count: int):
        self.length, self.count = length, count
        self.chunks: dict = {}

    @classmethod
    def open(cls, c, count: int) -> _Partial | None:
        """The map's extent from its chunks' lengths (no blob is read), or None where the chunks are
        not numbered 0..n-1 or the last one is no whole number of slots."""
        n, low, top, last = c.execute("SELECT COUNT(*), MIN(chunk), MAX(chunk), (SELECT length(data) FROM "
                                      "slotmap ORDER BY chunk DESC LIMIT 1) FROM slotmap").fetchone()
        if not n or low != 0 or top != n - 1 or not isinstance(last, int) or last % 8 or last > SLOTMAP_CHUNK * 8:
            return None
        return cls(top * SLOTMAP_CHUNK + last // 8, count)

    def update(self, c, touched: list[int], db) -> _Partial:
        import numpy as np

        slots = sorted(set(touched))  # (np.unique would import numpy.ma: ~35 ms)
        length = max(self.length, slots[-1] + 1)
        ks = {sl // SLOTMAP_CHUNK for sl in slots}
        if length > self.length:  # the chunks the map grows through, the old last one included
            ks.update(range(max(self.length - 1, 0) // SLOTMAP_CHUNK, (length - 1) // SLOTMAP_CHUNK + 1))
        want = sorted(k for k in ks if k not in self.chunks and k * SLOTMAP_CHUNK < self.length)
        for chunk in in_chunks(want):
            for k, data in c.execute(f"SELECT chunk, data FROM slotmap WHERE chunk IN ({marks(chunk)})", chunk):
                self.chunks[k] = np.frombuffer(data, dtype="<i8").astype(np.int64)
        for k in sorted(ks):
            size = min(SLOTMAP_CHUNK, length - k * SLOTMAP_CHUNK)
            had = self.chunks.get(k)  # (open() saw every chunk up to the last: none is missing)
            if had is None or len(had) < size:
                grown = np.full(size, -1, dtype=np.int64)
                if had is not None:
                    grown[:len(had)] = had
                self.chunks[k] = grown
        at = [(sl // SLOTMAP_CHUNK, sl % SLOTMAP_CHUNK) for sl in slots]
        before = sum(1 for k, i in at if self.chunks[k][i] >= 0)
        for k, i in at:
            self.chunks[k][i] = -1
        for slot, owner in _owners_of(c, slots, db):
            self.chunks[slot // SLOTMAP_CHUNK][slot % SLOTMAP_CHUNK] = owner
        self.count += sum(1 for k, i in at if self.chunks[k][i] >= 0) - before
        self.length = length
        c.executemany("INSERT OR REPLACE INTO slotmap(chunk, data) VALUES (?, ?)",
                      [(k, self.chunks[k].astype("<i8").tobytes()) for k in sorted(ks)])
        return self


def _owners_of(c, slots: list[int], db):
    """(slot, its slot-map value) for each of `slots` a record holds, read from the records."""
    for chunk in in_chunks(slots):
        for slot, file_id, vec in c.execute(f"SELECT slot, file_id, vec FROM records WHERE slot IN ({marks(chunk)})",
                                            chunk):
            if type(file_id) is not int:
                raise damaged_value(db, f"records row {slot}", "file_id", file_id, "a whole number")
            yield slot, file_id * 2 + (1 if vec else 0)


def _not_numbers(store):
    return corrupt(store.dir / "index.db", "its records hold a file_id or vec that is not a whole number")


def _write_slot_chunks(c, owners, chunks) -> None:
    n_chunks = -(-len(owners) // SLOTMAP_CHUNK)
    c.executemany("INSERT OR REPLACE INTO slotmap(chunk, data) VALUES (?, ?)",
                  [(k, owners[k * SLOTMAP_CHUNK:(k + 1) * SLOTMAP_CHUNK].astype("<i8").tobytes())
                   for k in chunks if k < n_chunks])
    c.execute("DELETE FROM slotmap WHERE chunk >= ?", (n_chunks,))
