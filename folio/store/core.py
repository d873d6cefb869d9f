"""Store, the one door to an open `.folio/`: opening, transactions and snapshots, and the writes
that span the index's parts (a batch's commit, a new vector space, recovery after a killed run).

Owns the SQLite connection (WAL; readers open index.db read-only: mode=ro, or immutable where the
directory cannot hold SQLite's -shm and no -wal waits), the format check on open, the typed meta
(Meta, re-read with each snapshot and after each write), and the commit order that makes a crash
harmless: vector rows and lexical segment files are written and flushed before the SQLite
transaction that names them commits, so no record ever points at an unwritten row; and which of
several indexes SQLite's error on a page it cannot read came from (damage_among). The Store's
other methods come from its parts, each with its own module: records.py (files and records),
matrix.py, slotmap.py, cleanset.py, segments.py, compaction.py. Must not rank or parse Markdown.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from folio.errors import FolioError, disk_full
from folio.store import meta as metatable
from folio.store.cleanset import Cleanset
from folio.store.compaction import Compaction
from folio.store.directory import (
    NoIndex,
    Vanished,
    check_dir,
    corrupt,
    damaged_root,
    exists,
    identity,
    index_dir,
    make_index_dir,
    not_writable,
    remove_index,
    size_on_disk,
    unwritable,
    verify,
)
from folio.store.matrix import Matrix, matrix_name
from folio.store.meta import FORMAT, Meta, check_keys
from folio.store.records import SCHEMA, NewFile, NewRecord, Records
from folio.store.segments import Segments
from folio.store.slotmap import SlotMap


class Store(Records, Matrix, SlotMap, Cleanset, Segments, Compaction):
    """An open `.folio/`. Open with Store.open(root) (read) or Store.open(root, write=True)."""

    def __init__(self, root: Path, conn: sqlite3.Connection, write: bool):
        self.root = root
        self.dir = index_dir(root)
        self.conn = conn
        self.write = write
        self.meta = Meta()  # typed; its stored text is self._meta (written by _put_meta only)
        self._meta: dict[str, str | None] = {}
        self._lock = None
        self._cache: dict = {}  # what a reader derived while no other connection committed (data_version)
        self._committed = False  # whether this writer has committed anything (live_count)
        self._matrix = None  # matrix.py
        self._matrix_key = None
        self._slots = None  # slotmap.py: the writer's copy of the slot map, loaded at its first commit
        self._clean = None  # cleanset.py: clean_stamps' whole set as this writer found it (see save_clean)
        self._live = None  # cleanset.py: the records count the cleanset row keeps (live_count)
        self._lex_cache: dict[str, dict] = {}  # segments.py: segment name -> its arrays (a name is never reused)
        self.reload_meta()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, root: Path, *, write: bool = False) -> Store:
        d = index_dir(root)
        db = d / "index.db"
        there = verify(root)  # no link at any of folio's names: SQLite would write its -wal through one
        if not write and not (there and db.is_file()):
            raise NoIndex(f"no index at {root}: run `folio index` there first")
        if write and not there:
            make_index_dir(root)
        before = None if write else identity(root)
        try:
            if write:
                conn = sqlite3.connect(db, timeout=30.0, isolation_level=None, check_same_thread=False)
                _refuse_foreign(conn, db)  # before the WAL switch or the schema write a byte of it
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                # Schema and format stamp in one transaction: a run killed here leaves no half-made index.
                conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}INSERT OR IGNORE INTO meta(key, value) "
                                   f"VALUES ('format', '{FORMAT}'), ('created', '{time.time()}'), ('rows', '0'), "
                                   f"('gen', '0');COMMIT;")
            else:
                conn = _read_only_conn(db)
            store = cls(root, conn, write)
        except sqlite3.DatabaseError as e:
            from folio.errors import full_sentence

            if disk_full(e):  # no room to create it (or its WAL): not damage
                raise FolioError(full_sentence(e, d)) from None
            name = getattr(e, "sqlite_errorname", "")
            if write and (name.startswith("SQLITE_READONLY") or "readonly database" in str(e)
                          or (name.startswith("SQLITE_CANTOPEN") and not os.access(d, os.W_OK))):
                raise not_writable(root, unwritable(d) or "permission denied") from None
            if not write and identity(root) != before:  # removed or rebuilt while it was opened
                raise Vanished(f"the index at {d} was removed or rebuilt while it was opened") from None
            raise corrupt(db, str(e)) from None
        fmt = store.meta.format
        if fmt is None and not write:
            try:
                _refuse_foreign(store.conn, db)
            except FolioError:
                store.close()
                raise
        if fmt is None and not store._holds_records():
            store.close()
            raise NoIndex(f"no index at {root} yet (the first `folio index` there did not finish): "
                             f"run `folio index` there")
        elif fmt is None:
            raise corrupt(db, "no format version recorded")
        elif fmt != FORMAT:
            raise FolioError(
                f"the index at {d} was written in format {fmt}, and this folio reads format {FORMAT}; "
                f"run `folio index --rebuild` to build it anew"
            )
        return store

    def unwritable(self) -> str | None:
        """Why this process cannot write the index (None when it can): a query then leaves stale rows stale."""
        return unwritable(self.dir)

    def close(self) -> None:
        self._matrix = None
        self.conn.close()
        self.unlock()

    def size_on_disk(self) -> int:
        """Bytes in folio's own names (a `.folio` linked to a cache may hold other things)."""
        return size_on_disk(self.dir, self._matrices())

    def _matrices(self) -> list[str]:
        """The matrix files this index names: the current generation's (once it has a vector space),
        and a loose one."""
        gens = {self.meta.gen, self.meta.loose} if self.dim else {self.meta.loose}
        return [self.matrix_path(g).name for g in gens if g is not None]

    def check(self) -> None:
        """Cheap checks that the files the records name are there and big enough (no full scan), and,
        where the files table may have changed since the last full run (no cleanset row), that every
        frontmatter stored is a JSON object (one scan in SQLite)."""
        self._check_matrix()
        self._check_segments()
        if not self._clean_row():
            self.check_files()

    def kept(self) -> str | None:
        """What the index holds as committed, said after a run stopped on a write that failed (a full
        disk): the sentence's part that says what is kept. None where even that cannot be read."""
        try:
            if self.conn.in_transaction:  # a COMMIT refused for want of room may leave it open
                self.conn.execute("ROLLBACK")
            c = self.counts()
        except sqlite3.Error:
            return None
        if not c["files"]:
            return "no commit reached the disk, so the index holds nothing yet"
        return (f"the index is intact up to its last commit ({c['files']} files, {c['embedded']} of its "
                f"{c['sections']} sections with vectors; queries answer from it)")

    # -- meta ------------------------------------------------------------------------------

    def reload_meta(self) -> None:
        self._meta = metatable.read(self.conn, self.dir / "index.db")
        self.meta = Meta.parse(self._meta, self.dir / "index.db")

    def forget_credentials(self) -> None:
        """A writer's part of the rule reload_meta keeps for readers: an endpoint recorded with
        `user:password@` is rewritten without them, and the old row's bytes are zeroed."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'endpoint'").fetchone()
        if row and row[0] and row[0] != self.meta.endpoint:
            self.conn.execute("PRAGMA secure_delete = ON")
            self.set_meta(endpoint=self.meta.endpoint)
            self.conn.execute("PRAGMA secure_delete = OFF")

    def set_meta(self, **values) -> None:
        """Write meta fields by name (Meta's fields; None unsets one), in a transaction of their own."""
        with self.transaction():
            self._put_meta(**values)

    def _put_meta(self, **values) -> None:
        """Write meta fields inside the caller's transaction and re-read them typed."""
        self.meta = metatable.write(self.conn, self._meta, values, self.dir / "index.db")

    # -- transactions ----------------------------------------------------------------------

    class _Tx:
        def __init__(self, conn, durable: bool):
            self.conn, self.durable = conn, durable

        def __enter__(self):
            if self.durable:
                self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, et, ev, tb):
            try:
                self.conn.execute("COMMIT" if et is None else "ROLLBACK")
            finally:
                if self.durable:
                    with contextlib.suppress(sqlite3.Error):  # never in place of the commit's own error
                        self.conn.execute("PRAGMA synchronous=NORMAL")
            return False

    def transaction(self, durable: bool = False):
        """BEGIN IMMEDIATE ... COMMIT. `durable`: the commit is on disk when it returns (WAL synced:
        synchronous=FULL for it). Under NORMAL a commit survives a killed process but may be rolled
        back by a power loss; a commit after which files the previous state names are unlinked
        (compaction, a segment merge, a new vector space) must not be, or the index would come back
        naming files that are gone, and recover() would remove the new ones."""
        return Store._Tx(self.conn, durable)

    def snapshot(self):
        """A read transaction: every read inside sees one committed state."""
        store = self

        class _Snap:
            def __enter__(self_inner):
                store.conn.execute("BEGIN")
                store.reload_meta()
                return store

            def __exit__(self_inner, *exc):
                store.conn.execute("COMMIT")
                return False

        return _Snap()

    # -- the lock (lock.py takes it; the store keeps it until it closes) ---------------------

    def hold(self, lock) -> None:
        self._lock = lock

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # -- writing ---------------------------------------------------------------------------

    def recover(self) -> None:
        """Drop what a killed writer left behind past the committed state (writer only, under the lock)."""
        self._recover_matrix()
        self._remove_orphan_segments()

    def reread_all(self) -> None:
        """Mark every file to be read again by the next pass (a new record text, budget or token
        limit): its stamp loses its hash, and the racy-stamp rule then reads it. Its records keep
        their vectors until the pass replaces them."""
        with self.transaction() as c:
            c.execute("UPDATE files SET sha256 = '', stamped_ns = 0")
        self._forget_clean()

    def new_space(self, dim: int, **meta) -> None:
        """Switch to a new vector space (`meta`: its fields, as set_meta takes them): every record's
        vector becomes invalid, a new matrix generation."""
        check_keys(meta)
        gen = self._claim_generation()
        rows = self.next_slot()
        self._new_matrix(gen, rows, dim)
        old = self.matrix_path() if self.dim else None  # an index without a space names no matrix
        with self.transaction(durable=True) as c:  # the old matrix is unlinked below
            c.execute("UPDATE records SET vec = 0")
            owners = self._rebuild_slot_map(c)
            self._put_meta(**meta, dim=dim, gen=gen, rows=rows, loose=self.meta.gen if old else None)
        self._slots = owners
        self._matrix = None
        if old:
            self._forget_loose(old)

    def commit(self, batch: Batch) -> None:
        """Write one batch: rows, then lexical segment, then the records naming them, atomically."""
        dim = self.dim
        rows_after = max(self.rows, batch.high_water)
        self._write_rows(batch.vectors, rows_after)
        seg_name = None
        if batch.segment is not None:
            seg_name = self._write_segment(batch.segment)
        owners, self._slots = self._slots, None  # a failed commit leaves no uncommitted copy behind
        live = self.live_count() if owners is None else None  # before this commit changes any record
        self._committed = True
        with self.transaction() as c:
            touched, owners = self._slots_before(c, batch, owners, live)
            changed = self._clean_before(c, batch)
            changed += self._write_tables(c, batch)
            if seg_name:
                self._add_segment(c, seg_name)
            owners = self._slots_after(c, touched, owners)
            self._clean_after(changed)
            meta = dict(batch.meta)
            if dim:
                meta["rows"] = rows_after
            if meta:
                self._put_meta(**meta)
        self._slots = owners
        self._matrix = None


