"""Work done ahead of a run's plan in other processes: the listing of the tree (a forked child, while
the run opens its store), and the files' bytes, their hash and the parse (the same child for a run
that reads a few files, worker processes for a big one).

Owns those processes (each dies with its run: WalkAhead's child, the parse pool) and parse_bytes,
the part of a file's plan that needs no index: its bytes judged as text, decoded and divided into
sections (Parsed); and Listing, the run's side of the child's listing (taken only when the pass
needs it). Must not touch the store or the server, or print.
"""

from __future__ import annotations

import contextlib
import os

from folio import lifeline

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # the imports stay light: folio.entry imports this module before it forks the walk
    from collections.abc import Callable
    from pathlib import Path

    from folio.sections import Document
    from folio.walk import Entry


class Parsed:
    """One file's bytes, parsed (parse_bytes) at `budget`: why they are not text (`binary`), else the
    decoding warning (None when they decoded cleanly) and the Document (sections.Document); `lex`,
    when a parse worker analysed them too, (its group's lexical segment, start): record i is the
    segment's document start + i (lexical.segments.files_segment; the plan gives them slots)."""

    __slots__ = ("budget", "binary", "warning", "document", "lex")

    def __init__(self, budget: int, binary: str | None, warning: str | None, document: Document | None,
                 lex: dict | None = None):
        self.budget, self.binary, self.warning, self.document, self.lex = budget, binary, warning, document, lex


def parse_bytes(raw: bytes, budget: int) -> Parsed:
    """The part of a file's plan that needs no index, so worker processes can run it ahead of the loop."""
    return _parse(raw, budget)[0]


def _parse(raw: bytes, budget: int) -> tuple[Parsed, str | None]:
    from folio import sections as sec

    binary = sec.binary_reason(raw)
    if binary:
        return Parsed(budget, binary, None, None), None
    text, warn = sec.decode(raw)
    return Parsed(budget, None, warn, sec.parse_document(text, budget)), text


def parse_files(jobs: list[tuple[bytes, int, str]]) -> list[Parsed]:
    """A parse worker's job: parse_bytes of a group of files ((bytes, budget, path) each), and their
    records' lexical analysis, one segment for the group (Parsed.lex): off the run's main thread."""
    from folio.lexical.segments import files_segment

    got = [(*_parse(raw, budget), path) for raw, budget, path in jobs]
    have = [(p, text, path) for p, text, path in got if p.document is not None and p.document.records]
    seg, starts = files_segment([(p.document, text, path) for p, text, path in have])
    for (p, _text, _path), start in zip(have, starts, strict=True):
        p.lex = (seg, start)
    return [p for p, _text, _path in got]


