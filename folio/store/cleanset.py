"""The cleanset: the stat prefilter's side of the index, kept whole in one row of index.db.

`cleanset(id=1, racy_ns, held, live, paths, sizes, mtimes)`: the path, size and mtime_ns of every
file stamped at least racy_ns after its mtime, as '\\0'-joined UTF-8 paths (the `cleanpaths` row of
generation `paths`, kept while the list of paths stays the same: an edit rewrites two small arrays
only) and two little-endian int64 arrays, where size and mtime -1 mark a hole: a path of the list
that is not clean now (edited within the racy window, or gone), so a file edited as its editor
leaves it, and stamped clean by the next run, keeps the list as it is; how many files there are and how many records (no commit
changes records without changing its files' rows, but compaction, which runs before it is
written). Triggers on files (records.SCHEMA) delete the row with any change to a file row, whoever
writes it; a full run writes it back at its end (save_clean). A no-op `folio index` reads it instead
of 16k file rows: ~5 ms against ~35 ms.

Owns clean_stamps (from the row when one is kept, else from the files table), the writer's copy of
the set as it found it (`_clean`, with the rows its commits changed) and the records count the row
keeps (`_live`, live_count), and writing the row back. Must not change the files or records tables.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterable

from folio.store.records import check_clean, damaged_value, in_chunks, marks

_CLEAN_SQL = "SELECT path, size, mtime_ns FROM files WHERE stamped_ns - mtime_ns >= ?"


class Cleanset:
    """The Store's cleanset (uses its conn, write, transaction, record_count and `_committed`; owns
    `_clean`, the set as this writer read it, and `_live`, the records count its row keeps)."""

    conn: sqlite3.Connection
    write: bool
    _clean: _Clean | None
    _live: int | None
    _committed: bool

    def clean_stamps(self, racy_ns: int, paths: list[str] | None = None,
                     pending: Iterable[int] = ()) -> tuple[Clean, int]:
        """The stat prefilter's side of the index: the (path, size, mtime_ns) of every file (of `paths`
        only, when given) stamped at least racy_ns after its mtime and not among the `pending` ids —
        a listed file with the same three is unchanged — and how many of those files the index holds
        at all. For the whole index, read from the cleanset row when one is kept (see the module
        header), else as plain tuples built by sqlite3 itself (a third of the cost of a row object)."""
        if paths is None:
            got = self._read_clean(racy_ns)
            if got is None:
                clean = Clean(set(self.conn.execute(_CLEAN_SQL, (racy_ns,))))
                held = self.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            else:
                clean, held = got
            self._clean = _Clean(racy_ns, clean, got is not None)
            if not pending:
                return clean, held
            clean = set(clean.rows)  # the whole set stays as read (save_clean)
        else:
            clean, held = set(), 0
            for chunk in in_chunks(paths):
                q = marks(chunk)
                clean.update(self.conn.execute(f"{_CLEAN_SQL} AND path IN ({q})", (racy_ns, *chunk)))
                held += self.conn.execute(f"SELECT COUNT(*) FROM files WHERE path IN ({q})", chunk).fetchone()[0]
        for chunk in in_chunks(list(pending)):
            clean.difference_update(self.conn.execute(
                f"SELECT path, size, mtime_ns FROM files WHERE id IN ({marks(chunk)})", chunk))
        return Clean(clean), held

    def _clean_row(self) -> bool:
        """Whether a cleanset row is kept: no file row changed since the last full run wrote it (the
        triggers drop it with any change, whoever makes it)."""
        try:
            return self.conn.execute("SELECT 1 FROM cleanset WHERE id = 1").fetchone() is not None
        except sqlite3.DatabaseError:
            return False

    def _read_clean(self, racy_ns: int) -> tuple[Clean, int] | None:
        """clean_stamps' whole set and count from the cleanset row, when one is kept for racy_ns."""
        try:
            row = self.conn.execute("SELECT c.racy_ns, c.held, c.live, p.data, c.sizes, c.mtimes, c.paths "
                                    "FROM cleanset c JOIN cleanpaths p ON p.gen = c.paths WHERE c.id = 1").fetchone()
        except sqlite3.DatabaseError:
            return None
        if row is None or row[0] != racy_ns or not all(isinstance(b, bytes) for b in row[3:6]):
            return None
        try:
            paths = row[3].decode("utf-8").split("\0") if row[3] else []
            sizes, mtimes = _int64s(row[4]), _int64s(row[5])
        except (UnicodeDecodeError, ValueError):
            return None
        if not (len(paths) == len(sizes) == len(mtimes)) or not isinstance(row[1], int):
            return None
        self._live = row[2] if isinstance(row[2], int) and row[2] >= 0 else None
        return Clean(columns=(paths, sizes, mtimes), gen=row[6]), row[1]

    def _clean_kept(self) -> bool:
        """Whether this writer read the whole set from the cleanset row (so nothing changed since the
        last full run wrote it: no file, and so no record)."""
        return self._clean is not None and self._clean.kept

    def live_count(self) -> int:
        """record_count, as the cleanset row this writer read keeps it while it has committed nothing."""
        if self._live is not None and not self._committed and self._clean_kept():
            return self._live
        return self.record_count()

    def kept_live(self) -> int | None:
        """The records count the cleanset row keeps, None without one: a reader's count without
        counting (any change to a file row, and so to its records, deletes the row)."""
        row = self.conn.execute("SELECT live FROM cleanset WHERE id = 1").fetchone()
        return row[0] if row is not None and type(row[0]) is int else None

    def _forget_clean(self) -> None:
        """Every file row is about to change (reread_all): the set this writer read is no use now."""
        self._clean = None

    def _clean_before(self, c, batch) -> list[int]:
        """Inside commit's transaction, before it changes file rows: the ids it will change, their
        rows' (path, size, mtime_ns) as they were noted for save_clean (inserted ids are added)."""
        ids = list(batch.delete_files) + [f.id for f in batch.files if f.id is not None] + [r[3] for r in batch.restamps]
        if self._clean is not None:
            for chunk in in_chunks(ids):
                self._clean.old.update(c.execute(
                    f"SELECT path, size, mtime_ns FROM files WHERE id IN ({marks(chunk)})", chunk))
        return ids

    def _clean_after(self, changed: list[int]) -> None:
        """Inside commit's transaction, after it changed file rows: note their ids for save_clean."""
        if self._clean is not None:
            self._clean.touched.update(changed)

    def save_clean(self) -> None:
        """Keep clean_stamps' whole set for the next run (the cleanset row), at the end of a full run.
        This writer's set as it found it, less the rows its commits changed, plus those rows as
        they are now (Store.commit notes both), checked against SQLite's own count of the set before
        it is written, and read whole from the files table instead when the two differ."""
        mine = self._clean
        if mine is None or not self.write:
            return
        self._clean = None
        if mine.kept and not mine.touched:
            return  # read from the row and nothing changed since: it is still there
        c = self.conn
        racy = mine.racy_ns
        new = []
        for chunk in in_chunks(sorted(mine.touched)):
            new += c.execute(f"{_CLEAN_SQL} AND id IN ({marks(chunk)})", (racy, *chunk))
        try:
            self._write_clean(mine, new)
        except (TypeError, OverflowError):  # a value edited by hand, read here unchecked
            for row in [*new, *mine.clean.rows, *c.execute(_CLEAN_SQL, (racy,))]:
                check_clean(self._db, row)  # raises the sentence for the first
            raise damaged_value(self._db, "the files table", "a clean stamp", None, "as folio wrote it") from None

    def _write_clean(self, mine, new: list) -> None:
        c = self.conn
        racy = mine.racy_ns
        # The same paths with other stats (an edit, a touch): the kept list of paths stays.
        columns = mine.clean.restated(mine.old, new)
        if columns is None:
            rows = mine.clean.rows  # this writer's own set: changed in place
            rows.difference_update(mine.old)
            rows.update(new)
        with self.transaction():
            held, want = c.execute("SELECT COUNT(*), COALESCE(SUM(stamped_ns - mtime_ns >= ?), 0) FROM files",
                                   (racy,)).fetchone()
            if columns is not None and want != len(columns[0]) - columns[1].count(HOLE) or \
                    columns is None and want != len(rows):
                columns, rows = None, list(c.execute(_CLEAN_SQL, (racy,)))  # a change this writer did not see
            if columns is not None:
                gen, sizes, mtimes = mine.clean.gen, columns[1], columns[2]
            else:
                gen = (c.execute("SELECT MAX(gen) FROM cleanpaths").fetchone()[0] or 0) + 1
                c.execute("INSERT INTO cleanpaths(gen, data) VALUES (?, ?)",
                          (gen, "\0".join([t[0] for t in rows]).encode("utf-8")))
                c.execute("DELETE FROM cleanpaths WHERE gen != ?", (gen,))
                sizes, mtimes = [t[1] for t in rows], [t[2] for t in rows]
            c.execute("INSERT OR REPLACE INTO cleanset(id, racy_ns, held, live, paths, sizes, mtimes) "
                      "VALUES (1, ?, ?, ?, ?, ?, ?)",
                      (racy, held, self.record_count(), gen, _int64_bytes(sizes), _int64_bytes(mtimes)))


