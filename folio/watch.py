"""A live index: the corpus roots followed as their files are written, each burst of changes one
incremental `folio index` run (`folio mcp` in the background, `folio index --watch` in the foreground).

Changes come from the platform's file-system events (watchfiles: inotify, FSEvents, ...), or, where
there are none (a network filesystem, an exhausted inotify limit, `watch: poll`), from listing the
tree every `watch_interval` seconds as a no-op `folio index` lists it and comparing the stats. A
burst (a `git checkout` of thousands of files) is gathered until QUIET_MS pass without a change,
then indexed by one run of indexer.run, the entry `folio index` uses (same write lock: it waits for
another writer; same rules, except that the files events named are read whatever their stat says:
an edit that keeps the size and puts the old mtime back is seen), in two passes under that one lock,
store and listing: the words first (no server: the lexical plane answers at once), then the
vectors (not when the server is known down: a connection attempt between the passes). They share
a burst.Burst: the vectors pass takes the documents the words pass parsed, and of a file whose
bytes are as the words pass left them writes only the vectors its records wait for and the records
the server's token counts divide otherwise (pipeline.Indexer._same_bytes). A vectors pass that
commits while newer changes wait stops after its commit (Yielded; what it committed stays) so
those reach the lexical plane without waiting for it; the next burst embeds the rest.

A vectors pass that found nothing listening at the endpoint (a server not started yet, or killed),
or a server busy past the retries (429s, or still loading its model past the wait), leaves sections
waiting for vectors: the runner then looks for the server now and then while it has nothing else
to do (a connection attempt, PROBE_FIRST seconds after, doubling to PROBE_LAST, reset once a run
reaches it) and, once something listens there, runs the same catch-up a burst would (a `retry`
Outcome), with no file changed; a retry that fails as the run before it did prints nothing. Meanwhile a burst's vectors pass is not run when
one connection attempt finds nothing listening still (it would only pay its connection retries).

Owns choosing events or polling, which changes count, the bursts and their two passes, and the
threads that run them. Must not print: each burst's outcome goes to the caller's callback
(index_command prints it, mcp logs it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from folio.config import INDEX_DIR
from folio.errors import FolioError

QUIET_MS = 100  # a burst ends once this long passes without a change
LONGEST_MS = 10_000  # ... or after this long, whatever keeps coming
# File systems that give no reliable events to a watcher on this machine.
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph",
                        "glusterfs", "lustre", "gpfs", "beegfs", "davfs", "fuse.sshfs", "fuse.rclone",
                        "fuse.s3fs", "fuse.gcsfuse", "fuse.glusterfs", "fuse.cephfs"})
TRIGGERS = frozenset({".gitignore", ".ignore", "folio.yaml"})  # names that change what is listed
PROBE_FIRST = 2.0  # seconds from a run that found no server to the first look for it
PROBE_LAST = 60.0  # the longest between two looks (each look that finds none doubles the wait)
PROBE_CONNECT = 2.0  # the most one look waits for its connection
HELD_EVERY = 1.0  # seconds between tries at an index another folio writes, when several roots are followed


class Yielded(BaseException):
    """A vectors pass stopped after a commit because newer changes wait (what it committed stays).
    A BaseException, as KeyboardInterrupt: the run unwinds exactly as an interrupted `folio index`."""


@dataclass
class Outcome:
    """One burst in one corpus, for the caller to show: the files the events named (root-relative),
    the two passes' reports, and why it stopped short (an error, or newer changes)."""
    root: Path
    paths: list[str]
    words: object = None  # report.Report of the lexical pass
    vectors: object = None  # report.Report of the vectors pass (None: not run, or stopped)
    error: str | None = None
    yielded: bool = False
    seconds: float = 0.0
    first: bool = False  # the catch-up run when following starts
    retry: bool = False  # the catch-up run of a server found listening again (no file changed)
    down: str | None = None  # the endpoint nothing listened at: the vectors pass was not run
    again: bool = False  # a retry that failed as the run before it did: nothing new to say
    held: bool = False  # another folio writes this root's index: the burst waits for it (Follower.held)

    @property
    def quiet(self) -> bool:
        """Nothing changed, nothing embedded, nothing went wrong: not worth a line in a log."""
        if self.held:  # said once by the follower when the root was first held
            return True
        w, v = self.words, self.vectors
        changed = w is not None and (w.new or w.changed or w.deleted or w.renamed)
        if self.again and not changed:
            return True
        if v is None:  # not run: nothing listened at the endpoint (sections wait, and the runner looks for it)
            return not changed and not self.error and not self.yielded and self.down is not None
        return not changed and not self.error and not self.yielded and not v.embedded and not v.error and not v.waiting