class WalkAhead:
    """The walk, run in a forked child while the caller does other work (`folio index` imports click
    and the indexer, opens its store and reads the stamps meanwhile): on two cores a no-op re-index
    then costs about the longer of the two, not their sum. `result()` gives what `walk` gives, each
    entry a plain (path, size, mtime_ns) tuple (equal to its Entry), in the order listed (sorted
    where the child could not list: the caller must not rely on either); wherever the child
    cannot give it (no fork, the child failed or was killed, its answer is damaged) the walk runs
    again here, so an error is raised as `walk` raises it.

    The child first sends what it lists (root, extensions, exclude), then (summary) how many files it
    listed, their digest and the warnings, and the listing itself only when asked (result). `early`
    forks before even the settings are read (folio.entry): the child finds them, and the caller
    keeps the listing only when they are the ones it resolves itself (`lists`).

    The caller lists too once it has nothing else to do: waiting for the summary, it sets a byte of
    shared memory, and the child hands it the top half of its stack of directories still to list
    (walk.Walker.run), again each time it asks, until the child's own stack is done. Each side
    keeps its entries; their counts and digests add up. A symlink met on either side after a hand-
    over is settled by the caller, with the child's state (visited directories, links) sent over.

    A child that sent its listing stays on: it imports the parser, and parses the files the caller
    names (parse_ahead, parsed) while the caller imports numpy; the caller kills it when it has
    nothing for it (close), and a thread waits for its end (no `<defunct>` child while the run goes
    on). Whatever it is doing, it ends with its parent: the kernel ends it (PR_SET_PDEATHSIG, set
    first thing after the fork), and where the platform has no such thing, a thread notices within
    a tenth of a second (lifeline.watch_parent)."""

    def __init__(self, root: Path, extensions=(".md",), exclude=(), *, opts: dict | None = None):
        self.args = (str(root), tuple(extensions), tuple(exclude)) if opts is None else None
        self.pid = self.fd = self.file = self.ask = None
        self.headed = False  # the child's first message (what it lists) has been read
        self.summed = None  # its second (how many files, their digest, the warnings), once read
        self.want = None  # the shared byte the caller sets to ask for directories (Share)
        self.mine = None  # the caller's own part of the walk (walk.Walker), once it took one
        self.merged = None  # the whole listing, where the caller settled the symlinks itself
        self.listed = False  # the child sent its listing, and stays on for parse_ahead
        self.parsing = False  # parse_ahead asked it for files, parsed() not read yet
        # Only from a process with one thread (`folio index`): a child forked from a threaded one
        # (`folio mcp`'s index tool) may inherit a lock another thread held, and never answer.
        if not hasattr(os, "fork") or os.environ.get("FOLIO_WALK_AHEAD") == "0" or _threaded():
            return
        _reap()
        try:
            r, w = os.pipe()
            ask_r, ask_w = os.pipe()  # the caller asks for the listing itself through it (see result)
        except OSError:
            return
        if os.environ.get("FOLIO_WALK_SHARE") != "0":
            import mmap

            self.want = mmap.mmap(-1, 1)  # anonymous and shared: the child sees the caller's writes
        parent = os.getpid()
        lifeline.before_fork()
        try:
            pid = os.fork()
        except OSError:
            for fd in (r, w, ask_r, ask_w):
                os.close(fd)
            return
        if pid == 0:  # the child: list, send, end; never returns into the caller's code
            code = 1
            try:
                lifeline.die_with_parent(parent, watch=False)  # first: in whatever phase, it ends with its run,
                lifeline.watch_parent(parent, 0.1)  # even stopped or starved of CPU (the kernel ends it)
                os.close(r)
                os.close(ask_w)
                _child_signals()
                args = self.args if opts is None else _args_of(opts)
                if args is not None:
                    with os.fdopen(w, "wb") as f:
                        _send(f, args)
                        from folio import walk

                        wk = walk.Walker(args[0], args[1], args[2], plain=True, alive=parent)
                        share = Share(self.want, f) if self.want is not None else None
                        wk.run(wk.top(), share)
                        if share is None or not share.gave:
                            entries, warnings = wk.finish(sort=False)
                            settled = True
                        else:  # the caller lists part of the tree: symlinks are settled there
                            entries, warnings, settled = wk.entries, wk.warnings, wk.settled()
                        _send(f, (len(entries), digest(entries), warnings, settled))
                        # the listing only when asked (b"2": with the state symlinks need): a no-op
                        # run needs the numbers alone, and closes its end (no byte) once it has them
                        ask = os.read(ask_r, 1)
                        if ask:
                            _send(f, (entries, warnings, wk.state() if ask == b"2" else None))
                            _parse_asked(f, ask_r)
                    code = 0
            finally:
                os._exit(code)
        os.close(w)
        os.close(ask_r)
        self.pid, self.fd, self.ask = pid, r, ask_w

    @classmethod
    def early(cls, opts: dict) -> WalkAhead:
        return cls(None, opts=opts)

    def lists(self, root: Path, extensions, exclude) -> bool:
        """Whether the child lists this root with these settings (waits only for its first message)."""
        want = (str(root), tuple(extensions), tuple(exclude))
        if self.pid is not None and not self.headed:
            got = self._read()
            self.headed = True
            if got != self.args and self.args is not None:  # a forked child always says what it was given
                got = None
            self.args = tuple(got) if isinstance(got, tuple) else None
        if self.args != want:
            self.close()
            self.args = want
            return False
        return self.pid is not None

    def summary(self) -> tuple[int, int, list[str]] | None:
        """(how many files the tree lists, their digest, the walk's warnings) once both sides have
        listed theirs, before the child sends its listing; None where it cannot say. The digest is
        digest(entries): equal to digest(s) of a set s of the same size, the listing is s."""
        if self.summed is None and self.pid is not None and self.args is not None and self.lists(*self.args):
            got = self._help()
            ok = (isinstance(got, tuple) and len(got) == 4 and isinstance(got[0], int) and isinstance(got[1], int)
                  and isinstance(got[2], list))
            self.summed = False
            if not ok:
                self.close()
            elif self.mine is None or (got[3] and self.mine.settled()):
                mine = self.mine.entries if self.mine is not None else []
                warnings = got[2] + self.mine.warnings if self.mine is not None else got[2]
                self.summed = (got[0] + len(mine), got[1] + digest(mine), warnings)
            else:  # a symlink to settle: with the child's listing and state, here
                child = self._listing(b"2")
                if child is not None and child[2] is not None:
                    self.mine.merge(*child)
                    self.merged = self.mine.finish(sort=False)
                    entries, warnings = self.merged
                    self.summed = (len(entries), digest(entries), warnings)
        return self.summed or None

    def _help(self):
        """Read the child's summary, listing the directories it hands over meanwhile (each time the
        caller has none left, it asks again through the shared byte)."""
        want = self.want
        while True:
            if want is not None:
                want[0] = 1
            got = self._read()
            if not (isinstance(got, tuple) and len(got) == 2 and got[0] == "work" and isinstance(got[1], list)):
                if want is not None:
                    want[0] = 0
                return got
            if self.mine is None:
                from folio.walk import Walker

                self.mine = Walker(self.args[0], self.args[1], self.args[2], plain=True)
            self.mine.run(got[1])

    def result(self) -> tuple[list[Entry], list[str]]:
        from folio.walk import walk

        got = self._take() if self.pid is not None and self.args is not None else None
        return got if got is not None else walk(*self.args)

    def _read(self, pickled: bool = False):
        try:
            if self.file is None:
                self.file = os.fdopen(self.fd, "rb")
                self.fd = None
            head = self.file.read(8)
            n = int.from_bytes(head, "little")
            data = self.file.read(n) if len(head) == 8 else b""
            if len(data) != n or not n:
                return None
            if pickled:  # the parse: Parsed objects, from this run's own forked child
                import pickle

                return pickle.loads(data)  # noqa: S301 - written by this process's child
            import marshal

            return marshal.loads(data)
        except Exception:  # noqa: BLE001 - a damaged answer is no answer: the caller does the work itself
            return None

    def _take(self):
        if not self.lists(*self.args) or self.summary() is None:
            return None
        if self.merged is not None:
            return self.merged
        child = self._listing(b"1")
        if child is None:
            return None
        if self.mine is None:
            return child[0], child[1]
        return child[0] + self.mine.entries, child[1] + self.mine.warnings

    def _listing(self, ask: bytes):
        """The child's (entries, warnings, state or None), asked for with `ask`; None where it cannot."""
        try:
            os.write(self.ask, ask)
        except OSError:
            return None
        got = self._read()  # whole or None: the message says its length
        if not (isinstance(got, tuple) and len(got) == 3 and isinstance(got[0], list) and isinstance(got[1], list)):
            self.close()
            return None
        self.listed = True
        return got

    def parse_ahead(self, root: Path, paths: list[str], budget: int) -> bool:
        """Ask the child, which stays on after it sent its listing (importing the parser meanwhile), to
        read, hash and parse these files while the run goes on; parsed() takes its answer. False where
        it cannot (the caller then parses them itself)."""
        if self.pid is None or self.ask is None or self.file is None or not self.listed or self.parsing:
            return False
        import marshal

        data = marshal.dumps((str(root), int(budget), list(paths)))
        data = len(data).to_bytes(8, "little") + data
        try:
            while data:
                data = data[os.write(self.ask, data):]
        except OSError:
            self.close()
            return False
        self.parsing = True
        return True

    def parsed(self) -> dict[str, tuple[str, Parsed]]:
        """{path: (sha256 of the bytes parsed, Parsed)} for parse_ahead's files; {} where the child sent
        nothing usable. The child is let go of."""
        if not self.parsing:
            return {}
        self.parsing = False
        got = self._read(pickled=True)
        self.close(kill=False)
        out = {}
        if isinstance(got, list):
            for item in got:
                if (isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], str)
                        and isinstance(item[1], str) and isinstance(item[2], Parsed)):
                    out[item[0]] = (item[1], item[2])
        return out

    def close(self, kill: bool = True) -> None:
        """Stop a child whose answer is no longer wanted (the run failed before it needed it, or
        has what it needs from the summary); kill=False: let go of a child that has sent its answer
        (it ends by itself). Either way it is reaped later (_reap): the run never waits for its end."""
        for f in (self.file, self.fd, self.ask):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close() if not isinstance(f, int) else os.close(f)
        self.file = self.fd = self.ask = None
        self.parsing = False
        if self.pid is not None:
            if kill:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, 9)
            _reap_later(self.pid)
            self.pid = None