HOLE = -1  # the size and mtime of a path the cleanset row lists that is not clean now
MAX_HOLES = 64  # past this many (and an eighth of the list), the list of paths is written anew


class Clean:
    """clean_stamps' answer: the (path, size, mtime_ns) of files whose stat says they are unchanged.
    `rows` is the set, made on first use from the cleanset row's columns (their holes left out): a
    no-op `folio index` needs only its size and digest (readahead.digest), which the columns give
    without it."""

    __slots__ = ("_rows", "_columns", "gen", "_hashes", "_holes")

    def __init__(self, rows: set | None = None, columns: tuple | None = None, gen: int | None = None):
        self._rows, self._columns, self.gen = rows, columns, gen
        self._hashes: set[int] | None = None
        self._holes = columns[1].count(HOLE) if columns is not None else 0

    def hashes(self) -> set[int]:
        """The hash of each (path, size, mtime_ns), made once: the digest is their sum, and a listed
        tuple whose hash is not among them is a file to read (as the digest does, this takes a 2**-64
        chance per change for not building and probing the set of tuples themselves)."""
        if self._hashes is None:
            self._hashes = set(map(hash, self.tuples()))
        return self._hashes

    def digest(self) -> int:
        """readahead.digest of the set, from its hashes."""
        hashes = self.hashes()
        return sum(hashes) if len(hashes) == len(self) else sum(map(hash, self.tuples()))

    def __len__(self) -> int:
        return len(self._rows) if self._rows is not None else len(self._columns[0]) - self._holes

    @property
    def rows(self) -> set[tuple[str, int, int]]:
        if self._rows is None:
            self._rows = set(self.tuples())
        return self._rows

    def tuples(self) -> Iterable[tuple[str, int, int]]:
        """Each (path, size, mtime_ns) once, the set unmade when it was not made yet."""
        if self._rows is not None:
            return self._rows
        rows = zip(*self._columns, strict=True)
        return (t for t in rows if t[1] != HOLE) if self._holes else rows

    def restated(self, old: set, new: list) -> tuple | None:
        """The columns read from the cleanset row with the rows `old` (as they were) replaced by `new`
        (those of them clean now), where all of them are paths the list holds: an edit or a touch
        changes a file's size and mtime only, and a path no longer clean (edited within the racy
        window, gone) becomes a hole. None where the list of paths changes (a file new, renamed or
        clean again after a rewrite of the list), or holds too many holes."""
        if self._columns is None or self.gen is None or len(old) > MAX_HOLES or len(new) > MAX_HOLES:
            return None
        paths, sizes, mtimes = self._columns
        sizes, mtimes = sizes[:], mtimes[:]  # arrays: copied whole in microseconds
        at = {}
        for p, size, mtime in old:
            i = _index(paths, p)
            if i is None:
                continue  # not listed: it was not clean, and stays out unless it is clean now
            if sizes[i] != HOLE and (sizes[i] != size or mtimes[i] != mtime) or p in at:
                return None  # a change this writer did not see
            at[p] = i
        for p, size, mtime in new:
            i = at.pop(p, None)
            if i is None:
                return None
            sizes[i], mtimes[i] = size, mtime
        for i in at.values():
            sizes[i] = mtimes[i] = HOLE
        if sizes.count(HOLE) > max(MAX_HOLES, len(paths) // 8):
            return None
        return paths, sizes, mtimes


class _Clean:
    """clean_stamps' whole set as a writer read it (`kept`: from the cleanset row), the rows its
    commits changed since (`old`: as they were; `touched`: their ids, inserted ones included)."""

    __slots__ = ("racy_ns", "clean", "kept", "old", "touched")

    def __init__(self, racy_ns: int, clean: Clean, kept: bool):
        self.racy_ns, self.clean, self.kept = racy_ns, clean, kept
        self.old: set = set()
        self.touched: set = set()


def _index(paths: list[str], p: str) -> int | None:
    try:
        return paths.index(p)
    except ValueError:
        return None


def _int64s(raw: bytes):
    from array import array

    a = array("q")
    a.frombytes(raw)
    if sys.byteorder == "big":
        a.byteswap()
    return a


def _int64_bytes(values) -> bytes:
    from array import array

    a = array("q", values)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()