class Batch:
    """What one commit writes. Filled by the indexer, applied by Store.commit: vectors (slot ->
    vector), records, files (to insert: id None, or update), restamps ((size, mtime_ns, stamped_ns,
    id) each), the slots and files to delete, the lexical segment (or None), meta to set (set_meta),
    the slot high-water mark, and `given`: slots of records an earlier commit wrote without a vector
    whose vector this one writes (a big file's later parts: their records.vec set)."""

    __slots__ = ("vectors", "records", "files", "restamps", "delete_slots", "delete_files", "segment", "meta",
                 "high_water", "given")

    def __init__(self, vectors: dict, records: list[NewRecord], files: list[NewFile], restamps: list,
                 delete_slots: list, delete_files: list, segment: dict | None, meta: dict, high_water: int,
                 given: list[int] | None = None):
        self.vectors, self.records, self.files, self.restamps = vectors, records, files, restamps
        self.delete_slots, self.delete_files, self.segment = delete_slots, delete_files, segment
        self.meta, self.high_water = meta, high_water
        self.given = [] if given is None else given

    @classmethod
    def empty(cls, high_water: int) -> Batch:
        return cls({}, [], [], [], [], [], None, {}, high_water)

    def set_meta(self, **values) -> None:
        """Meta fields by name (as Store.set_meta takes them), written with the batch's commit."""
        check_keys(values)
        self.meta.update(values)

    def __bool__(self) -> bool:
        return bool(self.vectors or self.records or self.files or self.restamps or self.delete_slots
                    or self.delete_files or self.segment is not None or self.meta or self.given)