@dataclass
class _Pending:
    """Changes gathered and not yet indexed, per root (root-relative paths; "" for the tree itself)."""
    paths: dict[Path, set[str]] = field(default_factory=dict)
    last: float = 0.0  # time.monotonic() of the latest change


@dataclass
class _Down:
    """A root whose last vectors pass found nothing listening at `endpoint` (its `endpoint` setting was
    `configured` then): sections wait for vectors; the runner looks for the server at `next`."""
    endpoint: str
    configured: str
    every: float = PROBE_FIRST
    next: float = 0.0
    said: str | None = None  # what the last run that failed said (a retry failing after it says nothing)


def listening(endpoint: str, timeout: float = PROBE_CONNECT) -> bool:
    """Whether something accepts a connection at the endpoint's host and port: one connection opened
    and closed, nothing sent (what answers there is the next run's to find out)."""
    from urllib.parse import urlsplit

    from folio import wire

    try:
        parts = urlsplit(endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        sock = wire.connect_socket(parts.hostname or "", port, timeout)
    except (OSError, ValueError):
        return False
    sock.close()
    return True


def filesystem(path: Path) -> str | None:
    """The type of the filesystem `path` lives on (Linux: /proc/self/mounts), or None when unknown."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [line.split()[1:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for point, fstype in mounts:
        point = point.replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def how(root: Path, setting: str) -> tuple[str, str | None]:
    """(events | poll, why polling when it is)."""
    if setting == "poll":
        return "poll", "watch: poll"
    if setting == "events":
        return "events", None
    kind = filesystem(root)
    if kind in NETWORK_FS:
        return "poll", f"{root} is on a network filesystem ({kind}), which sends no events"
    return "events", None


class Follower:
    """Follows `roots` and indexes each burst (threads: a listener per way of listening, a runner).

    `on_outcome(Outcome)` is called from the runner after each burst; `say(sentence)` for what the
    follower itself has to say (polling, waiting for another writer). `keep_space`: runs keep the
    endpoint and model the index recorded (`folio mcp`, as its index tool). `catch_up`: a burst of
    the whole tree first (files written while nothing followed them)."""

    def __init__(self, roots: list[Path], *, on_outcome: Callable[[Outcome], None],
                 say: Callable[[str], None] = lambda _s: None, keep_space: bool = False, catch_up: bool = True,
                 settings_of: Callable | None = None):
        from folio import config

        self.roots = [Path(r) for r in roots]
        self.on_outcome = on_outcome
        self.say = say
        self.keep_space = keep_space
        self.settings_of = settings_of or (lambda root: config.resolve(root, {}))
        self.stopping = threading.Event()
        self.cond = threading.Condition()
        self.pending = _Pending()
        self.threads: list[threading.Thread] = []
        self.modes: dict[Path, str] = {}
        if catch_up:
            self.pending.paths = {root: {""} for root in self.roots}
            self.pending.last = time.monotonic() - QUIET_MS / 1000
        self.first = set(self.roots) if catch_up else set()
        self.busy = False  # a burst is being indexed
        self.extensions: dict[Path, tuple[str, ...]] = {}  # per root, read again at each burst (folio.yaml may change)
        self.down: dict[Path, _Down] = {}  # roots whose server did not answer (the runner's alone)
        self.retrying: set[Path] = set()  # roots queued because their server listens again
        # Several roots: a root whose index another folio writes is not waited for (the others' changes
        # would wait with it); its changes are kept here and tried again every HELD_EVERY s.
        self.held: dict[Path, tuple[set[str], float]] = {}

    # -- listening ---------------------------------------------------------------------------

    def start(self, runner: bool = True) -> None:
        """Start listening (and, unless the caller runs them itself: `run`, indexing) in daemon threads."""
        by_way: dict[str, list[Path]] = {"events": [], "poll": []}
        for root in self.roots:
            way, why = how(root, self._setting(root, "watch", "auto"))
            if way == "events":
                try:
                    import watchfiles  # noqa: F401 - a dependency; missing only in a broken install
                except ImportError:
                    way, why = "poll", "the watchfiles package is missing (install folio again)"
            if why:
                self.say(f"following {root} by listing it every {self._setting(root, 'watch_interval', 2)} s: {why}")
            self.modes[root] = way
            by_way[way].append(root)
        if by_way["events"]:
            self._thread(self._events, by_way["events"])
        for root in by_way["poll"]:
            self._thread(self._poll, root)
        if runner:
            self._thread(self.run)

    def _setting(self, root: Path, key: str, default):
        """One setting of `root`, or `default` while its folio.yaml cannot be read (saved half-written,
        being edited): following goes on, and the next burst's run says what is wrong with the file."""
        try:
            return self.settings_of(root)[key]
        except FolioError:
            return default

    def _thread(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name=f"folio-watch-{target.__name__}")
        t.start()
        self.threads.append(t)

    def stop(self) -> None:
        self.stopping.set()
        with self.cond:
            self.cond.notify_all()

    def _add(self, root: Path, rel: str) -> None:
        self._add_all([(root, rel)])

    def _add_all(self, placed: list[tuple[Path, str]], quiet: bool = False) -> None:
        """Queue changes, together; `quiet`: their source waited QUIET_MS without a change already
        (watchfiles yields a batch once `step` passes without one): the burst need not wait again."""
        if not placed:
            return
        with self.cond:
            for root, rel in placed:
                self.pending.paths.setdefault(root, set()).add(rel)
            self.pending.last = time.monotonic() - (QUIET_MS / 1000 if quiet else 0)
            self.cond.notify_all()

    def _root_of(self, path: str) -> tuple[Path, str] | None:
        for root in sorted(self.roots, key=lambda r: -len(r.parts)):
            rel = os.path.relpath(path, root)
            if not rel.startswith(".."):
                return root, ("" if rel == "." else rel.replace(os.sep, "/"))
        return None

    def wanted(self, path: str, deleted: bool = False) -> tuple[Path, str] | None:
        """The (root, relative path) of a change worth a run: a file with an indexed extension, a
        directory (a folder renamed or removed takes its files along), or a file that changes what
        is listed (TRIGGERS); never anything under a hidden name (`.git`, `.folio`: folio's own writes)."""
        placed = self._root_of(path)
        if placed is None:
            return None
        root, rel = placed
        parts = rel.split("/") if rel else []
        if parts and parts[-1] in TRIGGERS:
            return placed
        if rel == INDEX_DIR and deleted:  # the index itself removed (`rm -rf .folio`, `git clean -x`): build it anew
            return root, ""
        if any(p.startswith(".") for p in parts):
            return None
        exts = self.extensions.get(root)
        if exts is None:  # events come by the thousand: the settings are not read for each
            try:
                exts = self.extensions[root] = tuple(e.lower() for e in self.settings_of(root)["extensions"])
            except FolioError:  # a folio.yaml being edited: the burst's run says what is wrong with it
                return placed
        if rel.lower().endswith(exts):
            return placed
        if deleted:
            return placed if not os.path.splitext(rel)[1] else None  # a folder, most likely
        return placed if os.path.isdir(path) else None

    def _events(self, roots: list[Path]) -> None:
        import watchfiles

        def keep(change, path: str) -> bool:
            return self.wanted(path, deleted=change == watchfiles.Change.deleted) is not None

        try:
            for changes in watchfiles.watch(*roots, watch_filter=keep, debounce=LONGEST_MS, step=QUIET_MS,
                                            stop_event=self.stopping, rust_timeout=500, raise_interrupt=False,
                                            force_polling=False, ignore_permission_denied=True):
                placed = [self.wanted(path, deleted=change == watchfiles.Change.deleted) for change, path in changes]
                self._add_all([p for p in placed if p is not None], quiet=True)
        except Exception as e:  # e.g. the inotify watch limit: follow by listing instead
            if self.stopping.is_set():
                return
            for root in roots:
                self.say(f"following {root} by listing it every {self._setting(root, 'watch_interval', 2)} s: "
                         f"file-system events failed ({e})")
                self.modes[root] = "poll"
                self._thread(self._poll, root)

    def _poll(self, root: Path) -> None:
        """Every `watch_interval` seconds, list the tree as a no-op `folio index` does and compare each
        file's (size, mtime): the listing alone, no store, no lock, no server."""
        interval = 2
        before = self._listing(root)
        while True:
            interval = self._setting(root, "watch_interval", interval)
            if self.stopping.wait(interval):
                return
            now = self._listing(root)
            if now is None or before is None:
                if now is not None:  # listed again (folio.yaml mended, the root back): what changed meanwhile
                    self._add(root, "")
                before = now
                continue
            changed = {p for p in now.keys() ^ before.keys()} | {p for p in now.keys() & before.keys()
                                                                  if now[p] != before[p]}
            if now[""]:
                changed.discard("")  # the index made again (by the run its removal started): nothing to do
            for rel in sorted(changed):
                self._add(root, rel)
            before = now

    def _listing(self, root: Path) -> dict | None:
        from folio.walk import walk

        try:
            settings = self.settings_of(root)
            entries, _warnings = walk(root, settings["extensions"], settings["exclude"], plain=True, sort=False)
        except (FolioError, OSError):  # folio.yaml not valid, the root gone: listed again next time
            return None
        listing = {e[0]: (e[1], e[2]) for e in entries}
        listing[""] = os.path.lexists(root / INDEX_DIR / "index.db")  # the index removed: build it anew
        return listing

    # -- indexing ----------------------------------------------------------------------------

    def run(self) -> None:
        """Index each burst once it has been quiet for QUIET_MS (or gathered for LONGEST_MS), until stopped."""
        while not self.stopping.is_set():
            burst = self._next_burst()
            if burst is None:
                return
            for root, paths in burst.items():
                if self.stopping.is_set():
                    return
                self._burst(root, paths)

    def settle(self) -> None:
        """Index the catch-up burst now (the whole tree, with whatever the listeners have queued
        since they started), without waiting for the tree to be quiet: the caller then says it
        watches, and `run` has only what changes after."""
        with self.cond:
            burst = {root: self.pending.paths.pop(root) for root in list(self.pending.paths) if root in self.first}
        for root, paths in burst.items():
            self._burst(root, paths)

    def _burst(self, root: Path, paths: set[str]) -> None:
        """Index one root's burst, then say its outcome. `busy` while it runs: it stays set when the
        burst is cut short (Ctrl-C), and `folio index --watch` says so; cleared before the outcome is
        said, so a Ctrl-C once its line is out cuts nothing short."""
        self.busy = True
        outcome = self.index(root, paths)
        self.busy = False
        self.on_outcome(outcome)

    def _next_burst(self) -> dict[Path, set[str]] | None:
        while True:
            with self.cond:
                while True:
                    if self.stopping.is_set():
                        return None
                    if self.pending.paths:
                        quiet = time.monotonic() - self.pending.last
                        if quiet >= QUIET_MS / 1000:
                            burst, self.pending = self.pending.paths, _Pending()
                            return burst
                        self.cond.wait(QUIET_MS / 1000 - quiet)
                    else:
                        due = min([d.next for d in self.down.values()] + [t for _p, t in self.held.values()],
                                  default=None)
                        if due is not None and due <= time.monotonic():
                            break
                        self.cond.wait(1.0 if due is None else min(1.0, due - time.monotonic()))
            self._look()  # outside the lock: the listeners go on queueing changes meanwhile

    def _look(self) -> None:
        """Look for the servers due a look: one found listening (or another endpoint configured since)
        queues a catch-up run of its root; none found, the next look waits twice as long."""
        now = time.monotonic()
        for root, (paths, due) in list(self.held.items()):
            if due <= now:
                self.held[root] = (paths, now + HELD_EVERY)
                for rel in paths:
                    self._add(root, rel)
        for root, d in list(self.down.items()):
            if d.next > now or self.stopping.is_set():
                continue
            if self._setting(root, "endpoint", d.configured) != d.configured or listening(d.endpoint):
                d.next = now + d.every  # the run decides: answered (forgotten), or not (looked for again)
                self.retrying.add(root)
                self._add(root, "")
            else:
                d.every = min(d.every * 2, PROBE_LAST)
                d.next = time.monotonic() + d.every

    def _known_down(self, root: Path, settings) -> str | None:
        """The endpoint of `root` when its last run found nothing listening there and one connection
        attempt finds nothing still (same `endpoint` setting): the vectors pass would only pay for its
        connection retries. None: not known, or something listens there now (the pass finds out what)."""
        d = self.down.get(root)
        if d is None or settings["endpoint"] != d.configured or listening(d.endpoint):
            return None
        return d.endpoint

    def _reached(self, root: Path, settings, rep, retry: bool) -> bool:
        """After a vectors pass: a server found not listening, or busy past the retries, is looked for
        (asked) again, from PROBE_FIRST s on, doubling each time a retry did not reach it; one reached is
        forgotten. True: a retry that failed after a run that failed and said so (nothing new to say)."""
        gone = rep.unreachable or rep.busy
        if gone is None:
            self.down.pop(root, None)
            return False
        d = self.down.get(root)
        if d is None or d.endpoint != gone:
            d = self.down[root] = _Down(gone, settings["endpoint"])
        elif retry:
            d.every = min(d.every * 2, PROBE_LAST)
        d.configured = settings["endpoint"]  # `folio mcp` keeps the recorded endpoint whatever the setting says
        d.next = time.monotonic() + d.every
        said, d.said = d.said, rep.error_watched
        return retry and said is not None

    def _named(self, root: Path, paths: set[str]) -> list[str]:
        """The paths a burst's line names: its Markdown files (and TRIGGERS) when it has any, else every
        path. A path with no extension gone is run for as a folder, most likely (`wanted`), but next to
        a file it is mostly an editor's or `sed -i`'s temporary file renamed over that file."""
        named = sorted(p for p in paths if p)
        exts = self.extensions.get(root) or ()
        files = [p for p in named if (exts and p.lower().endswith(exts)) or p.rsplit("/", 1)[-1] in TRIGGERS]
        return files or named

    def _hold(self, root: Path, paths: set[str]) -> None:
        """Keep a burst another folio's run on `root` refused (several roots followed), to be tried
        again every HELD_EVERY s; said once, when the root is first held."""
        kept = self.held.get(root)
        if kept is None:
            self.say(f"another folio is writing the index at {root}: its changes are indexed once that run ends; "
                     f"the other roots' go on meanwhile")
        self.held[root] = ((kept[0] if kept else set()) | paths, time.monotonic() + HELD_EVERY)

    def newer(self, root: Path) -> bool:
        """Whether changes under `root` wait to be indexed."""
        with self.cond:
            return bool(self.pending.paths.get(root))

    def index(self, root: Path, paths: set[str]) -> Outcome:
        """One burst in one corpus: the words, then the vectors (yielding to newer changes)."""
        from folio import indexer
        from folio.burst import Burst
        from folio.store import LockBusy

        first, retry = root in self.first, root in self.retrying
        self.first.discard(root)
        self.retrying.discard(root)
        out = Outcome(root, self._named(root, paths), first=first, retry=retry)
        t0 = time.perf_counter()

        def yield_to_newer(p) -> None:  # after a commit, or while a server loads its model
            if p.event in ("embedded", "loading") and self.newer(root):
                raise Yielded()

        wait = len(self.roots) == 1  # one root waits for another writer, as `folio index` does
        try:
            settings = self.settings_of(root)
            self.extensions[root] = tuple(e.lower() for e in settings["extensions"])
            # the files the events named are read and their hashes compared, whatever their stat says (an
            # edit that keeps the size and puts the old mtime back); polling names only stats that changed
            burst = Burst(frozenset(p for p in paths if p) if self.modes.get(root) == "events" else frozenset())

            def after_words(words) -> bool:  # under the run's lock: the vectors pass follows, or not
                out.words = words
                out.down = self._known_down(root, settings)
                burst.named = frozenset()  # read by the words pass: the vectors pass takes their documents
                return out.down is None

            rep = indexer.run(root, settings, keep_space=self.keep_space, on_wait=self.say, progress=yield_to_newer,
                              wait=wait, burst=burst, after_words=after_words)
            if out.down is None:
                out.vectors = rep
                out.again = self._reached(root, settings, out.vectors, retry)
            self.held.pop(root, None)
        except Yielded:
            out.yielded = True
        except LockBusy:
            out.held = True
            self._hold(root, paths)
        except FolioError as e:
            out.error = str(e)
        out.seconds = time.perf_counter() - t0
        return out


def outcome_text(o: Outcome, root: bool = False) -> str:
    """One line for a burst: what changed, what the passes did, how long it took (`folio index --watch`,
    and `folio mcp`'s log). `root`: the line names the corpus (several are followed, and its paths are
    relative to it)."""
    stamp = time.strftime("%H:%M:%S")
    named = ", ".join(o.paths[:3]) + (f" and {len(o.paths) - 3:,} more" if len(o.paths) > 3 else "")
    what = "caught up" if o.first and not o.paths else (named or "the tree")
    if root:
        what += f" in {o.root}"
    if o.retry and not o.paths:
        what = ("the embeddings server answers" if o.vectors is not None and o.vectors.embedded else
                "the embeddings server listens") + (f" for {o.root}" if root else "")
    rep = o.vectors or o.words
    if rep is None:
        return f"{stamp}  {what}: {o.error}"
    w = o.words
    counts = [f"{n:,} {label}" for n, label in ((w.new, "new"), (w.changed, "changed"), (w.deleted, "deleted"),
                                                 (w.renamed, "renamed")) if n]
    parts = [", ".join(counts) if counts else "" if o.retry else "nothing to re-index"]
    if o.vectors is not None:
        v = o.vectors
        vec = f"{_sections(v.embedded)} embedded" if v.embedded else "no section to embed"
        if v.waiting:
            vec += f", {_sections(v.waiting)} waiting for vectors"
        if v.error:
            vec += f": {v.error_watched or v.error}"
        parts.append(vec)
    elif o.down is not None:
        parts.append(f"sections wait for vectors until an embeddings server listens at {o.down}")
    elif o.yielded:
        parts.append("embedding stopped for newer changes (it resumes after them)")
    elif o.error:
        parts.append(f"vectors not embedded: {o.error}")
    done = "; ".join(p for p in parts if p)
    return f"{stamp}  {what}: {done} ({o.seconds:.2f} s)"


def _sections(n: int) -> str:
    return f"{n:,} section{'' if n == 1 else 's'}"
