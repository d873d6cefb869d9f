"""The `.folio/` directory: the names folio owns in it, and the rules for touching them.

Owns which names inside `.folio/` (and `.folio/lex/`) are folio's (OWN_NAME, SEGMENT_NAME,
VECTORS_NAME; a name says what a file would be, and a matrix file is folio's only where the index
names it), how one is opened for writing (never through a symbolic link: O_NOFOLLOW; a write that
fails names its file: writing), made (lex/) and removed (a link goes as a link, never what it points
to), what `--rebuild` removes (remove_index: folio's names only, the lock kept), making `.folio/`
itself, whether it is writable, and the sentences for a directory folio cannot vouch for (linked,
not_writable, corrupt, Vanished). `.folio` may be a link to a directory (a cache kept elsewhere):
nothing else in it is ever written or removed. Must not open index.db or know what any file holds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from pathlib import Path

from folio.config import INDEX_DIR
from folio.errors import FolioError

# Every name folio makes directly inside .folio/, and inside .folio/lex/: nothing else is ever touched there.
OWN_NAME = re.compile(r"(index\.db(-wal|-shm|-journal)?|write\.lock|vectors(\.[0-9]+)?\.f32|lex)\Z")
SEGMENT_NAME = re.compile(r"[0-9a-f]{16}-[0-9]+(\.tmp)?\Z")  # <time_ns in hex>-<pid>: segments.py
VECTORS_NAME = re.compile(r"vectors(\.[0-9]+)?\.f32\Z")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class Damaged(FolioError):
    """An index that is not what folio wrote there; `where` is its `.folio` or a file in it (a query
    over several corpora leaves that one out and says so)."""

    def __init__(self, message: str, where: Path):
        super().__init__(message)
        self.where = Path(where)


class Vanished(FolioError):
    """A file the reader's snapshot names is gone: a writer committed a newer generation (or
    merged segments) and removed it between the snapshot and the open. Read again. `where`: the
    index it was read from, when the sentence says it is damaged (it may be: read again and again)."""

    def __init__(self, message: str, where: Path | None = None):
        super().__init__(message)
        self.where = where


class NoIndex(FolioError):
    """No index at the root, or one whose first run has not committed its schema yet."""


def identity(root: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the index.db at root now, None where there is none: a reader whose file is
    no longer this one had its index removed or rebuilt under it (`--rebuild`), which is not damage."""
    try:
        st = os.stat(index_dir(root) / "index.db")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def damaged_root(error, roots: list[Path]) -> Path | None:
    """The corpus among `roots` whose index `error` (a Damaged, or a Vanished naming its index) says
    is damaged; None when it names none of them."""
    where = getattr(error, "where", None)
    if where is None:
        return None
    return next((root for root in roots if where == index_dir(root) or index_dir(root) in where.parents), None)


def corrupt(path: Path, detail: str) -> Damaged:
    return Damaged(f"the index at {path} is damaged ({detail}); run `folio index --rebuild` to build it anew", path)


def lost(path: Path, detail: str) -> Vanished:
    """A file missing or incomplete: a writer's merge or rebuild under the reader (read again), or damage."""
    return Vanished(str(corrupt(path, detail)), path)


def index_dir(root: Path) -> Path:
    return root / INDEX_DIR


def exists(root: Path) -> bool:
    return (index_dir(root) / "index.db").is_file()


def linked(path: Path | str) -> FolioError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return FolioError(f"{path} is a symbolic link (to {target}), and folio reads and writes only files it made "
                      f"itself inside .folio/, never through a link: remove the link (`rm {path}`; what it points "
                      f"to is left alone) and run `folio index --rebuild`")


def reason_of(e: OSError) -> str:
    return "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e)).lower()


def not_writable(root: Path, why: str, *, creating: bool = False) -> FolioError:
    d = index_dir(root)
    if creating:
        return FolioError(f"the corpus at {root} is not writable ({why}), so folio cannot make its index {d} "
                          f"there: make {d} a link to a directory you can write (`ln -s DIR {d}`), or index a "
                          f"writable copy of the corpus")
    return FolioError(f"the index at {d} is not writable ({why}): queries still read it, but `folio index` cannot "
                      f"update it; run it as the index's owner, or index a writable copy of the corpus")


def check_dir(root: Path) -> bool:
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
        raise FolioError(f"{d} cannot be opened ({reason_of(e)}): folio keeps its index in a directory of that name; "
                         f"move it out of the way (`mv {d} {d}.old`) and run `folio index`") from None
    if not stat.S_ISDIR(st.st_mode):
        what = (f"a symbolic link to {os.readlink(d)}, which is not a directory" if os.path.islink(d)
                else "a file, not a directory")
        raise FolioError(f"{d} is {what}: folio keeps its index in a directory of that name; move it out of the "
                         f"way (`mv {d} {d}.old`) and run `folio index`")
    return True