def read_meta(root: Path | None) -> Meta:
    """An index's meta, read only; an empty Meta when there is none or it cannot be read (for commands
    that only show what an index recorded, like `folio config` and `folio doctor`)."""
    if root is None or not exists(root):
        return Meta()
    try:
        st = Store.open(root)
    except FolioError:
        return Meta()
    try:
        return st.meta
    finally:
        st.close()


_FOLIO_TABLES = frozenset({"meta", "files", "records", "lexseg", "slotmap", "cleanset", "cleanpaths"})


def _refuse_foreign(conn: sqlite3.Connection, db: Path) -> None:
    """One sentence for an index.db that is another program's SQLite database (`.folio` may be a link
    to a directory that holds other things): folio writes into an index.db, and removes one, only
    when it is folio's (its meta records a format) or new (no table yet)."""
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    other = sorted(t for t in tables if t not in _FOLIO_TABLES and not t.startswith("sqlite_"))
    if not other:
        return
    try:
        if conn.execute("SELECT 1 FROM meta WHERE key = 'format' AND value IS NOT NULL").fetchone():
            return  # folio's, of whatever version (another format has a sentence of its own)
    except sqlite3.OperationalError:
        pass
    shown = ", ".join(other[:4]) + (f" and {len(other) - 4} more" if len(other) > 4 else "")
    raise FolioError(f"{db} is not an index folio made: it is another program's SQLite database (tables "
                     f"{shown}), and folio writes into an index.db, or removes one, only when it is folio's or new; "
                     f"move that file out of {db.parent}, or make {db.parent.name} a directory of folio's own, and "
                     f"run `folio index`")


