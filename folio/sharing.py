"""Which folio runs on this machine are using an embeddings server right now.

A run that talks to a server (`folio index`, a query's refresh) holds one small file named for the
server (its scheme, host and port) and its own process id, under an exclusive flock(2), for as long
as it talks to it: the kernel drops the lock when the process ends, however it ends. Another run
asks who holds such a file: a held lock is a live run (its requests are no one's leftovers, so
waiting for the server to be free would mean waiting for that whole run); a file nobody holds was
left by a run that was killed, and is removed. Owns the directory of these files
($XDG_RUNTIME_DIR/folio/servers, else ~/.cache/folio/servers); must not touch anything else, and
never fails a run: where the directory cannot be used, no run is seen and none is recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from urllib.parse import urlsplit


def _dir() -> Path:
    # unset, empty or relative XDG variables are ignored, as the XDG Base Directory spec says
    base = os.environ.get("XDG_RUNTIME_DIR", "")
    if not os.path.isabs(base) or not os.path.isdir(base):
        base = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(base):
            base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "folio" / "servers"


def _server(endpoint: str) -> str:
    """One name for one server however an endpoint spells its path."""
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return hashlib.sha256(f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}".encode()).hexdigest()[:16]


class Held:
    """This process's mark on a server: release() (or the process's end) takes it away."""

    def __init__(self, path: Path | None, fd: int | None):
        self.path, self.fd = path, fd

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)  # closing drops the lock
        self.fd = None


def hold(endpoint: str, what: str) -> Held:
    """Say, for as long as it is held, that this process uses the server behind `endpoint` for
    `what` (e.g. "indexing /home/me/notes")."""
    if os.name != "posix":
        return Held(None, None)
    import fcntl

    d = _dir()
    final = d / f"{_server(endpoint)}.{os.getpid()}"
    tmp = d / f".{final.name}.new"
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return Held(None, None)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, what.encode("utf-8", "surrogateescape")[:4000])
        os.replace(tmp, final)  # seen under its name only once locked: never taken for a dead run's
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return Held(None, None)
    return Held(final, fd)


def others(endpoint: str) -> list[str]:
    """What the other live folio runs using the server behind `endpoint` do (one entry each);
    files left by runs that died are removed on the way."""
    if os.name != "posix":
        return []
    import fcntl

    d = _dir()
    prefix = _server(endpoint) + "."
    mine = f"{prefix}{os.getpid()}"
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix) and n != mine]
    except OSError:
        return []
    live = []
    for name in sorted(names):
        try:
            fd = os.open(d / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                live.append(os.read(fd, 4000).decode("utf-8", "replace") or "a folio run")
                continue
            with contextlib.suppress(OSError):
                os.unlink(d / name)  # nobody holds it: its run died
        finally:
            os.close(fd)
    return live