def verify(root: Path) -> bool:
    """Whether `.folio/` exists, refusing one folio cannot vouch for: see check_dir, and a symbolic
    link at any of folio's own names inside it or inside lex/ (a clone can carry one: git stores
    links). Two directory listings, no stat per file."""
    if not check_dir(root):
        return False
    d = index_dir(root)
    entries = _listed(d)
    if entries is None:
        return False
    for e in entries:
        if OWN_NAME.match(e.name) and e.is_symlink():
            raise linked(e.path)
    if any(e.name == "lex" and e.is_dir(follow_symlinks=False) for e in entries):
        for e in _listed(d / "lex") or ():
            if SEGMENT_NAME.match(e.name) and e.is_symlink():
                raise linked(e.path)
    return True


def _listed(d: Path) -> list | None:
    """The entries of one of folio's directories; None where it vanished as it was listed (another
    process's `folio index --rebuild` removes it and makes it anew)."""
    try:
        with os.scandir(d) as it:
            return list(it)
    except FileNotFoundError:
        return None


def own(path, flags):
    """open()'s opener for folio's own files: never through a symbolic link."""
    try:
        return os.open(path, flags | _NOFOLLOW, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise linked(path) from None
        raise


@contextlib.contextmanager
def writing(path: Path | str):
    """Writes to one of folio's files: an OSError they raise names the file (a write or an fsync that
    fails carries no name), so a full disk's sentence says where it ran out."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            e.filename = str(path)
        raise


def remove_own(path: Path | str) -> None:
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


def own_dir(path: Path) -> None:
    """Make one of folio's directories (lex/) unless it is there; refuse a link or a file in its place."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise linked(path)
    if not stat.S_ISDIR(st.st_mode):
        raise corrupt(path.parent, f"{path.name} is not a directory")


def unwritable(d: Path) -> str | None:
    """Why `.folio/` (or its index.db) cannot be written by this process, or None when it can."""
    for p in (d, d / "index.db"):
        if p.exists() and not p.is_symlink() and not os.access(p, os.W_OK):
            try:
                ro = os.statvfs(p).f_flag & getattr(os, "ST_RDONLY", 1)
            except OSError:
                ro = False
            return "read-only file system" if ro else "permission denied"
    return None


def make_index_dir(root: Path) -> None:
    """Create `.folio/` (a writer's first run); an unwritable corpus is one sentence."""
    try:
        index_dir(root).mkdir(parents=True)
    except FileExistsError:
        check_dir(root)
    except OSError as e:
        from folio.errors import disk_full, full_sentence

        if disk_full(e):
            raise FolioError(full_sentence(e, index_dir(root), "nothing was written")) from None
        raise not_writable(root, reason_of(e), creating=True) from None


def size_on_disk(d: Path, matrices: list[str]) -> int:
    """Bytes in folio's own names under `d` (a `.folio` linked to a cache may hold other things): the
    matrix files only where the index names them (`matrices`)."""
    total = 0
    with os.scandir(d) as it:
        own_names = [e.path for e in it if OWN_NAME.match(e.name)
                     and (not VECTORS_NAME.match(e.name) or e.name in matrices)]
    for top in own_names:
        for dirpath, _dirs, files in os.walk(top):
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(dirpath, f))
        if not os.path.isdir(top):
            with contextlib.suppress(OSError):
                total += os.path.getsize(top)
    return total


def remove_index(root: Path, matrices: list[str] | None) -> list[str]:
    """What `--rebuild` removes, the lock file kept (the caller holds the lock): index.db and its
    -wal/-shm/-journal, lex/'s segments, and the matrix files the index names (`matrices`; None where
    index.db was too damaged to say: then every one in a `.folio` of its own, none in a directory
    `.folio` links to). A link at one of them goes as a link, and nothing else there is touched
    (`.folio` may be a link to a directory that holds other things). Returns the matrix files left
    in place because a damaged index could not name them."""
    d = index_dir(root)
    if not check_dir(root):
        return []
    reason = unwritable(d)
    if reason:
        raise not_writable(root, reason)
    if matrices is None and not os.path.islink(d):
        matrices = [n for n in os.listdir(d) if VECTORS_NAME.match(n)]  # its own directory: folio's
    with os.scandir(d) as it:
        entries = [e for e in it if OWN_NAME.match(e.name) and e.name != "write.lock"]
    # index.db first: a reader that then misses a file its index named finds its index.db gone or
    # replaced, so it reads the index anew instead of calling it damaged.
    entries.sort(key=lambda e: not e.name.startswith("index.db"))
    left = []
    for e in entries:
        if e.name == "lex" and e.is_dir(follow_symlinks=False):
            with os.scandir(e.path) as it:
                for s in it:
                    if SEGMENT_NAME.match(s.name):
                        remove_own(s.path)
            with contextlib.suppress(OSError):
                os.rmdir(e.path)  # only when nothing but folio's segments was in it
        elif not VECTORS_NAME.match(e.name) or (matrices is not None and e.name in matrices):
            remove_own(e.path)
        elif matrices is None:
            left.append(e.name)
    return sorted(left)