def discard(root: Path) -> list[str]:
    """`folio index --rebuild`'s removal (under the lock): folio's index at root, and only what it
    names (directory.remove_index), read from index.db as it is — another program's database there is
    refused and kept; one too damaged to read names no matrix file, and those are left. Returns the
    notice saying what was left, if anything."""
    d = index_dir(root)
    db = d / "index.db"
    left = remove_index(root, _named_matrices(d, db) if check_dir(root) and os.path.lexists(db) else [])
    return [f"the index at {d} was too damaged to say which files it names, so --rebuild left {', '.join(left)} "
            f"there (folio removes only what its index names): remove them yourself if nothing but folio uses that "
            f"directory"] if left else []


def sqlite_damage(e: BaseException) -> bool:
    """Whether `e` is SQLite saying an index.db is corrupt, wherever it was met (a bad page found in the
    middle of a read names no file): not a lock, a full disk or a read-only directory."""
    if isinstance(e, sqlite3.OperationalError):
        return "no such table" in str(e) or "no such column" in str(e)
    return isinstance(e, sqlite3.DatabaseError) and not disk_full(e)


def damage_among(error: BaseException, roots: list[Path]) -> tuple[Path, FolioError] | None:
    """(the corpus among `roots` whose index `error` says is damaged, the sentence naming it), or None.
    A Damaged (or a Vanished naming its index) says where. A SQLite error met mid-read names no file:
    of one corpus, it is that one's; of several, each index.db is checked (PRAGMA quick_check reads every
    page once; only on this error's way) and the first that fails is the one."""
    root = damaged_root(error, roots)
    if root is not None:
        return root, error
    if not sqlite_damage(error):
        return None
    if len(roots) == 1:
        return roots[0], corrupt(index_dir(roots[0]) / "index.db", str(error))
    for root in roots:
        db = index_dir(root) / "index.db"
        try:
            conn = _read_only_conn(db)
            try:
                ok = [r[0] for r in conn.execute("PRAGMA quick_check(1)")] == ["ok"]
            finally:
                conn.close()
        except sqlite3.DatabaseError:
            ok = False
        if not ok:
            return root, corrupt(db, str(error))
    return None


