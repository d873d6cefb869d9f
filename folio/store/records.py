"""index.db's schema, and its files and records tables: the rows, every query of them, and the SQL
a commit runs on them.

Owns SCHEMA (every table of index.db, the derived ones included, and the triggers that drop the
cleanset row when a file row changes), the value types that cross to the indexer and the query
(Stamp, Row, NewFile, NewRecord), and the Store's reads of files and records. Must not touch a file
under `.folio/`, write meta (meta.py), the slot map (slotmap.py) or the cleanset (cleanset.py), or
commit: it runs inside the transactions the Store opens.
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple
from collections.abc import Callable, Iterable
from pathlib import Path

from folio.errors import FolioError
from folio.store.directory import corrupt

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files(
  id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, size INTEGER, mtime_ns INTEGER,
  sha256 TEXT, stamped_ns INTEGER, frontmatter TEXT, title TEXT);
CREATE TABLE IF NOT EXISTS records(
  slot INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, start INTEGER, "end" INTEGER, level INTEGER,
  heading TEXT, trail TEXT, truncated INTEGER, text_hash TEXT, vec INTEGER);
CREATE INDEX IF NOT EXISTS records_file ON records(file_id);
CREATE INDEX IF NOT EXISTS records_hash ON records(text_hash);
CREATE INDEX IF NOT EXISTS records_pending ON records(file_id) WHERE vec = 0;
CREATE INDEX IF NOT EXISTS files_stat ON files(path, size, mtime_ns, stamped_ns);
CREATE TABLE IF NOT EXISTS lexseg(name TEXT PRIMARY KEY, seq INTEGER);
CREATE TABLE IF NOT EXISTS slotmap(chunk INTEGER PRIMARY KEY, data BLOB);
CREATE TABLE IF NOT EXISTS cleanset(id INTEGER PRIMARY KEY CHECK (id = 1), racy_ns INTEGER, held INTEGER,
  live INTEGER, paths INTEGER, sizes BLOB, mtimes BLOB);
CREATE TABLE IF NOT EXISTS cleanpaths(gen INTEGER PRIMARY KEY, data BLOB);
CREATE TRIGGER IF NOT EXISTS cleanset_insert AFTER INSERT ON files BEGIN DELETE FROM cleanset; END;
CREATE TRIGGER IF NOT EXISTS cleanset_update AFTER UPDATE ON files BEGIN DELETE FROM cleanset; END;
CREATE TRIGGER IF NOT EXISTS cleanset_delete AFTER DELETE ON files BEGIN DELETE FROM cleanset; END;
"""

# The store's records are namedtuples and plain classes, not dataclasses: a no-op `folio index` loads
# this module, and importing dataclasses (with inspect) and making a class with it cost ~25 ms there.

Stamp = namedtuple("Stamp", "id path size mtime_ns sha256 stamped_ns")


class Row(namedtuple("Row", "slot file_id start end level heading trail truncated text_hash vec")):
    """A section record as stored (trail: a tuple of headings)."""

    __slots__ = ()


class NewFile:
    """A file's stamp as a commit writes it: `id` None until the commit inserts the file (and then
    its new id), the id of the stamp it replaces otherwise (an update, or a rename's old id)."""

    __slots__ = ("id", "path", "size", "mtime_ns", "sha256", "stamped_ns", "frontmatter", "title")

    def __init__(self, id: int | None, path: str, size: int, mtime_ns: int, sha256: str, stamped_ns: int,
                 frontmatter: dict, title: str | None):
        self.id, self.path, self.size, self.mtime_ns = id, path, size, mtime_ns
        self.sha256, self.stamped_ns, self.frontmatter, self.title = sha256, stamped_ns, frontmatter, title