_unreaped: list[int] = []  # children let go of and not waited for yet (where no thread could wait)


def _reap_later(pid: int) -> None:
    """Wait for a child let go of in a thread of its own (`_thread`: no threading import), so it never
    stays `<defunct>` while the run goes on, and the run never waits for its end."""
    import _thread

    def wait() -> None:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)

    try:
        _thread.start_new_thread(wait, ())
    except RuntimeError:  # no thread to be had: reaped at the end of the run (_reap)
        _unreaped.append(pid)


class Share:
    """The walking child's side of a shared walk (walk.Walker.run): `want`, the byte the caller
    sets when it has no directory left to list, and give(stack), which sends it the top half of the
    child's stack and clears the byte (the caller sets it again only once it has listed those)."""

    __slots__ = ("want", "file", "gave")

    def __init__(self, want, file):
        self.want, self.file, self.gave = want, file, False

    def give(self, stack: list) -> None:
        half = len(stack) // 2
        items = stack[half:]
        del stack[half:]
        self.want[0] = 0
        self.gave = True
        _send(self.file, ("work", items))


def _parse_asked(f, ask_r: int) -> None:
    """The walking child, once it sent its listing: a run that found a few files changed parses them
    here (parse_ahead) while it imports numpy itself; on two cores the imports overlap. The parser
    (markdown-it, yaml) is imported while the run works out which files those are. A run with
    nothing for it closes the pipe or kills the child."""
    from folio import sections

    sections.warm()
    head = _read_exactly(ask_r, 8)
    n = int.from_bytes(head, "little") if len(head) == 8 else 0
    data = _read_exactly(ask_r, n) if n else b""
    if not n or len(data) != n:
        return
    import marshal

    root, budget, paths = marshal.loads(data)
    from folio.walk import read_bytes

    out = []
    for path in paths:
        try:
            raw = read_bytes(root, path)
        except OSError:
            continue  # the run reads it itself, and says what is wrong with it
        out.append((path, sha256(raw), parse_bytes(raw, budget)))
    import pickle

    data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(len(data).to_bytes(8, "little"))
    f.write(data)
    f.flush()