def _named_matrices(d: Path, db: Path) -> list[str] | None:
    """The matrix files an index.db names; None where it cannot be read (damaged, or a link at one of
    its names: never read through one, SQLite would make its -shm there)."""
    if any(os.path.islink(d / n) for n in ("index.db", "index.db-wal", "index.db-shm")):
        return None
    if not db.stat().st_size:
        return []
    try:
        conn = _read_only_conn(db)
    except sqlite3.DatabaseError:
        return None
    try:
        _refuse_foreign(conn, db)
        if not conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
            return []
        got = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('gen', 'loose', 'dim')"))
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()
    gens = {got.get("gen") or "0", got.get("loose")} if got.get("dim") else {got.get("loose")}
    return [matrix_name(int(g)) for g in gens if isinstance(g, str) and g.isascii() and g.isdigit()]


def _read_only_conn(db: Path) -> sqlite3.Connection:
    """index.db opened read-only. SQLite reads a WAL database through its -shm: where the directory
    cannot hold one (a read-only mount, another user's directory) and no -wal holds commits, the
    file is read as immutable; a -wal it cannot read is one sentence. A writer killed mid-transaction
    (a hot journal: SQLite undoes it only with write access) is undone first where this user may write."""
    uri = db.absolute().as_uri()
    try:
        return _open_ro(uri)
    except sqlite3.OperationalError as e:
        name = getattr(e, "sqlite_errorname", "")
        if name not in ("SQLITE_READONLY_ROLLBACK", "SQLITE_READONLY_RECOVERY") or not os.access(db.parent, os.W_OK):
            error = e
        else:
            try:
                _settle(uri)  # undone as the next writer would undo it (no new file, no schema)
                return _open_ro(uri)
            except sqlite3.OperationalError as again:
                error = again
    name = getattr(error, "sqlite_errorname", "")
    full = disk_full(error)  # no room for the -shm (SQLITE_IOERR_SHMSIZE)
    if not (full or name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")) or "readonly" in str(error)
            or "unable to open" in str(error)):
        raise error
    wal = db.with_name(db.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        if full:
            raise FolioError(f"no space left on the device (disk full) at {db.parent}: the index holds commits "
                             f"still in {wal.name}, which SQLite reads only where it can make {db.name}-shm "
                             f"beside it; free some space there and run the command again") from None
        raise FolioError(f"the index at {db.parent} is read-only here and holds commits still in "
                         f"{wal.name}, which SQLite reads only where it can write {db.name}-shm beside it: "
                         f"run `folio index` there once with write access (it folds them in)") from None
    conn = sqlite3.connect(uri + "?immutable=1", uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA schema_version").fetchone()
    return conn


def _open_ro(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # opens the file and its WAL index now
        return conn
    except BaseException:
        conn.close()
        raise


def _settle(uri: str) -> None:
    """Open index.db for writing (never creating it) so SQLite rolls back a dead writer's hot journal or
    rebuilds its WAL index; the reader then opens it read-only as usual."""
    conn = sqlite3.connect(uri + "?mode=rw", uri=True, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    finally:
        conn.close()
