"""Work done ahead of a run's plan in other processes: the listing of the tree (a forked child, while
the run opens its store), and the files' bytes, their hash and the parse (worker processes).

Owns those processes (each dies with its run: WalkAhead's child, the parse pool) and parse_bytes,
the part of a file's plan that needs no index: its bytes judged as text, decoded and divided into
sections (Parsed). Must not touch the store or the server, or print.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from folio.walk import Entry, read_bytes, walk

if TYPE_CHECKING:
    from folio.sections import Document


@dataclass(frozen=True)
class Parsed:
    """One file's bytes, parsed (parse_bytes) at `budget`: why they are not text (`binary`), else the
    decoding warning (None when they decoded cleanly) and the Document (sections.Document)."""

    budget: int
    binary: str | None
    warning: str | None
    document: Document | None


def parse_bytes(raw: bytes, budget: int) -> Parsed:
    """The part of a file's plan that needs no index, so worker processes can run it ahead of the loop."""
    from folio import sections as sec

    binary = sec.binary_reason(raw)
    if binary:
        return Parsed(budget, binary, None, None)
    text, warn = sec.decode(raw)
    return Parsed(budget, None, warn, sec.parse_document(text, budget))


class WalkAhead:
    """The walk, run in a forked child while the caller does other work (`folio index` opens its
    store, reads the stamps and asks the server for the fingerprint meanwhile): on two cores a no-op
    re-index then costs about the longer of the two, not their sum. `result()` gives exactly what
    `walk` gives; wherever the child cannot give it (no fork, the child failed or was killed, its
    answer is damaged) the walk runs again here, so an error is raised as `walk` raises it."""

    def __init__(self, root: Path, extensions=(".md",), exclude=()):
        self.args = (root, tuple(extensions), tuple(exclude))
        self.pid = self.fd = None
        import threading

        # Only from a process with one thread (`folio index`): a child forked from a threaded one
        # (`folio mcp`'s index tool) may inherit a lock another thread held, and never answer.
        if not hasattr(os, "fork") or os.environ.get("FOLIO_WALK_AHEAD") == "0" or threading.active_count() > 1:
            return
        try:
            r, w = os.pipe()
        except OSError:
            return
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:  # the child: list, send, end; never returns into the caller's code
            code = 1
            try:
                os.close(r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent's handlers print for the parent
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _die_with_parent(parent)
                import marshal

                data = marshal.dumps(walk(*self.args, plain=True))
                with os.fdopen(w, "wb") as f:
                    f.write(len(data).to_bytes(8, "little"))
                    f.write(data)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self.fd = pid, r

    def result(self) -> tuple[list[Entry], list[str]]:
        """walk's answer; from the child, each entry a plain (path, size, mtime_ns) tuple (equal to
        its Entry, and as cheap to look up: making 16k Entry objects is a tenth of a no-op's listing)."""
        got = self._take() if self.pid is not None else None
        return got if got is not None else walk(*self.args)

    def _take(self):
        import marshal

        try:
            with os.fdopen(self.fd, "rb") as f:
                self.fd = None
                head = f.read(8)
                data = f.read(int.from_bytes(head, "little")) if len(head) == 8 else b""
            _pid, status = os.waitpid(self.pid, 0)
            self.pid = None
            if status != 0 or len(data) != int.from_bytes(head, "little"):
                return None
            rows, warnings = marshal.loads(data)
            return rows, warnings
        except (OSError, ValueError, EOFError, TypeError):
            return None

    def close(self) -> None:
        """Stop a child whose answer is no longer wanted (the run failed before it needed it)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None


# `folio index`'s options that take a value (cli.index; tests/test_lean_paths.py checks the two agree).
INDEX_VALUE_OPTIONS = frozenset({"--endpoint", "--model", "--max-chars", "--jobs"})
_early: list[WalkAhead] = []


def walk_early(argv: list[str]) -> None:
    """Start `folio index`'s listing before click and the indexer are imported (folio.entry): the
    root and the settings the walk needs are read from argv as click will read them. A guess only:
    cli.index takes it (take_early) when the root and settings it resolves are the same, else the
    child is stopped and the tree listed again, so a wrong guess costs time, never a wrong listing."""
    if argv[:1] != ["index"]:
        return
    root = None
    rest = iter(argv[1:])
    for a in rest:
        if a in INDEX_VALUE_OPTIONS:
            next(rest, None)
        elif a == "--" or a in ("-h", "--help") or (a.startswith("-") and a != "-" and "=" not in a
                                                    and a not in ("--rebuild", "--no-wait", "--json")):
            return  # help, or anything this reading does not know: click decides, the walk waits
        elif not a.startswith("-"):
            if root is not None:
                return
            root = a
    try:
        from folio import config

        where = Path(root).resolve() if root is not None else (config.find_root() or Path.cwd())
        if not where.is_dir():
            return
        settings = config.resolve(where, {})
        _early.append(WalkAhead(where, settings["extensions"], settings["exclude"]))
    except Exception:  # noqa: BLE001 - a settings error is cli's to say, once
        return


def take_early(root: Path, extensions, exclude) -> WalkAhead | None:
    """The listing walk_early started, when it lists this root with these settings; else None (a
    mismatched one is stopped)."""
    if not _early:
        return None
    ahead = _early.pop()
    if ahead.args == (root, tuple(extensions), tuple(exclude)):
        return ahead
    ahead.close()
    return None


def close_early() -> None:
    while _early:
        _early.pop().close()


PARSE_AHEAD_BYTES = 8 << 20  # worker processes parse when at least this much is left to read
PARSE_WINDOW = 16  # files read ahead per worker


def _parse_workers() -> int:
    """How many processes parse ahead: FOLIO_PARSE_WORKERS when set (0: none), else one per core
    (up to 4) on a machine with more than one."""
    import os

    env = os.environ.get("FOLIO_PARSE_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores, 4) if cores > 1 else 0


def _worker_init(parent: int) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle, once
    _die_with_parent(parent)


def _die_with_parent(parent: int) -> None:
    """A worker (or the walking child) must not outlive its run. A run killed outright (kill -9, SIGTERM) never shuts
    its pool down, and a worker waiting on the pool's queue would wait forever: it holds the queue's
    write end itself, so the pipe never reports the parent gone. On Linux the kernel kills the worker
    with its parent (PR_SET_PDEATHSIG); everywhere, a daemon thread notices the parent is gone (the
    worker is handed to another parent) within a quarter of a second and ends the process."""
    import os
    import sys
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # the thread below still ends it
    if os.getppid() != parent:  # died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="folio-parent-watch", daemon=True).start()


def read_ahead(root: Path, todo: list[Entry], wants_parse, budget):
    """(entry, bytes or the OSError reading them, sha, parsed or None) per file of `todo`, in order.

    Reads a window of files ahead; a file `wants_parse(entry, sha)` is parsed in a worker process
    meanwhile (parse_bytes at `budget()`), once enough bytes are left to read to repay starting the
    workers: the main process then only plans, embeds and commits. A failing pool falls back to
    parsing in the loop (parsed None)."""
    import os
    from collections import deque

    workers = _parse_workers()
    explicit = "FOLIO_PARSE_WORKERS" in os.environ
    left = sum(e.size for e in todo)
    pool = None
    window: deque = deque()
    it = iter(todo)
    try:
        while True:
            while len(window) < max(1, workers) * PARSE_WINDOW:
                e = next(it, None)
                if e is None:
                    break
                left -= e.size
                try:
                    raw = read_bytes(root, e.path)
                except OSError as err:
                    window.append((e, err, None, None))
                    continue
                sha = sha256(raw)
                job = None
                if workers and wants_parse(e, sha):
                    if pool is None and (explicit or left + len(raw) >= PARSE_AHEAD_BYTES):
                        pool = _pool(workers)
                    if pool is not None:
                        try:
                            job = pool.submit(parse_bytes, raw, budget())
                        except Exception:  # noqa: BLE001 - a broken pool: parse in the loop instead
                            workers, job = 0, None
                window.append((e, raw, sha, job))
            if not window:
                return
            e, raw, sha, job = window.popleft()
            parsed = None
            if job is not None:
                try:
                    parsed = job.result()
                except Exception:  # noqa: BLE001 - a worker died: this file is parsed in the loop
                    parsed = None
            yield e, raw, sha, parsed
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _pool(workers: int):
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    # spawn: never fork a process that may hold threads, and the workers stay this process's
    # children, so their CPU time counts in its rusage (what `time folio index` shows)
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                               initargs=(os.getpid(),))



def sha256(raw: bytes) -> str:
    import hashlib  # here: loading OpenSSL is a few ms a no-op re-index never needs

    return hashlib.sha256(raw).hexdigest()