class NewRecord:
    """A section record as a commit writes it. Its file may be inserted by the same commit, so it
    names the NewFile, whose id the commit fills in before it writes the record."""

    __slots__ = ("slot", "file", "start", "end", "level", "heading", "trail", "truncated", "text_hash", "vec")

    def __init__(self, slot: int, file: NewFile, start: int, end: int, level: int, heading: str,
                 trail: tuple[str, ...], truncated: bool, text_hash: str, vec: bool):
        self.slot, self.file, self.start, self.end, self.level = slot, file, start, end, level
        self.heading, self.trail, self.truncated, self.text_hash, self.vec = heading, trail, truncated, text_hash, vec

    def replace(self, **changes) -> NewRecord:
        """A copy with `changes` (field=value)."""
        values = [changes.pop(f, getattr(self, f)) for f in self.__slots__]
        if changes:
            raise TypeError(f"NewRecord has no field {sorted(changes)[0]}")
        return NewRecord(*values)


# What each stored value must be where it is read (index.db is data: a hand edit, a clone's copy, a
# tool that wrote into it): a value of another type is the index's damage, one sentence, never a
# traceback further on. None stands for SQL NULL where the column may hold it.
_WHOLE, _TEXT, _OPT_TEXT, _OPT_WHOLE = "a whole number", "text", "text or NULL", "a whole number or NULL"
_KINDS = {_WHOLE: (int,), _TEXT: (str,), _OPT_TEXT: (str, type(None)), _OPT_WHOLE: (int, type(None))}
_RECORD_COLUMNS = (("file_id", _WHOLE), ("start", _WHOLE), ("end", _WHOLE), ("level", _WHOLE),
                   ("heading", _OPT_TEXT), ("trail", _OPT_TEXT), ("truncated", _OPT_WHOLE),
                   ("text_hash", _OPT_TEXT), ("vec", _OPT_WHOLE))
_STAMP_COLUMNS = (("path", _TEXT), ("size", _OPT_WHOLE), ("mtime_ns", _OPT_WHOLE), ("sha256", _OPT_TEXT),
                  ("stamped_ns", _OPT_WHOLE))


def damaged_value(db, row: str, column: str, value, kind: str) -> FolioError:
    """The sentence for a stored value that is not what folio wrote there."""
    shown = repr(value)
    return corrupt(db, f"{row}: `{column}` is {shown if len(shown) <= 40 else shown[:37] + '...'}, not {kind}")


def _check(db, row: str, columns, values) -> None:
    for (name, kind), v in zip(columns, values, strict=True):
        if not isinstance(v, _KINDS[kind]) or isinstance(v, bool):
            raise damaged_value(db, row, name, v, kind)


def _row(r, db) -> Row:
    """A records row as read, checked: numbers are numbers, the trail a JSON list of headings."""
    _check(db, f"records row {r[0]}", _RECORD_COLUMNS, r[1:10])
    try:
        trail = json.loads(r[6] or "[]")
    except ValueError:
        trail = None
    if not (isinstance(trail, list) and all(isinstance(t, str) for t in trail)):
        raise damaged_value(db, f"records row {r[0]}", "trail", r[6], "a JSON list of headings")
    return Row(r[0], r[1], r[2], r[3], r[4], r[5] or "", tuple(trail), bool(r[7]), r[8] or "", bool(r[9]))


def _stamp(r, db) -> Stamp:
    _check(db, f"files row {r[0]}", _STAMP_COLUMNS, r[1:6])
    return Stamp(*r)


def check_clean(db, r) -> None:
    """A (path, size, mtime_ns) row read straight from the files table (the cleanset's), checked as
    _stamp checks a whole stamp."""
    _check(db, f"the files row of {r[0]!r:.60}", _STAMP_COLUMNS[:3], r)


def frontmatter_of(raw, db, path) -> dict:
    """A file's stored frontmatter: a JSON object (NULL reads as none)."""
    try:
        fm = json.loads(raw or "{}") if isinstance(raw, str | None) else None
    except ValueError:
        fm = None
    if not isinstance(fm, dict):
        raise damaged_value(db, f"the files row of {path}", "frontmatter", raw, "a JSON object")
    return fm


def in_chunks(items: list, size: int = 900):
    """`items` in slices of at most `size`: SQLite binds at most 999 parameters a statement."""
    for i in range(0, len(items), size):
        yield items[i:i + size]


def marks(chunk: list) -> str:
    """`?,?,...`, one per item of `chunk`."""
    return ",".join("?" * len(chunk))


