"""The `.folio/` directory: SQLite records, the float32 matrix, lexical segments, the write lock.

Owns every byte under `.folio/`. Commit order makes a crash harmless: vector rows and lexical
segment files are written and flushed before the SQLite transaction that names them commits, so
no record ever points at an unwritten row. Its meta table is read typed (Meta, parsed once per read
and write): no caller parses its text. Readers use WAL snapshots and are never blocked;
compaction writes a generation-named matrix and switches to it in the commit that renumbers
slots. Must not rank or parse Markdown.

Format (version 1), readable with sqlite3 and one numpy line:
  index.db   meta(key, value); files(id, path, size, mtime_ns, sha256, stamped_ns, frontmatter, title);
             records(slot, file_id, start, end, level, heading, trail, truncated, text_hash, vec);
             lexseg(name, seq)
  vectors.f32 / vectors.<gen>.f32   row-major little-endian float32, shape (meta.rows, meta.dim),
             L2-normalised; row = slot; a row is meaningful only where records.vec = 1
  slotmap(chunk, data)     every slot's owner, derived from records and written in the same transaction:
             int64 per slot, file_id * 2 + vec, or -1 where no record holds the slot; SLOTMAP_CHUNK slots
             per blob, chunk k holding slots k*SLOTMAP_CHUNK... (meta.slotmap = 1 when kept). A query
             reads it instead of every record row: 2 ms against 75 ms at 119k records.
  cleanset(id=1, racy_ns, held, live, paths, sizes, mtimes)   the stat prefilter's side of the
             index (clean_stamps): the path, size and mtime_ns of every file stamped at least racy_ns
             after its mtime, as '\0'-joined UTF-8 paths (the cleanpaths row of generation `paths`,
             kept while the list of paths stays the same: an edit rewrites two small arrays only) and
             two little-endian int64 arrays, how many files there are and how many records
             (live_count: no commit changes records without changing its files' rows, but
             compaction, which runs before it is written). Triggers on files delete the row with
             any change to a file row (whoever writes it); a full run writes it back at its end
             (save_clean). A no-op `folio index` reads it instead of 16k file rows: ~5 ms against
             ~35 ms.
  cleanpaths(gen, data)    the paths of the cleanset row, by generation (one row)
  lex/<name>/<array>.npy   lexical segments (see lexical.py); <name> is `<hex time>-<pid>`
  write.lock               held by the one writer

Only those names are folio's (OWN_NAME, SEGMENT_NAME): `.folio` may be a link to a directory (a
cache kept elsewhere), so nothing else in it is ever written or removed, `--rebuild` included. No
name folio opens for writing or removes may be a symbolic link: verify() refuses one with the fix,
files are opened with O_NOFOLLOW, trees removed without following links. Readers open index.db
read-only (mode=ro; immutable when the directory cannot hold SQLite's -shm and no -wal waits).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sqlite3
import stat
import sys
import time
from collections import namedtuple
from collections.abc import Callable, Iterable
from pathlib import Path

from folio.config import INDEX_DIR
from folio.errors import FolioError

FORMAT = 1

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

SLOTMAP_CHUNK = 8192  # slots per slotmap blob (64 KiB): a commit rewrites the one or two it touches

# Every name folio makes directly inside .folio/, and inside .folio/lex/: nothing else is ever touched there.
OWN_NAME = re.compile(r"(index\.db(-wal|-shm|-journal)?|write\.lock|vectors(\.[0-9]+)?\.f32|lex)\Z")
SEGMENT_NAME = re.compile(r"[0-9a-f]+-[0-9]+(\.tmp)?\Z")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


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


class LockBusy(FolioError):
    pass


class Vanished(FolioError):
    """A file the reader's snapshot names is gone: a writer committed a newer generation (or
    merged segments) and removed it between the snapshot and the open. Read again."""


_NUMERIC_META = ("dim", "rows", "gen", "budget", "format")


def _number(value: str | None) -> int | None:
    return int(value) if value else None


def _number_or_none(value: str | None) -> int | None:
    """A number where a whole number is recorded, None where anything else is (never refused)."""
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


# stored: key -> the stored text, as read; dim: the vectors' dimension (None before a space is
# recorded); rows: rows of the matrix file; gen: the matrix file's generation (vectors.<gen>.f32);
# budget: the section budget (characters) the records were divided at; endpoint: without credentials
# (never printed, never sent); tokens: the server's token limit (None unless a whole number is
# recorded); text: the record-text version (reader.VERSION) the vectors were embedded from; refit:
# files divided under another token limit remain; unfinished: the files a full run walked, until its
# final commit clears it; slotmap: the slot map is kept.
_MetaFields = namedtuple("Meta", "stored format created dim rows gen budget endpoint endpoint_source model fingerprint "
                                 "roles tokens tokens_from text refit unfinished slotmap",
                         defaults=(None, None, None, None, 0, 0, None, None, None, None, None, None, None, None, None,
                                   False, None, False))


class Meta(_MetaFields):
    """An index's meta table, typed: read once (Store.reload_meta) and after each write, so no caller
    parses its text. The space's own fields keep their stored form for space.py to decode
    (space.fingerprint: the hex of little-endian float32; space.recorded_roles: JSON;
    space.Tokens.recorded: the token limit and where it was learned)."""

    __slots__ = ()

    def __new__(cls, stored: dict | None = None, *args, **kwargs):
        return super().__new__(cls, {} if stored is None else stored, *args, **kwargs)

    @classmethod
    def parse(cls, stored: dict) -> Meta:
        """From the meta table's rows (Store.reload_meta has refused a numeric key that is not a number)."""
        g = stored.get
        return cls(dict(stored), _number(g("format")), g("created"), _number(g("dim")), int(g("rows") or 0),
                   int(g("gen") or 0), _number(g("budget")), g("endpoint"), g("endpoint_source"), g("model"),
                   g("fingerprint"), g("roles"), _number_or_none(g("tokens")), g("tokens_from"), g("text"),
                   bool(g("refit")), _number_or_none(g("unfinished")), g("slotmap") == "1")

    def only(self, keys) -> Meta:
        """This meta with only `keys` (those recorded): what `folio doctor` shows and judges by."""
        return Meta.parse({k: self.stored[k] for k in keys if self.stored.get(k)})


META_KEYS = frozenset(Meta._fields) - {"stored"}


def corrupt(path: Path, detail: str) -> FolioError:
    return FolioError(f"the index at {path} is damaged ({detail}); run `folio index --rebuild` to build it anew")


def index_dir(root: Path) -> Path:
    return root / INDEX_DIR


def exists(root: Path) -> bool:
    return (index_dir(root) / "index.db").is_file()


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


# -- the names folio owns, and nothing else ----------------------------------------------------------

VECTORS_NAME = re.compile(r"vectors(\.[0-9]+)?\.f32\Z")


def linked(path: Path | str) -> FolioError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return FolioError(f"{path} is a symbolic link (to {target}), and folio reads and writes only files it made "
                      f"itself inside .folio/, never through a link: remove the link (`rm {path}`; what it points "
                      f"to is left alone) and run `folio index --rebuild`")


def _why(e: OSError) -> str:
    return "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e)).lower()


