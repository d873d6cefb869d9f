"""The one error type. Library code raises FolioError with a sentence that names the fix;
only console.py renders it (as `folio: ...` on stderr) and turns it into an exit code."""

from folio.surface import invoke


class FolioError(Exception):
    """An expected failure, explained in one sentence for the user."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def disk_full(e: BaseException) -> bool:
    """A write refused for want of room: no space or quota left on the device (ENOSPC, EDQUOT, which
    SQLite reports as SQLITE_FULL, or as SQLITE_IOERR_SHMSIZE where it cannot grow its -shm file), or
    the process's file size limit reached (EFBIG, `ulimit -f`)."""
    import errno
    import sqlite3

    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    # SQLITE_IOERR_SHMSIZE: no room to grow the -shm file a WAL database is read through
    return isinstance(e, sqlite3.Error) and (getattr(e, "sqlite_errorcode", None) == 13  # SQLITE_FULL
                                             or getattr(e, "sqlite_errorname", None) == "SQLITE_IOERR_SHMSIZE"
                                             or "database or disk is full" in str(e))


def full_reason(e: BaseException, where) -> tuple[str, str]:
    """(what ran out and where, the fix) for a disk_full error met while writing `where` (an
    OSError's own filename wins: the store's writes name their file)."""
    import errno

    what = getattr(e, "filename", None) or where
    if isinstance(e, OSError) and e.errno == errno.EFBIG:
        return f"the file size limit (`ulimit -f`) was reached while writing {what}", "raise the limit"
    return f"no space left on the device (disk full) while writing {what}", "free some space"


def full_sentence(e: BaseException, where, kept: str | None = None) -> str:
    """The sentence for a disk_full error met while writing the index at `where` (its .folio/ or the
    file): what ran out, where, what the index keeps (`kept`, else that it is intact up to its last
    commit) and the fix."""
    why, fix = full_reason(e, where)
    kept = kept or "the index is intact up to its last commit (queries answer from it)"
    return f"{why}; {kept}: {fix} and {invoke('index')} again, which resumes where this run stopped"