class Records:
    """The Store's reads of the files and records tables (uses the Store's conn, write, meta and its
    reader cache, `_cache`), and the SQL a commit runs on them (_write_tables)."""

    conn: sqlite3.Connection
    write: bool
    dir: Path
    _cache: dict

    @property
    def _db(self) -> Path:
        return self.dir / "index.db"

    def records(self, slots: Iterable[int]) -> dict[int, Row]:
        slots = list(slots)
        out: dict[int, Row] = {}
        for chunk in in_chunks(slots):
            for r in self.conn.execute(f'SELECT slot, file_id, start, "end", level, heading, trail, truncated, '
                                       f"text_hash, vec FROM records WHERE slot IN ({marks(chunk)})", chunk):
                out[r[0]] = _row(r, self._db)
        return out

    def file_rows(self, file_id: int) -> list[Row]:
        return [_row(r, self._db) for r in self.conn.execute(
            'SELECT slot, file_id, start, "end", level, heading, trail, truncated, text_hash, vec '
            'FROM records WHERE file_id = ? ORDER BY start, slot', (file_id,))]

    def file_order(self, slot: int) -> list[tuple[int, int, int]]:
        """(slot, start, end) of every record in the file holding `slot`, in line order (empty if none)."""
        rows = self.conn.execute(
            'SELECT slot, start, "end" FROM records WHERE file_id = (SELECT file_id FROM records WHERE slot = ?) '
            "ORDER BY start, slot", (slot,)).fetchall()
        for r in rows:
            _check(self._db, f"records row {r[0]}", _RECORD_COLUMNS[1:3], r[1:])
        return rows

    def files_under(self, prefix: str) -> int:
        """How many indexed files lie under the root-relative directory `prefix`."""
        head = prefix.rstrip("/") + "/"
        return self.conn.execute("SELECT COUNT(*) FROM files WHERE substr(path, 1, ?) = ?",
                                 (len(head), head)).fetchone()[0]

    def file_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]

    def rereads_left(self) -> bool:
        """Whether any file still waits to be read again (Store.reread_all cleared its hash)."""
        return self.conn.execute("SELECT 1 FROM files WHERE sha256 = '' LIMIT 1").fetchone() is not None

    def slots_of_files(self, file_ids: Iterable[int]):
        """Every record slot of the given files, as an int array."""
        import numpy as np

        out: list[int] = []
        for chunk in in_chunks(list(file_ids)):
            out += [r[0] for r in self.conn.execute(f"SELECT slot FROM records WHERE file_id IN ({marks(chunk)})",
                                                    chunk)]
        return np.array(out, dtype=np.int64)

    def files(self, ids: Iterable[int] | None = None) -> dict[int, dict]:
        cols = "id, path, size, mtime_ns, sha256, stamped_ns, frontmatter, title"
        if ids is None:
            rows = self.conn.execute(f"SELECT {cols} FROM files").fetchall()
        else:
            rows = []
            for chunk in in_chunks(list(ids)):
                rows += self.conn.execute(f"SELECT {cols} FROM files WHERE id IN ({marks(chunk)})", chunk).fetchall()
        db = self._db
        for r in rows:
            _check(db, f"files row {r[0]}", _STAMP_COLUMNS + (("title", _OPT_TEXT),), r[1:6] + r[7:8])
        return {r[0]: {"id": r[0], "path": r[1], "size": r[2], "mtime_ns": r[3], "sha256": r[4],
                       "stamped_ns": r[5], "frontmatter": frontmatter_of(r[6], db, r[1]), "title": r[7] or ""}
                for r in rows}

    def _unchanged(self, name: str, read: Callable):
        """read(), kept by a reader while no other connection has committed (SQLite's data_version):
        a store kept open across queries reads the frontmatter once per index change."""
        if self.write:
            return read()
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        hit = self._cache.get(name)
        if hit is not None and hit[0] == version:
            return hit[1]
        out = read()
        self._cache[name] = (version, out)
        return out

    def frontmatter_table(self) -> tuple[list[int], list[str]]:
        """(file ids, raw frontmatter JSON texts) for every file — filters decode what they need."""
        def read():
            rows = self.conn.execute("SELECT id, frontmatter FROM files").fetchall()
            raws = [r[1] or "{}" for r in rows]
            for r, raw in zip(rows, raws, strict=True):  # a JSON object's text begins with `{`: filters rely on it
                if type(raw) is not str or raw[:1] != "{":
                    path = self.conn.execute("SELECT path FROM files WHERE id = ?", (r[0],)).fetchone()[0]
                    frontmatter_of(raw, self._db, path)  # says what it is
            return [r[0] for r in rows], raws

        return self._unchanged("frontmatter", read)

    def check_files(self) -> None:
        """Every file row's frontmatter a JSON object (or NULL), judged by SQLite in one scan: `folio
        index` and `status` refuse a damaged one as the query would (the Store runs it whenever the
        files table may have changed since the last full run: cleanset.py)."""
        try:
            row = self.conn.execute(
                "SELECT path, frontmatter FROM files WHERE frontmatter IS NOT NULL AND CASE WHEN typeof(frontmatter) "
                "= 'text' AND json_valid(frontmatter) THEN json_type(frontmatter) != 'object' ELSE 1 END LIMIT 1"
            ).fetchone()
        except sqlite3.OperationalError:  # an SQLite built without its JSON functions: the first character
            row = self.conn.execute(
                "SELECT path, frontmatter FROM files WHERE frontmatter IS NOT NULL AND (typeof(frontmatter) != "
                "'text' OR substr(frontmatter, 1, 1) != '{') LIMIT 1").fetchone()
        if row is not None:
            frontmatter_of(row[1], self._db, row[0])

    def paths(self) -> dict[int, str]:
        """{file id: root-relative path} for every file (the @path identity reads only this)."""
        def read():
            out = dict(self.conn.execute("SELECT id, path FROM files"))
            for i, p in out.items():
                if type(p) is not str:
                    raise damaged_value(self._db, f"files row {i}", "path", p, _TEXT)
            return out

        return self._unchanged("paths", read)

    def stamps(self) -> dict[str, Stamp]:
        db = self._db
        return {r[1]: _stamp(r, db) for r in self.conn.execute(
            "SELECT id, path, size, mtime_ns, sha256, stamped_ns FROM files")}

    def paths_held(self, paths: list[str] | None = None) -> list[str]:
        """Every file path the index holds (or those of `paths` it holds)."""
        if paths is None:
            return [r[0] for r in self.conn.execute("SELECT path FROM files")]
        return list(self.stamps_for(paths))

    def stamps_for(self, paths: list[str]) -> dict[str, Stamp]:
        if len(paths) > 2000:
            wanted = set(paths)
            return {p: s for p, s in self.stamps().items() if p in wanted}
        out = {}
        for chunk in in_chunks(paths):
            for r in self.conn.execute("SELECT id, path, size, mtime_ns, sha256, stamped_ns FROM files WHERE path IN "
                                       f"({marks(chunk)})", chunk):
                out[r[1]] = _stamp(r, self._db)
        return out

    def stamp(self, path: str) -> Stamp | None:
        r = self.conn.execute("SELECT id, path, size, mtime_ns, sha256, stamped_ns FROM files WHERE path = ?",
                              (path,)).fetchone()
        return _stamp(r, self._db) if r else None

    def has_vectors(self) -> bool:
        """True when at least one record has a valid vector."""
        if not self.meta.dim:
            return False
        return self.conn.execute("SELECT 1 FROM records WHERE vec = 1 LIMIT 1").fetchone() is not None

    def slots_with_vectors(self, hashes: Iterable[str]) -> dict[str, int]:
        """text hash -> a slot whose record has that text and a valid vector, for those that have one."""
        out: dict[str, int] = {}
        for chunk in in_chunks(list(set(hashes))):
            # LIMIT 1 per hash: a boilerplate section held by thousands of records is one lookup
            out.update((h, slot) for h, slot in self.conn.execute(
                f"WITH h(x) AS (VALUES {','.join(['(?)'] * len(chunk))}) SELECT x, (SELECT slot FROM records "
                f"WHERE text_hash = x AND vec = 1 LIMIT 1) FROM h", chunk) if slot is not None)
        return out

    def pending_file_ids(self) -> set[int]:
        """Files with at least one record whose vector is not (or no longer) valid."""
        return {r[0] for r in self.conn.execute("SELECT DISTINCT file_id FROM records WHERE vec = 0")}

    def pending_counts(self) -> tuple[int, int]:
        """(records without a valid vector, files holding them): read through the partial index."""
        n, f = self.conn.execute("SELECT COUNT(*), COUNT(DISTINCT file_id) FROM records WHERE vec = 0").fetchone()
        return n, f

    def counts(self) -> dict[str, int]:
        c = self.conn.execute("SELECT COUNT(*), COALESCE(SUM(vec), 0), COALESCE(SUM(truncated), 0) FROM records"
                              ).fetchone()
        files = self.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        return {"files": files, "sections": c[0], "embedded": c[1], "truncated": c[2],
                "dead_rows": max(self.meta.rows - c[0], 0) if self.meta.dim else 0}

    def truncated_rows(self) -> list[tuple[str, Row]]:
        out = []
        for r in self.conn.execute(
                'SELECT r.slot, r.file_id, r.start, r."end", r.level, r.heading, r.trail, r.truncated, r.text_hash, '
                "r.vec, f.path FROM records r JOIN files f ON f.id = r.file_id WHERE r.truncated = 1 "
                "ORDER BY f.path, r.start"):
            out.append((r[10], _row(r[:10], self._db)))
        return out

    def next_slot(self) -> int:
        r = self.conn.execute("SELECT MAX(slot) FROM records").fetchone()[0]
        return max(self.meta.rows, (r + 1) if r is not None else 0)

    def _holds_records(self) -> bool:
        try:
            return self.conn.execute("SELECT 1 FROM records LIMIT 1").fetchone() is not None
        except sqlite3.DatabaseError:
            return False

    def _write_tables(self, c, batch) -> list[int]:
        """Inside commit's transaction: the batch's deletions, file rows (an inserted NewFile gets its
        id), restamps, records, and the records given their vector. Returns the ids of the files it
        inserted."""
        if batch.delete_slots:
            c.executemany("DELETE FROM records WHERE slot = ?", [(s,) for s in batch.delete_slots])
        if batch.delete_files:
            c.executemany("DELETE FROM records WHERE file_id = ?", [(f,) for f in batch.delete_files])
            c.executemany("DELETE FROM files WHERE id = ?", [(f,) for f in batch.delete_files])
        inserted = []
        for f in batch.files:
            if f.id is None:
                cur = c.execute(
                    "INSERT INTO files(path, size, mtime_ns, sha256, stamped_ns, frontmatter, title) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (f.path, f.size, f.mtime_ns, f.sha256, f.stamped_ns,
                     json.dumps(f.frontmatter, ensure_ascii=False), f.title))
                f.id = cur.lastrowid
                inserted.append(f.id)
            else:
                c.execute("UPDATE files SET path=?, size=?, mtime_ns=?, sha256=?, stamped_ns=?, frontmatter=?, "
                          "title=? WHERE id=?",
                          (f.path, f.size, f.mtime_ns, f.sha256, f.stamped_ns,
                           json.dumps(f.frontmatter, ensure_ascii=False), f.title, f.id))
        if batch.restamps:
            c.executemany("UPDATE files SET size=?, mtime_ns=?, stamped_ns=? WHERE id=?", batch.restamps)
        if batch.records:
            trails: dict[tuple, str] = {}  # a file's records, and its revisions', share their trails: encoded once
            for r in batch.records:
                if r.trail not in trails:
                    trails[r.trail] = json.dumps(list(r.trail), ensure_ascii=False)
            c.executemany(
                'INSERT OR REPLACE INTO records(slot, file_id, start, "end", level, heading, trail, truncated, '
                "text_hash, vec) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(r.slot, r.file.id, r.start, r.end, r.level, r.heading, trails[r.trail], int(r.truncated),
                  r.text_hash, int(r.vec)) for r in batch.records])
        if batch.given:
            c.executemany("UPDATE records SET vec = 1 WHERE slot = ?", [(s,) for s in batch.given])
        return inserted