def not_writable(root: Path, why: str, *, creating: bool = False) -> FolioError:
    d = index_dir(root)
    if creating:
        return FolioError(f"the corpus at {root} is not writable ({why}), so folio cannot make its index {d} "
                          f"there: make {d} a link to a directory you can write (`ln -s DIR {d}`), or index a "
                          f"writable copy of the corpus")
    return FolioError(f"the index at {d} is not writable ({why}): queries still read it, but `folio index` cannot "
                      f"update it; run it as the index's owner, or index a writable copy of the corpus")


def _check_dir(root: Path) -> bool:
    """Whether `.folio` exists as a directory (itself or through a link: a cache kept elsewhere is fine);
    one sentence for anything else in its place (a file, a link to a file or to nothing)."""
    d = index_dir(root)
    try:
        st = os.stat(d)
    except FileNotFoundError:
        if not os.path.islink(d):
            return False
        raise FolioError(f"{d} is a symbolic link to {os.readlink(d)}, which does not exist: create that "
                         f"directory, or remove the link (`rm {d}`) and folio makes its own") from None
    except OSError as e:
        raise FolioError(f"{d} cannot be opened ({_why(e)}): folio keeps its index in a directory of that name; "
                         f"move it out of the way (`mv {d} {d}.old`) and run `folio index`") from None
    if not stat.S_ISDIR(st.st_mode):
        what = (f"a symbolic link to {os.readlink(d)}, which is not a directory" if os.path.islink(d)
                else "a file, not a directory")
        raise FolioError(f"{d} is {what}: folio keeps its index in a directory of that name; move it out of the "
                         f"way (`mv {d} {d}.old`) and run `folio index`")
    return True


def verify(root: Path) -> bool:
    """Whether `.folio/` exists, refusing one folio cannot vouch for: see _check_dir, and a symbolic
    link at any of folio's own names inside it or inside lex/ (a clone can carry one: git stores
    links). Two directory listings, no stat per file."""
    if not _check_dir(root):
        return False
    d = index_dir(root)
    lex = False
    with os.scandir(d) as it:
        for e in it:
            if OWN_NAME.match(e.name):
                if e.is_symlink():
                    raise linked(e.path)
                lex = lex or (e.name == "lex" and e.is_dir(follow_symlinks=False))
    if lex:
        with os.scandir(d / "lex") as it:
            for e in it:
                if SEGMENT_NAME.match(e.name) and e.is_symlink():
                    raise linked(e.path)
    return True