def _read_exactly(fd: int, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def _reap() -> None:
    """Reap the killed children that have ended (a long-lived process, `folio mcp`, forks one per run)."""
    for pid in list(_unreaped):
        try:
            done = os.waitpid(pid, os.WNOHANG)[0]
        except ChildProcessError:
            done = pid
        except OSError:
            continue
        if done:
            _unreaped.remove(pid)


def _threaded() -> bool:
    import sys

    threading = sys.modules.get("threading")  # not imported: one thread
    return threading is not None and threading.active_count() > 1


def _child_signals() -> None:
    """The walking child ends on Ctrl-C and SIGTERM without a word: the parent's handlers print for the
    parent. Where the signal module was never loaded (the child folio.entry forks first thing) no
    handler but Python's own was set, and Ctrl-C's KeyboardInterrupt ends the child just as well.
    (It ends with its parent in every phase: the kernel's PR_SET_PDEATHSIG from its start, walk's
    `alive` at each directory, and a watching thread within a tenth of a second.)"""
    import sys

    signal = sys.modules.get("signal")
    if signal is not None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def digest(entries) -> int:
    """An order-free digest of (path, size, mtime_ns) tuples: the sum of their hashes. The walking
    child is forked, so its str hashes are its parent's (one hash secret): a listing and a set of
    the same size with the same digest are the same files, but for a 2**-64 chance per change."""
    return sum(map(hash, entries))


def _send(f, obj) -> None:
    import marshal

    data = marshal.dumps(obj)
    f.write(len(data).to_bytes(8, "little"))
    f.write(data)
    f.flush()


def _args_of(opts: dict | None) -> tuple | None:
    """(root, extensions, exclude) of `folio index` with these options (index_command.plain) as
    index_command.index will resolve them, or None where it cannot tell (a settings error is the
    run's to say, once)."""
    if opts is None:
        return None
    try:
        from pathlib import Path

        from folio import config

        root = opts["root"]
        where = root.resolve() if root is not None else (config.find_root() or Path.cwd())
        if not where.is_dir():
            return None
        settings = config.resolve(where, {})
        return str(where), tuple(settings["extensions"]), tuple(settings["exclude"])
    except Exception:  # noqa: BLE001 - a settings error is the run's to say, once
        return None


_early: list[WalkAhead] = []


def walk_early(opts: dict | None) -> None:
    """Start the listing of `folio index` with these options (index_command.plain; None: argv click
    must read, nothing is started) before the indexer is imported (folio.entry). A guess only: the
    run takes it (take_early) when the root and settings it resolves are the child's, else stops it
    and lists again, so a wrong guess costs time, never a wrong listing."""
    if opts is not None:
        _early.append(WalkAhead.early(opts))


def take_early(root: Path, extensions, exclude) -> WalkAhead | None:
    """The listing walk_early started, when it lists this root with these settings; else None."""
    if not _early:
        return None
    ahead = _early.pop()
    return ahead if ahead.lists(root, extensions, exclude) else None


def close_early() -> None:
    while _early:
        _early.pop().close()
    _reap()


PARSE_AHEAD_BYTES = 8 << 20  # worker processes parse when at least this much is left to read
PARSE_WINDOW = 16  # files read ahead per worker
# files (bytes) a worker parses as one job: per file, a job cost more in array work, pickling and merges
PARSE_GROUP_FILES, PARSE_GROUP_BYTES = 8, 1 << 20


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
    lifeline.die_with_parent(parent)


def read_ahead(root: Path, todo: list[Entry], wants_parse, budget, early=None):
    """(entry, bytes or the OSError reading them, sha, parsed or None) per file of `todo`, in order.

    Reads a window of files ahead; a file `wants_parse(entry, sha)` is parsed in a worker process
    meanwhile (parse_files at `budget()`, with the next few such files: _Group), once enough bytes
    are left to read to repay starting the workers: the main process then only plans, embeds and
    commits. A failing pool falls back to parsing in the loop (parsed None). `early(entry, sha)`:
    the Parsed of those bytes where someone parsed them already (the walking child), else None."""
    import os
    from collections import deque

    from folio.walk import read_bytes

    workers = _parse_workers()
    explicit = "FOLIO_PARSE_WORKERS" in os.environ
    left = sum(e.size for e in todo)
    pool = None
    group = None  # the files read for the next job, not sent yet
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
                if early is not None and wants_parse(e, sha):
                    job = early(e, sha)
                elif workers and wants_parse(e, sha):
                    if pool is None and (explicit or left + len(raw) >= PARSE_AHEAD_BYTES):
                        pool = _pool(workers)
                    if pool is not None:
                        group = group or _Group()
                        job = group.add(raw, budget(), e.path)
                        if len(group.jobs) >= PARSE_GROUP_FILES or group.size >= PARSE_GROUP_BYTES:
                            workers = group.send(pool, workers)
                            group = None
                window.append((e, raw, sha, job))
            if not window:
                return
            e, raw, sha, job = window.popleft()
            parsed = None
            if isinstance(job, Parsed):
                parsed = job
            elif job is not None:
                g, i = job
                if g is group:  # the next file to plan waits for its group: send it as it is
                    workers = g.send(pool, workers)
                    group = None
                parsed = g.result(i)
            yield e, raw, sha, parsed
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class _Group:
    """Files read ahead that one parse worker parses as one job (parse_files), sent once full
    (PARSE_GROUP_*) or once the loop needs the first of them; `send` returns the workers left to
    use (0 when the pool is broken: its files, and those after it, parse in the loop)."""

    def __init__(self):
        self.jobs, self.size, self.future = [], 0, None

    def add(self, raw: bytes, budget: int, path: str) -> tuple[_Group, int]:
        self.jobs.append((raw, budget, path))
        self.size += len(raw)
        return self, len(self.jobs) - 1

    def send(self, pool, workers: int) -> int:
        try:
            self.future, self.jobs = pool.submit(parse_files, self.jobs), None
        except Exception:  # noqa: BLE001 - a broken pool: parse in the loop instead
            return 0
        return workers

    def result(self, i: int) -> Parsed | None:
        try:
            return self.future.result()[i] if self.future is not None else None
        except Exception:  # noqa: BLE001 - a worker died: these files are parsed in the loop
            return None


def _pool(workers: int):
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    # spawn: never fork a process that may hold threads, and the workers stay this process's
    # children, so their CPU time counts in its rusage (what `time folio index` shows)
    lifeline.workers_die_with_us()
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                               initargs=(os.getpid(),))


