"""The one writer's lock: `.folio/write.lock`, held with flock(2) for the length of a run.

Owns taking and releasing the lock (waiting for another writer, or refusing at once with LockBusy;
whether this process holds it: held_here),
making `.folio/` for a writer's first run, and the lock file's contents: a short note the holder
writes there (how far its run is: folio.running) and others read (read_note). Must not read or
write anything else in `.folio/`: the writer that holds the lock opens the store itself (Store.hold
keeps the lock with it).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path

from folio.errors import FolioError
from folio.store.directory import check_dir, index_dir, make_index_dir, not_writable, own, reason_of


class LockBusy(FolioError):
    pass


_HELD: dict[str, int] = {}  # the lock files this process holds (flock), with how many times: held_here


def held_here(root: Path) -> bool:
    """Whether this process holds the index's lock now (`folio mcp`'s live index or a query's
    refresh, in another thread): a writer of its own finishes soon, not another folio's run."""
    return _HELD.get(str(index_dir(root) / "write.lock"), 0) > 0


class _Flock:
    """flock(2) on the lock file: the lock filelock's UnixFileLock takes, so either may hold it
    against the other, without importing filelock (a tenth of a no-op re-index's budget)."""

    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None

    def acquire(self, blocking: bool) -> bool:
        import fcntl

        fd = own(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        _HELD[self.path] = _HELD.get(self.path, 0) + 1
        return True

    def release(self) -> None:
        if self.fd is not None:
            _HELD[self.path] = _HELD.get(self.path, 1) - 1
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


NOTE_BYTES = 512  # a note is padded to this (with spaces): the file keeps one size, so clearing it frees no
# block that a later write could take, and a run on a full disk finds the room it found before


def write_note(lk, data: bytes) -> None:
    """The holder's note, in the lock file itself (replacing the one before; b"": none). Only where the
    lock is flock(2) on a descriptor this process holds; elsewhere nothing is written."""
    fd = getattr(lk, "fd", None)
    if not isinstance(lk, _Flock) or fd is None:
        return
    with contextlib.suppress(OSError):  # a note is a courtesy: never a reason for a run to fail
        os.pwrite(fd, data.ljust(NOTE_BYTES), 0)


def read_note(root: Path) -> bytes | None:
    """The lock holder's note (None: no lock file, or none readable), read without taking the lock."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(index_dir(root) / "write.lock", flags)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def acquire_lock(root: Path, *, wait: bool = True, on_wait: Callable[[str], None] | None = None):
    """The one writer's lock (.folio/write.lock). wait=False raises LockBusy at once when held."""
    d = index_dir(root)
    if not check_dir(root):
        make_index_dir(root)
    path = str(d / "write.lock")
    if os.name == "posix":
        lk = _Flock(path)
        try:
            got = lk.acquire(blocking=False)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise not_writable(root, reason_of(e)) from None
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