def _own(path, flags):
    """open()'s opener for folio's own files: never through a symbolic link."""
    try:
        return os.open(path, flags | _NOFOLLOW, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise linked(path) from None
        raise


def _remove_own(path: Path | str) -> None:
    """Remove one of folio's names: a file or a link goes (never what a link points to), a directory
    goes with what is in it, links inside removed as links."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        import shutil  # here: with zlib, bz2 and lzma it costs ~5 ms a no-op run never needs

        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _own_dir(path: Path) -> None:
    """Make one of folio's directories (lex/) unless it is there; refuse a link or a file in its place."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise linked(path)
    if not stat.S_ISDIR(st.st_mode):
        raise corrupt(path.parent, f"{path.name} is not a directory")


def _unwritable(d: Path) -> str | None:
    for p in (d, d / "index.db"):
        if p.exists() and not p.is_symlink() and not os.access(p, os.W_OK):
            try:
                ro = os.statvfs(p).f_flag & getattr(os, "ST_RDONLY", 1)
            except OSError:
                ro = False
            return "read-only file system" if ro else "permission denied"
    return None


def _make_index_dir(root: Path) -> None:
    """Create `.folio/` (a writer's first run); an unwritable corpus is one sentence."""
    try:
        index_dir(root).mkdir(parents=True)
    except FileExistsError:
        _check_dir(root)
    except OSError as e:
        raise not_writable(root, _why(e), creating=True) from None


def _read_only_conn(db: Path) -> sqlite3.Connection:
    """index.db opened read-only. SQLite reads a WAL database through its -shm: where the directory
    cannot hold one (a read-only mount, another user's directory) and no -wal holds commits, the
    file is read as immutable; a -wal it cannot read is one sentence."""
    uri = db.absolute().as_uri()
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # opens the file and its WAL index now
        return conn
    except sqlite3.OperationalError as e:
        conn.close()
        name = getattr(e, "sqlite_errorname", "")
        if not (name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")) or "readonly" in str(e)
                or "unable to open" in str(e)):
            raise
        wal = db.with_name(db.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise FolioError(f"the index at {db.parent} is read-only here and holds commits still in "
                             f"{wal.name}, which SQLite reads only where it can write {db.name}-shm beside it: "
                             f"run `folio index` there once with write access (it folds them in)") from None
    conn = sqlite3.connect(uri + "?immutable=1", uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA schema_version").fetchone()
    return conn


class Store:
    """An open `.folio/`. Open with Store.open(root) (read) or Store.open(root, write=True)."""

    def __init__(self, root: Path, conn: sqlite3.Connection, write: bool):
        self.root = root
        self.dir = index_dir(root)
        self.conn = conn
        self.write = write
        self.meta = Meta()  # typed; its stored text is self._meta (written by _put_meta only)
        self._meta: dict[str, str | None] = {}
        self._lock = None
        self._matrix = None
        self._matrix_key = None
        self._live_cache: dict = {}
        self._lex_cache: dict[str, dict] = {}  # segment name -> its arrays (a name is never reused)
        self._slots = None  # the writer's copy of the slot map (numpy int64), loaded at its first commit
        self._clean = None  # clean_stamps' whole set as this writer found it (see save_clean)
        self._committed = False  # whether this writer has committed anything (live_count)
        self._live = None  # the records count the cleanset row keeps (live_count)
        self.reload_meta()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, root: Path, *, write: bool = False) -> Store:
        d = index_dir(root)
        db = d / "index.db"
        there = verify(root)  # no link at any of folio's names: SQLite would write its -wal through one
        if not write and not (there and db.is_file()):
            raise FolioError(f"no index at {root}: run `folio index` there first")
        if write and not there:
            _make_index_dir(root)
        try:
            if write:
                conn = sqlite3.connect(db, timeout=30.0, isolation_level=None, check_same_thread=False)
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
            from folio.errors import disk_full, full_sentence

            if disk_full(e):  # no room to create it (or its WAL): not damage
                raise FolioError(full_sentence(e, d)) from None
            name = getattr(e, "sqlite_errorname", "")
            if write and (name.startswith("SQLITE_READONLY") or "readonly database" in str(e)
                          or (name.startswith("SQLITE_CANTOPEN") and not os.access(d, os.W_OK))):
                raise not_writable(root, _unwritable(d) or "permission denied") from None
            raise corrupt(db, str(e)) from None
        fmt = store.meta.format
        if fmt is None and not store._holds_records():
            store.close()
            raise FolioError(f"no index at {root} yet (the first `folio index` there did not finish): "
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
        return _unwritable(self.dir)

    def _holds_records(self) -> bool:
        try:
            return self.conn.execute("SELECT 1 FROM records LIMIT 1").fetchone() is not None
        except sqlite3.DatabaseError:
            return False

    def close(self) -> None:
        self._matrix = None
        self.conn.close()
        self.unlock()

    def reload_meta(self) -> None:
        try:
            stored = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError:
            stored = {}
        except sqlite3.DatabaseError as e:
            raise corrupt(self.dir / "index.db", str(e)) from None
        endpoint = stored.get("endpoint")
        if endpoint and "@" in endpoint:  # recorded with credentials (an older folio, or a planted .folio/)
            from folio.config import strip_userinfo

            stored["endpoint"] = strip_userinfo(endpoint, "")  # never printed, never sent
        for key in _NUMERIC_META:  # read as numbers: a hand edit must not become a traceback
            value = stored.get(key)
            if value is not None and not (value.isascii() and value.isdigit()):
                raise corrupt(self.dir / "index.db", f"meta `{key}` is {value!r}, not a whole number")
        self._meta = stored
        self.meta = Meta.parse(stored)

    def forget_credentials(self) -> None:
        """A writer's part of the rule reload_meta keeps for readers: an endpoint recorded with
        `user:password@` is rewritten without them, and the old row's bytes are zeroed."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'endpoint'").fetchone()
        if row and row[0] and row[0] != self.meta.endpoint:
            self.conn.execute("PRAGMA secure_delete = ON")
            self.set_meta({"endpoint": self.meta.endpoint})
            self.conn.execute("PRAGMA secure_delete = OFF")

    def set_meta(self, values: dict[str, object]) -> None:
        with self.transaction():
            self._put_meta(values)

    def _put_meta(self, values: dict[str, object]) -> None:
        """Write meta keys (each a Meta field; None unsets one) and re-read them typed."""
        unknown = set(values) - META_KEYS
        if unknown:
            raise FolioError(f"internal: no meta key {sorted(unknown)}")
        self.conn.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [(k, None if v is None else str(v)) for k, v in values.items()],
        )
        for k, v in values.items():
            self._meta[k] = None if v is None else str(v)
        self.meta = Meta.parse(self._meta)

    def reread_all(self) -> None:
        """Mark every file to be read again by the next pass (a new record text, budget or token
        limit): its stamp loses its hash, and the racy-stamp rule then reads it. Its records keep
        their vectors until the pass replaces them."""
        with self.transaction() as c:
            c.execute("UPDATE files SET sha256 = '', stamped_ns = 0")
        self._clean = None

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

    # -- the lock ----------------------------------------------------------------------------

    def hold(self, lock) -> None:
        self._lock = lock

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # -- reading -----------------------------------------------------------------------------

    @property
    def dim(self) -> int | None:
        return self.meta.dim

    @property
    def rows(self) -> int:
        return self.meta.rows

    def matrix_path(self, gen: int | None = None) -> Path:
        gen = self.meta.gen if gen is None else gen
        return self.dir / ("vectors.f32" if gen == 0 else f"vectors.{gen}.f32")

    def _check_matrix_file(self, path: Path, rows: int, dim: int) -> int:
        """The matrix file exists and holds every row the records name, or one sentence with the fix.
        Returns the file's inode."""
        try:
            st = path.stat()
        except FileNotFoundError:
            raise Vanished(str(corrupt(self.dir, f"{path.name} is missing"))) from None
        if st.st_size < rows * dim * 4:
            raise corrupt(self.dir, f"{path.name} holds {st.st_size // (dim * 4)} rows, the records name {rows}")
        return st.st_ino

    def matrix(self):
        """The committed matrix, memory-mapped read-only: shape (rows, dim). None without vectors."""
        import numpy as np

        dim, rows = self.dim, self.rows
        if not dim or not rows:
            return None
        path = self.matrix_path()
        # The inode is part of the key: a store kept open across queries (`folio mcp`) never reads
        # a mapping of a file another process removed and wrote anew under the same name.
        key = (str(path), rows, dim, self._check_matrix_file(path, rows, dim))
        if self._matrix is not None and self._matrix_key == key:
            return self._matrix
        self._matrix = np.memmap(path, dtype="<f4", mode="r", shape=(rows, dim))
        self._matrix_key = key
        return self._matrix

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
            hit = self._live_cache.get(vectors_only)
            if version is not None and hit is not None and hit[0] == version:
                return hit[1]
            owners = self.slot_owners()
            if owners is not None:
                held = owners >= 0
                if vectors_only:
                    held &= (owners & 1).astype(bool)
                slots = np.flatnonzero(held)
                out = (slots, owners[slots] >> 1)
            else:
                sql = "SELECT slot, file_id FROM records" + (" WHERE vec = 1" if vectors_only else "")
                arr = np.fromiter(itertools.chain.from_iterable(self.conn.execute(sql)), dtype=np.int64).reshape(-1, 2)
                out = (arr[:, 0], arr[:, 1])
        except sqlite3.DatabaseError as e:
            raise corrupt(self.dir / "index.db", str(e)) from None
        for a in out:
            a.flags.writeable = False
        if version is not None:
            self._live_cache[vectors_only] = (version, out)
        return out

    def slot_owners(self, n_records: int | None = None):
        """The slot map (int64 per slot: file_id * 2 + vec, -1 = no record), or None when this index
        keeps none or it disagrees with the records (then callers read the records themselves).
        `n_records`: the records count, where the caller knows it (live_count)."""
        import numpy as np

        if not self.meta.slotmap:
            return None
        try:
            blobs = self.conn.execute("SELECT chunk, data FROM slotmap ORDER BY chunk").fetchall()
            if n_records is None:
                n_records = self.conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise corrupt(self.dir / "index.db", str(e)) from None
        full = SLOTMAP_CHUNK * 8
        if any(c != i or (i < len(blobs) - 1 and len(d) != full) or len(d) % 8 for i, (c, d) in enumerate(blobs)):
            return None
        owners = np.frombuffer(b"".join(d for _, d in blobs), dtype="<i8")
        if int(np.count_nonzero(owners >= 0)) != n_records:
            return None
        return owners

    def records(self, slots: Iterable[int]) -> dict[int, Row]:
        slots = list(slots)
        out: dict[int, Row] = {}
        for i in range(0, len(slots), 900):
            chunk = slots[i:i + 900]
            q = ",".join("?" * len(chunk))
            for r in self.conn.execute(f'SELECT slot, file_id, start, "end", level, heading, trail, truncated, '
                                       f"text_hash, vec FROM records WHERE slot IN ({q})", chunk):
                out[r[0]] = _row(r)
        return out

    def file_rows(self, file_id: int) -> list[Row]:
        return [_row(r) for r in self.conn.execute(
            'SELECT slot, file_id, start, "end", level, heading, trail, truncated, text_hash, vec '
            'FROM records WHERE file_id = ? ORDER BY start, slot', (file_id,))]

    def file_order(self, slot: int) -> list[tuple[int, int, int]]:
        """(slot, start, end) of every record in the file holding `slot`, in line order (empty if none)."""
        return self.conn.execute(
            'SELECT slot, start, "end" FROM records WHERE file_id = (SELECT file_id FROM records WHERE slot = ?) '
            "ORDER BY start, slot", (slot,)).fetchall()

    def files_under(self, prefix: str) -> int:
        """How many indexed files lie under the root-relative directory `prefix`."""
        head = prefix.rstrip("/") + "/"
        return self.conn.execute("SELECT COUNT(*) FROM files WHERE substr(path, 1, ?) = ?",
                                 (len(head), head)).fetchone()[0]

    def slots_of_files(self, file_ids: Iterable[int]):
        """Every record slot of the given files, as an int array."""
        import numpy as np

        ids = list(file_ids)
        out: list[int] = []
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            out += [r[0] for r in self.conn.execute(
                f"SELECT slot FROM records WHERE file_id IN ({','.join('?' * len(chunk))})", chunk)]
        return np.array(out, dtype=np.int64)

    def files(self, ids: Iterable[int] | None = None) -> dict[int, dict]:
        cols = "id, path, size, mtime_ns, sha256, stamped_ns, frontmatter, title"
        if ids is None:
            rows = self.conn.execute(f"SELECT {cols} FROM files").fetchall()
        else:
            ids = list(ids)
            rows = []
            for i in range(0, len(ids), 900):
                chunk = ids[i:i + 900]
                rows += self.conn.execute(f"SELECT {cols} FROM files WHERE id IN ({','.join('?' * len(chunk))})",
                                          chunk).fetchall()
        return {r[0]: {"id": r[0], "path": r[1], "size": r[2], "mtime_ns": r[3], "sha256": r[4],
                       "stamped_ns": r[5], "frontmatter": json.loads(r[6] or "{}"), "title": r[7] or ""}
                for r in rows}

    def _unchanged(self, name: str, read: Callable):
        """read(), kept by a reader while no other connection has committed (SQLite's data_version):
        a store kept open across queries reads the frontmatter once per index change."""
        if self.write:
            return read()
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        hit = self._live_cache.get(name)
        if hit is not None and hit[0] == version:
            return hit[1]
        out = read()
        self._live_cache[name] = (version, out)
        return out

    def frontmatter_table(self) -> tuple[list[int], list[str]]:
        """(file ids, raw frontmatter JSON texts) for every file — filters decode what they need."""
        def read():
            rows = self.conn.execute("SELECT id, frontmatter FROM files").fetchall()
            return [r[0] for r in rows], [r[1] or "{}" for r in rows]

        return self._unchanged("frontmatter", read)

    def paths(self) -> dict[int, str]:
        """{file id: root-relative path} for every file (the @path identity reads only this)."""
        return self._unchanged("paths", lambda: dict(self.conn.execute("SELECT id, path FROM files")))

    def stamps(self) -> dict[str, Stamp]:
        return {r[1]: Stamp(*r) for r in self.conn.execute(
            "SELECT id, path, size, mtime_ns, sha256, stamped_ns FROM files")}

    def clean_stamps(self, racy_ns: int, paths: list[str] | None = None,
                     pending: Iterable[int] = ()) -> tuple[Clean, int]:
        """The stat prefilter's side of the index: the (path, size, mtime_ns) of every file (of `paths`
        only, when given) stamped at least racy_ns after its mtime and not among the `pending` ids —
        a listed file with the same three is unchanged — and how many of those files the index holds
        at all. For the whole index, read from the cleanset row when one is kept (see the module
        header), else as plain tuples built by sqlite3 itself (a third of the cost of a row object)."""
        sql = "SELECT path, size, mtime_ns FROM files WHERE stamped_ns - mtime_ns >= ?"
        if paths is None:
            got = self._read_clean(racy_ns)
            if got is None:
                clean = Clean(set(self.conn.execute(sql, (racy_ns,))))
                held = self.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            else:
                clean, held = got
            self._clean = _Clean(racy_ns, clean, got is not None)
            if not pending:
                return clean, held
            clean = set(clean.rows)  # the whole set stays as read (save_clean)
        else:
            clean, held = set(), 0
            for i in range(0, len(paths), 900):
                chunk = paths[i:i + 900]
                marks = ",".join("?" * len(chunk))
                clean.update(self.conn.execute(f"{sql} AND path IN ({marks})", (racy_ns, *chunk)))
                held += self.conn.execute(f"SELECT COUNT(*) FROM files WHERE path IN ({marks})", chunk).fetchone()[0]
        ids = list(pending)
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            clean.difference_update(self.conn.execute(
                f"SELECT path, size, mtime_ns FROM files WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return Clean(clean), held

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

    def live_count(self) -> int:
        """record_count, as the cleanset row this writer read keeps it while it has committed nothing."""
        if self._live is not None and not self._committed and self._clean is not None and self._clean.kept:
            return self._live
        return self.record_count()

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
        sql = "SELECT path, size, mtime_ns FROM files WHERE stamped_ns - mtime_ns >= ?"
        new = []
        ids = sorted(mine.touched)
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            new += c.execute(f"{sql} AND id IN ({','.join('?' * len(chunk))})", (racy, *chunk))
        # The same paths with other stats (an edit, a touch): the kept list of paths stays.
        columns = mine.clean.restated(mine.old, new)
        if columns is None:
            rows = mine.clean.rows  # this writer's own set: changed in place
            rows.difference_update(mine.old)
            rows.update(new)
        with self.transaction():
            held, want = c.execute("SELECT COUNT(*), COALESCE(SUM(stamped_ns - mtime_ns >= ?), 0) FROM files",
                                   (racy,)).fetchone()
            if columns is not None and want != len(columns[0]) or columns is None and want != len(rows):
                columns, rows = None, list(c.execute(sql, (racy,)))  # a change this writer did not see
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
        for i in range(0, len(paths), 900):
            chunk = paths[i:i + 900]
            for r in self.conn.execute("SELECT id, path, size, mtime_ns, sha256, stamped_ns FROM files WHERE path IN "
                                       f"({','.join('?' * len(chunk))})", chunk):
                out[r[1]] = Stamp(*r)
        return out

    def stamp(self, path: str) -> Stamp | None:
        r = self.conn.execute("SELECT id, path, size, mtime_ns, sha256, stamped_ns FROM files WHERE path = ?",
                              (path,)).fetchone()
        return Stamp(*r) if r else None

    def has_vectors(self) -> bool:
        """True when at least one record has a valid vector."""
        if not self.dim:
            return False
        return self.conn.execute("SELECT 1 FROM records WHERE vec = 1 LIMIT 1").fetchone() is not None

    def slots_with_vectors(self, hashes: Iterable[str]) -> dict[str, int]:
        """text hash -> a slot whose record has that text and a valid vector, for those that have one."""
        wanted = list(set(hashes))
        out: dict[str, int] = {}
        for i in range(0, len(wanted), 900):
            chunk = wanted[i:i + 900]
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

    def counts(self) -> dict[str, int]:
        c = self.conn.execute("SELECT COUNT(*), COALESCE(SUM(vec), 0), COALESCE(SUM(truncated), 0) FROM records"
                              ).fetchone()
        files = self.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        return {"files": files, "sections": c[0], "embedded": c[1], "truncated": c[2],
                "dead_rows": max(self.rows - c[0], 0) if self.dim else 0}

    def truncated_rows(self) -> list[tuple[str, Row]]:
        out = []
        for r in self.conn.execute(
                'SELECT r.slot, r.file_id, r.start, r."end", r.level, r.heading, r.trail, r.truncated, r.text_hash, '
                "r.vec, f.path FROM records r JOIN files f ON f.id = r.file_id WHERE r.truncated = 1 "
                "ORDER BY f.path, r.start"):
            out.append((r[10], _row(r[:10])))
        return out

    def lex_segments(self) -> list[dict]:
        import numpy as np

        segs = []
        names = [r[0] for r in self.conn.execute("SELECT name FROM lexseg ORDER BY seq")]
        for gone in set(self._lex_cache) - set(names):
            del self._lex_cache[gone]
        for name in names:
            if name in self._lex_cache:  # a segment's files never change under its name
                segs.append(self._lex_cache[name])
                continue
            d = self._segment_dir(name)
            seg = {}
            f = d
            try:
                for f in _segment_files(d):
                    if f.suffix == ".npy":
                        try:
                            seg[f.stem] = np.load(f, mmap_mode="r")
                        except ValueError:
                            seg[f.stem] = np.load(f)  # e.g. an empty array cannot be mapped
            except FileNotFoundError:
                raise Vanished(str(corrupt(self.dir, f"lexical segment {name} is missing"))) from None
            except (ValueError, OSError, EOFError):  # truncated, overwritten, not an array
                raise corrupt(self.dir, f"lex/{name}/{f.name} is not a whole numpy array") from None
            if not _segment_whole(seg):  # arrays missing: being removed by a writer's merge, or damage
                raise Vanished(str(corrupt(self.dir, f"lexical segment {name} is incomplete")))
            if not self.write:
                self._lex_cache[name] = seg
            segs.append(seg)
        return segs

    def check(self) -> None:
        """Cheap checks that the files the records name are there and big enough (no full scan)."""
        dim, rows = self.dim, self.rows
        if dim and rows:
            self._check_matrix_file(self.matrix_path(), rows, dim)
        for (name,) in self.conn.execute("SELECT name FROM lexseg ORDER BY seq"):
            self._check_segment(name)

    def _check_segment(self, name: str) -> None:
        """What lex_segments would refuse (missing, truncated, overwritten or incomplete arrays),
        from the .npy headers and file sizes alone: a no-op `folio index` never imports numpy."""
        d = self._segment_dir(name)
        heads: dict[str, tuple] = {}
        f = d
        try:
            for f in _segment_files(d):
                if f.suffix == ".npy":
                    heads[f.stem] = _npy_head(f)
        except FileNotFoundError:
            raise Vanished(str(corrupt(self.dir, f"lexical segment {name} is missing"))) from None
        except (ValueError, OSError, EOFError, SyntaxError, MemoryError, RecursionError):
            raise corrupt(self.dir, f"lex/{name}/{f.name} is not a whole numpy array") from None
        if not all(k in heads for k in _SEGMENT_ARRAYS):
            raise Vanished(str(corrupt(self.dir, f"lexical segment {name} is incomplete")))
        n = {k: (heads[k][0] or (1,))[0] for k in _SEGMENT_ARRAYS}
        whole = (n["doc_len"] == n["doc_slots"] and n["offsets"] == n["terms"] + 1 and n["post_tf"] == n["post_doc"]
                 and heads["offsets"][1] == "<i8" and n["offsets"] > 0)
        if whole:
            with open(d / "offsets.npy", "rb") as fh:
                fh.seek(heads["offsets"][2] + 8 * (n["offsets"] - 1))
                whole = int.from_bytes(fh.read(8), "little", signed=True) == n["post_doc"]
        if not whole:
            raise Vanished(str(corrupt(self.dir, f"lexical segment {name} is incomplete")))

    def _segment_dir(self, name: str) -> Path:
        """lex/<name> for a segment the records name; index.db is data too (it may come with a clone),
        so a name folio does not make (`../../elsewhere`) is refused, never read or removed."""
        if not SEGMENT_NAME.match(name) or name.endswith(".tmp"):
            raise corrupt(self.dir, f"it names a lexical segment {name!r}, which is not a name folio makes")
        return self.dir / "lex" / name

    def size_on_disk(self) -> int:
        """Bytes in folio's own names (a `.folio` linked to a cache may hold other things)."""
        total = 0
        with os.scandir(self.dir) as it:
            own = [e.path for e in it if OWN_NAME.match(e.name)]
        for top in own:
            for dirpath, _dirs, files in os.walk(top):
                for f in files:
                    with contextlib.suppress(OSError):
                        total += os.path.getsize(os.path.join(dirpath, f))
            if not os.path.isdir(top):
                with contextlib.suppress(OSError):
                    total += os.path.getsize(top)
        return total

    # -- writing -----------------------------------------------------------------------------

    def recover(self) -> None:
        """Drop what a killed writer left behind past the committed state (writer only, under the lock)."""
        dim, rows = self.dim, self.rows
        current = self.matrix_path()
        with os.scandir(self.dir) as it:
            for e in it:
                if VECTORS_NAME.match(e.name) and e.name != current.name:
                    _remove_own(e.path)
        if dim and current.exists() and current.stat().st_size > rows * dim * 4:
            with open(current, "r+b", opener=_own) as fh:
                fh.truncate(rows * dim * 4)
        names = {r[0] for r in self.conn.execute("SELECT name FROM lexseg")}
        lex = self.dir / "lex"
        if lex.is_dir() and not lex.is_symlink():
            with os.scandir(lex) as it:
                for e in it:
                    if SEGMENT_NAME.match(e.name) and e.name not in names:
                        _remove_own(e.path)

    def new_space(self, meta: dict[str, object], dim: int) -> None:
        """Switch to a new vector space: every record's vector becomes invalid, a new matrix generation."""
        gen = self.meta.gen + 1
        rows = self.next_slot()
        path = self.matrix_path(gen)
        with open(path, "wb", opener=_own) as fh:
            fh.truncate(rows * dim * 4)
            fh.flush()
            os.fsync(fh.fileno())
        old = self.matrix_path()
        with self.transaction(durable=True) as c:  # the old matrix is unlinked below
            c.execute("UPDATE records SET vec = 0")
            owners = self._rebuild_slot_map(c)
            self._put_meta({**meta, "dim": dim, "gen": gen, "rows": rows})
        self._slots = owners
        if old != path:
            _remove_own(old)
        self._matrix = None

    def next_slot(self) -> int:
        r = self.conn.execute("SELECT MAX(slot) FROM records").fetchone()[0]
        return max(self.rows, (r + 1) if r is not None else 0)

    def read_vectors(self, slots: list[int]):
        m = self.matrix()
        return None if m is None else m[slots].copy()

    def commit(self, batch: Batch) -> None:
        """Write one batch: rows, then lexical segment, then the records naming them, atomically."""
        import numpy as np

        dim = self.dim
        rows_after = max(self.rows, batch.high_water)
        if batch.vectors:
            if not dim:
                raise FolioError("internal: vectors written before the space was set")
            path = self.matrix_path()
            mode = "r+b" if path.exists() else "w+b"
            with open(path, mode, opener=_own) as fh:
                if fh.seek(0, 2) < rows_after * dim * 4:
                    fh.truncate(rows_after * dim * 4)
                for slot, vec in sorted(batch.vectors.items()):
                    fh.seek(slot * dim * 4)
                    fh.write(np.ascontiguousarray(vec, dtype="<f4").tobytes())
                fh.flush()
                os.fsync(fh.fileno())
        elif dim and rows_after > self.rows:
            path = self.matrix_path()
            with open(path, "r+b" if path.exists() else "w+b", opener=_own) as fh:
                if fh.seek(0, 2) < rows_after * dim * 4:
                    fh.truncate(rows_after * dim * 4)
        seg_name = None
        if batch.segment is not None:
            seg_name = self._write_segment(batch.segment)
        owners, self._slots = self._slots, None  # a failed commit leaves no uncommitted copy behind
        live = self.live_count() if owners is None else None  # before this commit changes any record
        self._committed = True
        with self.transaction() as c:
            touched, owners = self._slots_before(c, batch, owners, live)
            changed = self._clean_before(c, batch)
            if batch.delete_slots:
                c.executemany("DELETE FROM records WHERE slot = ?", [(s,) for s in batch.delete_slots])
            if batch.delete_files:
                c.executemany("DELETE FROM records WHERE file_id = ?", [(f,) for f in batch.delete_files])
                c.executemany("DELETE FROM files WHERE id = ?", [(f,) for f in batch.delete_files])
            for f in batch.files:
                if f.id is None:
                    cur = c.execute(
                        "INSERT INTO files(path, size, mtime_ns, sha256, stamped_ns, frontmatter, title) "
                        "VALUES (?,?,?,?,?,?,?)",
                        (f.path, f.size, f.mtime_ns, f.sha256, f.stamped_ns,
                         json.dumps(f.frontmatter, ensure_ascii=False), f.title))
                    f.id = cur.lastrowid
                    changed.append(f.id)
                else:
                    c.execute("UPDATE files SET path=?, size=?, mtime_ns=?, sha256=?, stamped_ns=?, frontmatter=?, "
                              "title=? WHERE id=?",
                              (f.path, f.size, f.mtime_ns, f.sha256, f.stamped_ns,
                               json.dumps(f.frontmatter, ensure_ascii=False), f.title, f.id))
            if batch.restamps:
                c.executemany("UPDATE files SET size=?, mtime_ns=?, stamped_ns=? WHERE id=?", batch.restamps)
            if batch.records:
                c.executemany(
                    'INSERT OR REPLACE INTO records(slot, file_id, start, "end", level, heading, trail, truncated, '
                    "text_hash, vec) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    [(r.slot, r.file.id, r.start, r.end, r.level, r.heading,
                      json.dumps(list(r.trail), ensure_ascii=False), int(r.truncated), r.text_hash, int(r.vec))
                     for r in batch.records])
            if seg_name:
                seq = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM lexseg").fetchone()[0]
                c.execute("INSERT INTO lexseg(name, seq) VALUES (?, ?)", (seg_name, seq))
            owners = self._slots_after(c, touched, owners)
            if self._clean is not None:
                self._clean.touched.update(changed)
            meta = dict(batch.meta)
            if dim:
                meta["rows"] = rows_after
            if meta:
                self._put_meta(meta)
        self._slots = owners
        self._matrix = None


    def _clean_before(self, c, batch: Batch) -> list[int]:
        """Inside commit's transaction, before it changes file rows: the ids it will change, their
        rows' (path, size, mtime_ns) as they were noted for save_clean (inserted ids are added)."""
        ids = list(batch.delete_files) + [f.id for f in batch.files if f.id is not None] + [r[3] for r in batch.restamps]
        if self._clean is not None:
            for i in range(0, len(ids), 900):
                chunk = ids[i:i + 900]
                self._clean.old.update(c.execute(
                    f"SELECT path, size, mtime_ns FROM files WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return ids

    # -- the slot map (see the module header) ---------------------------------------------------

    def _slots_before(self, c, batch: Batch, owners, live: int | None = None):
        """Inside commit's transaction, before it changes records: (slots the batch touches, the
        writer's slot map), the map read once per writer; (None, None) when there is no usable map."""
        if owners is None:
            # the map as the last full run left it (the cleanset row it wrote is still there, so no
            # file, and so no record, changed since): only the chunks this commit touches are read
            owners = _Partial.open(c, live) if live is not None and self._clean is not None and self._clean.kept \
                else None
        if owners is None:
            owners = self.slot_owners(live)
            if owners is None:
                return None, None
            owners = owners.copy()
        touched = list(batch.delete_slots) + [r.slot for r in batch.records]
        for i in range(0, len(batch.delete_files), 900):
            chunk = batch.delete_files[i:i + 900]
            touched += [r[0] for r in c.execute(
                f"SELECT slot FROM records WHERE file_id IN ({','.join('?' * len(chunk))})", chunk)]
        return touched, owners

    def _slots_after(self, c, touched: list[int] | None, owners):
        """Inside commit's transaction, after it changed records: the touched slots read back and
        written; returns the map (derived from every record when there was none)."""
        import numpy as np

        if touched is None:
            return self._rebuild_slot_map(c)
        if not touched:
            return owners
        if isinstance(owners, _Partial):
            return owners.update(c, touched)
        old_len = len(owners)
        slots = np.asarray(touched, dtype=np.int64)
        top = int(slots.max())
        if top >= old_len:
            owners = np.concatenate([owners, np.full(top + 1 - old_len, -1, np.int64)])
        owners[slots] = -1
        for slot, owner in _owners_of(c, slots.tolist()):
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

        arr = np.array(c.execute("SELECT slot, file_id, vec FROM records").fetchall(), dtype=np.int64).reshape(-1, 3)
        owners = np.full(int(arr[:, 0].max()) + 1 if len(arr) else 0, -1, dtype=np.int64)
        owners[arr[:, 0]] = arr[:, 1] * 2 + (arr[:, 2] != 0)
        _write_slot_chunks(c, owners, range(-(-len(owners) // SLOTMAP_CHUNK)))
        self._put_meta({"slotmap": 1})
        return owners

    def _write_segment(self, seg: dict) -> str:
        import numpy as np

        lex = self.dir / "lex"
        _own_dir(lex)
        name = f"{time.time_ns():x}-{os.getpid()}"
        tmp = lex / (name + ".tmp")
        tmp.mkdir()
        for key, arr in seg.items():
            with open(tmp / f"{key}.npy", "xb", opener=_own) as fh:
                np.save(fh, np.ascontiguousarray(arr))
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, lex / name)
        return name

    def replace_segments(self, seg: dict | None, old_names: list[str] | None = None) -> None:
        """Swap the listed segments (default: all) for one merged segment, in one commit."""
        names = old_names if old_names is not None else [r[0] for r in self.conn.execute("SELECT name FROM lexseg")]
        new = self._write_segment(seg) if seg is not None else None
        with self.transaction(durable=True) as c:  # the replaced segments are removed below
            q = ",".join("?" * len(names))
            seq = c.execute(f"SELECT MAX(seq) FROM lexseg WHERE name IN ({q})", names).fetchone()[0] or 0
            c.executemany("DELETE FROM lexseg WHERE name = ?", [(n,) for n in names])
            if new:  # takes the place of the newest segment it replaces: newer segments still win
                c.execute("INSERT INTO lexseg(name, seq) VALUES (?, ?)", (new, seq))
        for n in names:
            _remove_own(self._segment_dir(n))

    def segment_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM lexseg ORDER BY seq")]

    def compact(self, merge_lexical: Callable) -> int:
        """Renumber live records to 0..n-1 in a new matrix generation; returns rows reclaimed."""
        import numpy as np

        slots = np.array([r[0] for r in self.conn.execute("SELECT slot FROM records ORDER BY slot")], dtype=np.int64)
        old_rows = self.next_slot()
        dim = self.dim
        gen = self.meta.gen + 1
        new_path = self.matrix_path(gen)
        for n in self.segment_names():
            self._segment_dir(n)  # refused before anything is written, not after the commit
        if dim:
            src = self.matrix()
            with open(new_path, "wb", opener=_own) as fh:
                for i in range(0, len(slots), 8192):
                    part = slots[i:i + 8192]
                    valid = part[part < (src.shape[0] if src is not None else 0)]
                    block = np.zeros((len(part), dim), dtype="<f4")
                    if len(valid):
                        block[: len(valid)] = src[valid]
                    fh.write(block.tobytes())
                fh.flush()
                os.fsync(fh.fileno())
        renumber = np.full(old_rows, -1, dtype=np.int64)
        renumber[slots] = np.arange(len(slots))
        live = np.zeros(old_rows, dtype=bool)
        live[slots] = True
        names = self.segment_names()
        merged = merge_lexical(self.lex_segments(), live, renumber) if names else None
        new_seg = self._write_segment(merged) if merged is not None else None
        old_path = self.matrix_path()
        with self.transaction(durable=True) as c:  # the old matrix and segments are removed below
            c.execute("CREATE TEMP TABLE IF NOT EXISTS renum(old INTEGER PRIMARY KEY, new INTEGER)")
            c.execute("DELETE FROM renum")
            c.executemany("INSERT INTO renum(old, new) VALUES (?, ?)",
                          [(int(o), int(n)) for n, o in enumerate(slots)])
            c.execute("UPDATE records SET slot = -1 - (SELECT new FROM renum WHERE old = records.slot)")
            c.execute("UPDATE records SET slot = -1 - slot")
            owners = self._rebuild_slot_map(c)
            c.executemany("DELETE FROM lexseg WHERE name = ?", [(n,) for n in names])
            if new_seg:
                c.execute("INSERT INTO lexseg(name, seq) VALUES (?, 0)", (new_seg,))
            meta = {"rows": len(slots)}
            if dim:
                meta["gen"] = gen
            self._put_meta(meta)
        self._slots = owners
        if dim and old_path != new_path:
            _remove_own(old_path)
        for n in names:
            _remove_own(self._segment_dir(n))
        self._matrix = None
        return old_rows - len(slots)


def _segment_files(d: Path) -> list[Path]:
    """The files of one lexical segment, refusing a link among them (folio never made one)."""
    if os.path.islink(d):
        raise linked(d)
    out = []
    with os.scandir(d) as it:
        for e in it:
            if e.is_symlink():
                raise linked(e.path)
            out.append(Path(e.path))
    return out


class _Partial:
    """A writer's slot map read in part (Store._slots_before): how many slots it covers, the chunks
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

    def update(self, c, touched: list[int]) -> _Partial:
        import numpy as np

        slots = sorted(set(touched))  # (np.unique would import numpy.ma: ~35 ms)
        length = max(self.length, slots[-1] + 1)
        ks = {sl // SLOTMAP_CHUNK for sl in slots}
        if length > self.length:  # the chunks the map grows through, the old last one included
            ks.update(range(max(self.length - 1, 0) // SLOTMAP_CHUNK, (length - 1) // SLOTMAP_CHUNK + 1))
        want = sorted(k for k in ks if k not in self.chunks and k * SLOTMAP_CHUNK < self.length)
        for i in range(0, len(want), 900):
            chunk = want[i:i + 900]
            for k, data in c.execute(f"SELECT chunk, data FROM slotmap WHERE chunk IN ({','.join('?' * len(chunk))})",
                                     chunk):
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
        for slot, owner in _owners_of(c, slots):
            self.chunks[slot // SLOTMAP_CHUNK][slot % SLOTMAP_CHUNK] = owner
        self.count += sum(1 for k, i in at if self.chunks[k][i] >= 0) - before
        self.length = length
        c.executemany("INSERT OR REPLACE INTO slotmap(chunk, data) VALUES (?, ?)",
                      [(k, self.chunks[k].astype("<i8").tobytes()) for k in sorted(ks)])
        return self


def _owners_of(c, slots: list[int]):
    """(slot, its slot-map value) for each of `slots` a record holds, read from the records."""
    for i in range(0, len(slots), 900):
        chunk = slots[i:i + 900]
        for slot, file_id, vec in c.execute(
                f"SELECT slot, file_id, vec FROM records WHERE slot IN ({','.join('?' * len(chunk))})", chunk):
            yield slot, file_id * 2 + (1 if vec else 0)


def _write_slot_chunks(c, owners, chunks) -> None:
    n_chunks = -(-len(owners) // SLOTMAP_CHUNK)
    c.executemany("INSERT OR REPLACE INTO slotmap(chunk, data) VALUES (?, ?)",
                  [(k, owners[k * SLOTMAP_CHUNK:(k + 1) * SLOTMAP_CHUNK].astype("<i8").tobytes())
                   for k in chunks if k < n_chunks])
    c.execute("DELETE FROM slotmap WHERE chunk >= ?", (n_chunks,))


class Batch:
    """What one commit writes. Filled by the indexer, applied by Store.commit: vectors (slot ->
    vector), records, files (to insert: id None, or update), restamps ((size, mtime_ns, stamped_ns,
    id) each), the slots and files to delete, the lexical segment (or None), meta to set, and the
    slot high-water mark."""

    __slots__ = ("vectors", "records", "files", "restamps", "delete_slots", "delete_files", "segment", "meta",
                 "high_water")

    def __init__(self, vectors: dict, records: list[NewRecord], files: list[NewFile], restamps: list,
                 delete_slots: list, delete_files: list, segment: dict | None, meta: dict, high_water: int):
        self.vectors, self.records, self.files, self.restamps = vectors, records, files, restamps
        self.delete_slots, self.delete_files, self.segment = delete_slots, delete_files, segment
        self.meta, self.high_water = meta, high_water

    @classmethod
    def empty(cls, high_water: int) -> Batch:
        return cls({}, [], [], [], [], [], None, {}, high_water)

    def __bool__(self) -> bool:
        return bool(self.vectors or self.records or self.files or self.restamps or self.delete_slots
                    or self.delete_files or self.segment is not None or self.meta)


_SEGMENT_ARRAYS = ("doc_slots", "doc_len", "terms", "offsets", "post_doc", "post_tf")


_NPY_ITEM = {"<i8": 8, "<u8": 8, "<f8": 8, "<i4": 4, "<u4": 4, "<f4": 4, "<i2": 2, "<u2": 2, "|b1": 1, "|u1": 1,
             "|i1": 1}


# The header numpy writes: the repr of {'descr': ..., 'fortran_order': ..., 'shape': (...)}, padded.
_NPY_DICT = re.compile(r"\{'descr': '([<>|=][a-z][0-9]+)', 'fortran_order': (False|True), "
                       r"'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \}[ \n]*\Z")


class Clean:
    """clean_stamps' answer: the (path, size, mtime_ns) of files whose stat says they are unchanged.
    `rows` is the set, made on first use from the cleanset row's columns: a no-op `folio index`
    needs only its size and digest (readahead.digest), which the columns give without it."""

    __slots__ = ("_rows", "_columns", "gen", "_hashes")

    def __init__(self, rows: set | None = None, columns: tuple | None = None, gen: int | None = None):
        self._rows, self._columns, self.gen = rows, columns, gen
        self._hashes: set[int] | None = None

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
        return len(self._rows) if self._rows is not None else len(self._columns[0])

    @property
    def rows(self) -> set[tuple[str, int, int]]:
        if self._rows is None:
            self._rows = set(zip(*self._columns, strict=True))
        return self._rows

    def tuples(self) -> Iterable[tuple[str, int, int]]:
        """Each (path, size, mtime_ns) once, the set unmade when it was not made yet."""
        return self._rows if self._rows is not None else zip(*self._columns, strict=True)

    def restated(self, old: set, new: list) -> tuple | None:
        """The columns read from the cleanset row with the rows `old` replaced by `new` where both
        name the same few paths (an edit or a touch changes a file's size and mtime only); None
        where the list of paths changes (a file new, gone, renamed or no longer clean)."""
        if self._columns is None or self.gen is None or len(old) != len(new) or len(new) > 64:
            return None
        paths, sizes, mtimes = self._columns
        sizes, mtimes = sizes[:], mtimes[:]  # arrays: copied whole in microseconds
        if not new:
            return paths, sizes, mtimes
        at = {}
        for p, size, mtime in old:
            try:
                i = paths.index(p)
            except ValueError:
                return None
            if sizes[i] != size or mtimes[i] != mtime or p in at:
                return None
            at[p] = i
        for p, size, mtime in new:
            i = at.pop(p, None)
            if i is None:
                return None
            sizes[i], mtimes[i] = size, mtime
        return paths, sizes, mtimes


class _Clean:
    """clean_stamps' whole set as a writer read it (`kept`: from the cleanset row), the rows its
    commits changed since (`old`: as they were; `touched`: their ids, inserted ones included)."""

    __slots__ = ("racy_ns", "clean", "kept", "old", "touched")

    def __init__(self, racy_ns: int, clean: Clean, kept: bool):
        self.racy_ns, self.clean, self.kept = racy_ns, clean, kept
        self.old: set = set()
        self.touched: set = set()


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


def _npy_head(path: Path) -> tuple[tuple[int, ...], str, int]:
    """(shape, dtype, data offset) of a plain .npy array file whose size holds all its data;
    ValueError for anything else (another format, an object array, a truncated file)."""
    with open(path, "rb") as fh:
        head = fh.read(12)
        if len(head) < 10 or head[:6] != b"\x93NUMPY" or head[6] not in (1, 2, 3):
            raise ValueError("not a .npy file")
        if head[6] == 1:
            start, size = 10, int.from_bytes(head[8:10], "little")
        else:
            start, size = 12, int.from_bytes(head[8:12], "little")
        fh.seek(start)
        text = fh.read(size)
        if len(text) < size:
            raise ValueError("truncated header")
        header = text.decode("latin-1")
        m = _NPY_DICT.match(header)  # numpy's own header: read without ast (~5 ms of a no-op run)
        if m is not None:
            meta = {"descr": m[1], "fortran_order": m[2] == "True",
                    "shape": tuple(int(x) for x in m[3].replace(",", " ").split())}
        else:
            import ast

            meta = ast.literal_eval(header)
        if not isinstance(meta, dict) or meta.get("fortran_order") is not False or meta.get("descr") not in _NPY_ITEM:
            raise ValueError("not a plain array")
        shape = meta.get("shape")
        if not isinstance(shape, tuple) or not all(isinstance(x, int) and x >= 0 for x in shape):
            raise ValueError("bad shape")
        count = 1
        for x in shape:
            count *= x
        data = start + size
        if os.fstat(fh.fileno()).st_size < data + count * _NPY_ITEM[meta["descr"]]:
            raise ValueError("truncated data")
    return shape, meta["descr"], data


def _segment_whole(seg: dict) -> bool:
    if not all(k in seg for k in _SEGMENT_ARRAYS):
        return False
    try:
        return (len(seg["doc_len"]) == len(seg["doc_slots"]) and len(seg["offsets"]) == len(seg["terms"]) + 1
                and len(seg["post_tf"]) == len(seg["post_doc"]) and int(seg["offsets"][-1]) == len(seg["post_doc"]))
    except (TypeError, IndexError, ValueError):
        return False


def _row(r) -> Row:
    return Row(r[0], r[1], r[2], r[3], r[4], r[5] or "", tuple(json.loads(r[6] or "[]")), bool(r[7]), r[8] or "",
               bool(r[9]))


class _Flock:
    """flock(2) on the lock file: the lock filelock's UnixFileLock takes, so either may hold it
    against the other, without importing filelock (a tenth of a no-op re-index's budget)."""

    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None

    def acquire(self, blocking: bool) -> bool:
        import fcntl

        fd = _own(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


def acquire_lock(root: Path, *, wait: bool = True, on_wait: Callable[[str], None] | None = None):
    """The one writer's lock (.folio/write.lock). wait=False raises LockBusy at once when held."""
    d = index_dir(root)
    if not _check_dir(root):
        _make_index_dir(root)
    path = str(d / "write.lock")
    if os.name == "posix":
        lk = _Flock(path)
        try:
            got = lk.acquire(blocking=False)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise not_writable(root, _why(e)) from None
        if got:
            return lk
    else:
        from filelock import FileLock, Timeout

        lk = FileLock(path)
        try:
            lk.acquire(timeout=0)
            return lk
        except Timeout:
            pass
    if not wait:
        raise LockBusy(f"another folio is writing the index at {root}")
    if on_wait:
        on_wait(f"waiting for another folio writing the index at {root} ...")
    if isinstance(lk, _Flock):
        lk.acquire(blocking=True)
    else:
        lk.acquire()
    return lk


def remove_index(root: Path) -> None:
    """Delete folio's own names under .folio/ but the lock file (the caller holds the lock): a link
    at one of them goes as a link, and nothing else there is touched (`.folio` may be a link to a
    directory that holds other things)."""
    d = index_dir(root)
    if not _check_dir(root):
        return
    why = _unwritable(d)
    if why:
        raise not_writable(root, why)
    with os.scandir(d) as it:
        entries = [e for e in it if OWN_NAME.match(e.name) and e.name != "write.lock"]
    for e in entries:
        if e.name == "lex" and e.is_dir(follow_symlinks=False):
            with os.scandir(e.path) as it:
                for s in it:
                    if SEGMENT_NAME.match(s.name):
                        _remove_own(s.path)
            with contextlib.suppress(OSError):
                os.rmdir(e.path)  # only when nothing but folio's segments was in it
        else:
            _remove_own(e.path)