def sha256(raw: bytes) -> str:
    import hashlib  # here: loading OpenSSL is a few ms a no-op re-index never needs

    return hashlib.sha256(raw).hexdigest()


# A run reading at most this many files (and bytes) has them parsed by the walking child while it
# imports numpy itself (Listing.parse_ahead); more go through read_ahead's worker pool or the loop.
CHILD_PARSE_FILES = 64
CHILD_PARSE_BYTES = 4 << 20


class Listing:
    """The tree's listing (walk's entries and warnings), taken from the walking child only when the
    pass needs it: after the store's stamps are read and the server asked for its fingerprint, so
    the child lists while the run does those."""

    def __init__(self, ahead: WalkAhead):
        self.ahead = ahead
        self.entries: list[Entry] | None = None
        self.warnings: list[str] = []

    def __call__(self) -> list[Entry]:
        if self.entries is None:
            from folio import timing

            timing.lap("stamps")
            self.entries, self.warnings = self.ahead.result()
            timing.lap("walk")
        return self.entries

    def unchanged(self, clean, held: int) -> bool:
        """Whether the tree lists exactly the files of `clean` (store.Clean) and the index holds no
        other (`held` files in all): told by the child's count and digest, without its listing."""
        if self.entries is not None:
            return False
        from folio import timing

        timing.lap("stamps")
        got = self.ahead.summary()
        timing.lap("walk")
        if got is None or not (got[0] == len(clean) == held) or got[1] != clean.digest():
            return False
        self.warnings = got[2]
        self.ahead.close()  # its listing is not needed
        return True

    def parse_ahead(self, root: Path, todo: list[Entry], budget: int, warm: Callable[[], None]):
        """For a run with a few files to read (CHILD_PARSE_*): the walking child, which stays on after
        its listing, reads and parses them (WalkAhead.parse_ahead) while `warm` imports here what plans
        them. Returns read_ahead's `early` (the child's Parsed for the same bytes, else None), or None
        with the child stopped (nothing to read, or more than one process should parse)."""
        ahead = self.ahead
        if (not todo or len(todo) > CHILD_PARSE_FILES or sum(e.size for e in todo) > CHILD_PARSE_BYTES
                or not ahead.parse_ahead(root, [e.path for e in todo], budget)):
            ahead.close()
            return None
        got = None

        def early(e: Entry, sha: str):
            nonlocal got
            if got is None:
                warm()  # the first file to parse: import while the child finishes
                got = ahead.parsed()
            hit = got.get(e.path)
            return hit[1] if hit is not None and hit[0] == sha else None

        return early
