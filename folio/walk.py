"""Listing the corpus: every Markdown file under the root, with its stat.

Owns directory listing and stat: hidden entries skipped (so .git and .folio), .gitignore and
.ignore honoured (pathspec), `exclude` patterns from folio.yaml, symlinks followed only inside
the root and never into a loop, and each file listed once: under its own path when the walk
reaches it, a symlink to it (a file or a directory) being a second name for the same sections.
Paths are root-relative, '/'-separated and sorted.
Reads a file's bytes only through read_bytes (for the indexer), which refuses whatever is no
longer a regular file inside the root. The tree's warnings about the indexes around it are said
here: another corpus's index inside this one (the walk), this corpus inside another's index
(nesting, which reads how many of its files that index holds). Must not parse file contents
(beyond ignore files).
"""

from __future__ import annotations

import errno
import functools
import os
import stat as statmod
from collections import namedtuple
from operator import itemgetter
from pathlib import Path

from folio.config import INDEX_DIR

IGNORE_FILES = (".gitignore", ".ignore")


# One listed file: its root-relative, '/'-separated path, size and mtime_ns. A tuple: the walk makes
# one per file (16k on a big corpus), and the stat prefilter looks it up as it is in a set of
# (path, size, mtime_ns) the index holds. collections' namedtuple, not typing's: the walk runs in a
# child forked before anything else (readahead), and importing typing costs a tenth of its start.
Entry = namedtuple("Entry", "path size mtime_ns")


IGNORE_MAX = 1 << 20  # bytes of an ignore file read (git's own cap on one is 100 MB; a real one is a few KB)


@functools.cache  # one per distinct ignore file (or exclude list) of the tree
def _spec(lines: tuple[str, ...]):
    """An ignore file's patterns, read as git reads them within one file: the last pattern that
    matches a path decides (a `!` one includes it again). The walk checks each directory before
    anything under it, so a file under an excluded directory is never asked about (git's rule that
    it cannot be included again)."""
    import pathspec

    return pathspec.PathSpec.from_lines("gitignore", lines)


def _read_ignore(dirpath: str, rel: str, warnings: list[str]) -> tuple[str, ...] | None:
    """The pattern lines of a directory's ignore files (None: none): a tuple of strings, so a
    directory handed to another process (readahead) carries its rules with it. As git does, an
    ignore file that is a symlink is not followed, and one that is not a regular file (a FIFO would
    block the walk, /dev/zero fill memory) is skipped: each with a warning. Past IGNORE_MAX bytes
    the rest is not read."""
    lines = []
    for name in IGNORE_FILES:
        try:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            if e.errno == errno.ELOOP:
                warnings.append(f"{rel}{name}: a symlink; ignore files are not followed (as git does), so its rules "
                                f"do not apply")
            continue
        try:
            st = os.fstat(fd)
            if not S_ISREG(st.st_mode):
                warnings.append(f"{rel}{name}: {_kind(st.st_mode)}, not a regular file; its rules do not apply")
                continue
            raw = b""
            while len(raw) <= IGNORE_MAX:
                more = os.read(fd, IGNORE_MAX + 1 - len(raw))
                if not more:
                    break
                raw += more
        except OSError:
            continue
        finally:
            os.close(fd)
        if len(raw) > IGNORE_MAX:
            warnings.append(f"{rel}{name}: longer than {IGNORE_MAX >> 20} MB; only its first {IGNORE_MAX >> 20} MB "
                            f"of rules apply")
            raw = raw[:IGNORE_MAX]
        lines.extend(raw.decode("utf-8", errors="replace").split("\n"))
    lines = tuple(ln.rstrip("\r") for ln in lines if ln.strip() and not ln.lstrip().startswith("#"))
    return lines or None


