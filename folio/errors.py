"""The one error type. Library code raises FolioError with a sentence that names the fix;
only console.py renders it (as `folio: ...` on stderr) and turns it into an exit code."""


class FolioError(Exception):
    """An expected failure, explained in one sentence for the user."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def disk_full(e: BaseException) -> bool:
    """A write refused for want of room: no space or quota left on the device (ENOSPC, EDQUOT, which
    SQLite reports as SQLITE_FULL), or the process's file size limit reached (EFBIG, `ulimit -f`)."""
    import errno
    import sqlite3

    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return isinstance(e, sqlite3.Error) and (getattr(e, "sqlite_errorcode", None) == 13  # SQLITE_FULL
                                             or "database or disk is full" in str(e))


def full_sentence(e: BaseException, where) -> str:
    """The sentence for a disk_full error met while writing the index at `where` (its .folio/)."""
    import errno

    what = getattr(e, "filename", None) or where
    if isinstance(e, OSError) and e.errno == errno.EFBIG:
        why, fix = "the file size limit (`ulimit -f`) was reached", "raise the limit"
    else:
        why, fix = "no space left on the device (disk full)", "free some space"
    return (f"{why} while writing {what}; the index is intact up to its last commit (queries answer from "
            f"it): {fix} and run `folio index` again, which resumes where this run stopped")