def _utf8(name: str) -> bool:
    """False for a name holding bytes that are not UTF-8 (os.fsdecode keeps them as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def walk(root: Path, extensions=(".md",), exclude=(), plain: bool = False, sort: bool = True,
         alive: int | None = None) -> tuple[list[Entry], list[str]]:
    """(entries sorted by path, warnings). Never raises for one unreadable directory.
    plain: each entry a plain (path, size, mtime_ns) tuple (what readahead's child sends; marshal
    takes no Entry). sort=False: in the order listed (a no-op re-index only compares them with the
    index's stamps; the run sorts the few it reads). alive: the pid of the process the walk is for:
    the walk stops (SystemExit) at the next directory once that process has ended."""
    w = Walker(root, extensions, exclude, plain=plain, alive=alive)
    w.run(w.top())
    return w.finish(sort)


class Walker:
    """One walk of the tree, which two processes may share (readahead): `run` lists the directories
    of a stack and may hand part of it to the other (`share`); each side keeps its own entries, and
    the symlinks met on either side are settled by one of them once it holds both states (`state`,
    `merge`, then `finish`). Items of a stack: (real dir, relative prefix, ignore rules), where the
    rules are ((relative prefix of the ignore file's dir, its pattern lines), ...)."""

    def __init__(self, root, extensions=(".md",), exclude=(), *, plain: bool = False, alive: int | None = None):
        self.root_s = os.path.realpath(root)
        self.exts = tuple(e.lower() for e in extensions)
        self.excl = _spec(tuple(exclude)) if exclude else None
        self.make = _new if not plain else _tuple
        self.alive = alive
        self.entries: list[Entry] = []
        self.warnings: list[str] = []
        self.visited = {self.root_s}
        self.linked: list = []  # symlinked directories: listed after every real one, so a file keeps its own path
        self.dirs = {"": self.root_s}  # relative dir prefix -> real dir (to name the files symlinks point at)
        self.links: dict[str, str] = {}  # relpath of a symlinked file -> its real path

    def top(self) -> list:
        return [(self.root_s, "", ())]

    def run(self, stack: list, share=None) -> None:
        """List the directories of `stack` and all below them (symlinked ones are kept for finish).
        share: a readahead.Share; whenever the other process asks, the top half of the stack goes
        to it (the most recently found directories: the DFS keeps its largest subtrees at the bottom)."""
        root_s, exts, excl, make, alive = self.root_s, self.exts, self.excl, self.make, self.alive
        append = self.entries.append
        warnings, visited, linked, dirs, links = self.warnings, self.visited, self.linked, self.dirs, self.links
        want = share.want if share is not None else None
        while stack:
            if want is not None and want[0] and len(stack) > 1:
                share.give(stack)
            real, rel, specs = stack.pop()
            if alive is not None and os.getppid() != alive:
                raise SystemExit(1)  # the run it lists for has ended (killed): nobody waits for the listing
            dirs[rel] = real
            try:
                with os.scandir(real) as it:
                    listing = list(it)
            except OSError as e:
                warnings.append(f"{rel or '.'}: directory skipped ({e.strerror or e})")
                continue
            # Open ignore files only where the listing shows one (most directories have none, and a
            # failed open per directory costs more than the rest of a no-op re-index's listing).
            for de in listing:
                if de.name in IGNORE_FILES:
                    lines = _read_ignore(real, rel, warnings)
                    if lines is not None:
                        specs = (*specs, (rel, lines))
                    break
            plain = not specs and excl is None
            rules = [(prefix, _spec(lines)) for prefix, lines in specs] if specs else ()  # compiled once per dir
            # The loop below runs once per entry of the tree: a no-op re-index is little more than
            # it, so it does no more per file than a bare listing must (name, type, extension, lstat).
            for de in listing:
                name = de.name
                if name[0] == ".":
                    if name == INDEX_DIR and rel:  # another corpus's index inside this one
                        warnings.append(f"{rel}: holds its own folio index, so its files are held by both "
                                        f"indexes; query both with --root to rank each file once, or delete "
                                        f"{rel}{INDEX_DIR} if it is not wanted")
                    continue
                try:
                    is_dir = de.is_dir()  # follows symlinks
                    if is_dir:
                        is_link = de.is_symlink()
                    elif not name.endswith(exts) and not name.lower().endswith(exts):
                        continue
                    else:
                        is_link = de.is_symlink()
                except OSError as e:
                    if e.errno == errno.EACCES:  # a directory listed but not searchable (mode 644)
                        warnings.append(f"{rel}{name}: skipped ({e.strerror}: its directory can be listed "
                                        f"but not entered; `chmod +x` it)")
                    continue
                relpath = rel + name
                if is_dir:
                    if not plain and _ignored(relpath + "/", rules, excl):
                        continue
                    if is_link:
                        target = os.path.realpath(de.path)
                        if not _inside(target, root_s):
                            warnings.append(f"{relpath}: symlink to a directory outside the corpus, not followed")
                            continue
                        if _inside(real, target):
                            warnings.append(f"{relpath}: symlink loops back to an enclosing directory, not followed")
                            continue
                        linked.append((target, relpath + "/", specs))
                        continue
                    target = de.path
                    visited.add(target)
                    stack.append((target, relpath + "/", specs))
                    continue
                if not plain and _ignored(relpath, rules, excl):
                    continue
                try:
                    if is_link:
                        target = os.path.realpath(de.path)
                        if not _inside(target, root_s):
                            warnings.append(f"{relpath}: symlink to a file outside the corpus, not read")
                            continue
                        st = os.stat(target)
                        links[relpath] = target
                    else:
                        st = de.stat(follow_symlinks=False)
                except OSError as e:
                    if e.errno == errno.EACCES:  # a directory listed but not searchable (mode 644)
                        warnings.append(f"{relpath}: skipped ({e.strerror}: its directory can be listed but "
                                        f"not entered; `chmod +x` it)")
                    continue  # else vanished between listing and stat
                if not S_ISREG(st.st_mode):
                    warnings.append(f"{relpath}: {_kind(st.st_mode)}, not a regular file; skipped")
                    continue
                if not relpath.isascii() and not _utf8(relpath):
                    warnings.append(f"{relpath}: the file name is not UTF-8, so the index cannot record it; "
                                    f"skipped (rename it to index it)")
                    continue
                append(make(Entry, (relpath, st.st_size, st.st_mtime_ns)))

    def settled(self) -> bool:
        """Whether this side's listing is final without the other's: it met no symlink to settle."""
        return not self.linked and not self.links

    def state(self) -> tuple:
        """What the other side needs to settle the symlinks this side met (marshal-able)."""
        return list(self.visited), self.linked, self.dirs, self.links

    def merge(self, entries: list, warnings: list[str], state: tuple) -> None:
        """Take in the other side's listing and state."""
        visited, linked, dirs, links = state
        self.entries.extend(entries)
        self.warnings.extend(warnings)
        self.visited.update(visited)
        self.linked.extend(linked)
        self.dirs.update(dirs)
        self.links.update(links)

    def finish(self, sort: bool = True) -> tuple[list[Entry], list[str]]:
        """List the symlinked directories not reached through a real path, drop the second names
        of files listed twice, sort: (entries, warnings)."""
        while self.linked:
            item = self.linked.pop()
            if item[0] in self.visited:
                continue  # a second way into a directory already listed
            self.visited.add(item[0])
            self.run([item])
        entries = self.entries
        if sort or self.links:
            entries.sort(key=_PATH)
        if self.links:
            entries = _one_path_per_file(entries, self.links, self.dirs)
        return entries, self.warnings


def _one_path_per_file(entries: list[Entry], links: dict[str, str], dirs: dict[str, str]) -> list[Entry]:
    """Drop a symlinked file whose target the walk also lists under its own path (or under an
    earlier symlink): the same sections would otherwise come back twice in every query."""
    held = set()
    for e in entries:
        if e[0] not in links:
            d, _, name = e[0].rpartition("/")
            held.add(os.path.join(dirs[d + "/" if d else ""], name))
    out = []
    for e in entries:
        target = links.get(e[0])
        if target is not None:
            if target in held:
                continue
            held.add(target)
        out.append(e)
    return out


_PATH = itemgetter(0)
_new = tuple.__new__  # Entry(...) without the Python-level __new__ namedtuple adds
S_ISREG = statmod.S_ISREG


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, as a person names it."""
    if statmod.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if statmod.S_ISSOCK(mode):
        return "a socket"
    if statmod.S_ISCHR(mode) or statmod.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _tuple(_cls, values: tuple) -> tuple:
    return values


def _ignored(relpath: str, specs, excl) -> bool:
    """Whether the walk leaves `relpath` out (a directory's ends with /): `exclude` from folio.yaml
    always; else, as git, the deepest directory's ignore file with a pattern matching it decides."""
    if excl is not None and excl.match_file(relpath):
        return True
    for prefix, spec in reversed(specs):
        include = spec.check_file(relpath[len(prefix):]).include
        if include is not None:
            return include
    return False


def stat_file(root: Path, relpath: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of one corpus file, or None when it is gone."""
    try:
        st = os.stat(os.path.join(root, relpath))
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def corpus_path(root: Path, given: str, cwd: Path | None = None) -> str:
    """The root-relative '/'-path of a file named the way a user names it (relative to `cwd`, or absolute).

    Refuses, with one sentence, a path that leaves the corpus: `../x.md` above the root, an absolute
    path elsewhere, or a symlink whose target is outside the root.
    """
    from folio.errors import FolioError

    root_s = os.path.realpath(root)
    full = os.path.normpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(given)))
    rel = os.path.relpath(full, root_s) if _inside(full, root_s) else None
    if rel is None:  # named through another spelling of the root (a symlinked parent): resolve it
        real = os.path.realpath(full)
        rel = os.path.relpath(real, root_s) if _inside(real, root_s) else None
    if rel is None or rel.startswith(".." + os.sep):
        raise FolioError(f"{given} is outside the corpus at {root}: folio reads only files under its root")
    if not _inside(os.path.realpath(full), root_s):
        raise FolioError(f"{given} is a symlink to a file outside the corpus at {root}: folio does not read it")
    return rel.replace(os.sep, "/")


@functools.lru_cache(maxsize=8)
def _real_root(root) -> str:
    return os.path.realpath(root)


def read_bytes(root: Path, relpath: str) -> bytes:
    """The bytes of one corpus file. Raises OSError (with a strerror) for anything that is not a
    regular file inside the root by now: the tree may change between the walk and the read, and a
    FIFO put in a file's place would otherwise block the run forever."""
    path = os.path.join(root, relpath)
    if not _inside(os.path.realpath(path), _real_root(root)):
        raise OSError(errno.EACCES, "it became a symlink to a file outside the corpus", relpath)
    # O_NONBLOCK: opening a FIFO must not wait for a writer (it has no effect on regular files).
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not statmod.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if statmod.S_ISDIR(mode) else "a FIFO" if statmod.S_ISFIFO(mode)
                else "a special file")
        raise OSError(errno.EINVAL, f"it is {kind} now, not a regular file", relpath)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def nesting(root: Path) -> list[str]:
    """A warning when this corpus lies inside another index that holds files under it: those files
    are held twice (the walk warns about the other case, an index inside this corpus)."""
    from folio import store as storemod
    from folio.config import enclosing_index
    from folio.errors import FolioError

    outer = enclosing_index(root)
    if outer is None:
        return []
    rel = root.resolve().relative_to(outer).as_posix()
    try:
        st = storemod.Store.open(outer)
        try:
            n = st.files_under(rel)
        finally:
            st.close()
    except FolioError:
        n = None  # an unreadable outer index: still worth the warning
    if n == 0:
        return []
    held = "its files are" if n is None else f"{n} of its files are"
    return [f"{root} lies inside the corpus indexed at {outer}, and {held} held by both indexes; run "
            f"`folio index` in {outer} instead, or add `{rel}/` to `exclude` in {outer}/folio.yaml if the "
            f"two corpora are meant to stay apart"]
