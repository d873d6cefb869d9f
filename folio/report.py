"""What an index run tells its caller: the Report it returns and the Progress it hands out as it goes.

Owns those records and the one place progress is handed to the caller's display (Feed: embedding
threads report too). Must not print: index_command.py renders both.
"""

from __future__ import annotations

from collections.abc import Callable

# The run report's fields and their defaults, in the order `folio index --json` prints them (lists:
# a new one each). Plain classes, not dataclasses: a no-op `folio index` loads this module, and
# importing dataclasses (with inspect) costs it ~15 ms.
# read: files opened (a no-op run opens none); unreadable: files the walk listed that could not be read
# or are not text; tokens: the most tokens the server takes in one input (0: it counts none for folio);
# truncated: records this run embedded with a single line cut to fit (status --truncated lists them);
# waiting: sections left without vectors by a run whose server failed (the next run embeds them);
# error: the run finished but indexed nothing it was given: exit 1 with this.
REPORT_FIELDS = (("root", ""), ("files", 0), ("new", 0), ("changed", 0), ("deleted", 0), ("renamed", 0),
                 ("restamped", 0), ("read", 0), ("unreadable", 0), ("embedded", 0), ("reused", 0), ("copied", 0),
                 ("truncated", 0), ("removed", 0), ("sections", 0), ("dead_rows", 0), ("compacted", 0), ("budget", 0),
                 ("tokens", None),
                 ("lexical_only", False), ("waiting", 0), ("waiting_files", 0), ("model", ""), ("endpoint", ""),
                 ("notices", []), ("warnings", []), ("error", None), ("seconds", 0.0))


# what a run did (not what the index holds after it): two runs over the same files add these up
SUMMED = ("new", "changed", "deleted", "renamed", "restamped", "read", "unreadable", "embedded", "reused", "copied",
          "truncated", "removed", "compacted", "seconds")


class Report:
    # unreachable (not in --json): the endpoint this run found nothing listening at (connection refused),
    # for a watcher to look for it again (folio.watch); None when it answered or was not asked.
    # busy (not in --json): the endpoint that ended this run busy (429/502/503/504 past the retries, or
    # still loading its model past the wait), for a watcher to ask it again later.
    # error_watched: `error` as a watcher says it, which looks for that server itself (no "run again")
    __slots__ = tuple(k for k, _ in REPORT_FIELDS) + ("unreachable", "busy", "error_watched")

    def __init__(self, **given):
        self.unreachable = self.busy = self.error_watched = None
        for k, default in REPORT_FIELDS:
            setattr(self, k, given.pop(k) if k in given else [] if isinstance(default, list) else default)
        if given:
            raise TypeError(f"Report has no field {sorted(given)[0]}")

    def followed_by(self, later: Report) -> Report:
        """This run and a `later` one over the same files as one run (indexer.words_first): what each
        did (files found new, sections embedded, ...) added up, what the index holds after them (files,
        sections, waiting, ...) the later one's, each notice and warning once."""
        both = Report(**later.to_dict())
        for k in SUMMED:
            setattr(both, k, getattr(self, k) + getattr(later, k))
        for k in ("notices", "warnings"):
            setattr(both, k, list(dict.fromkeys(getattr(self, k) + getattr(later, k))))
        both.unreachable, both.busy, both.error_watched = later.unreachable, later.busy, later.error_watched
        return both

    def to_dict(self) -> dict:
        """Every field in order (lists copied): the `--json` report."""
        return {k: list(v) if isinstance(v := getattr(self, k), list) else v for k, _ in REPORT_FIELDS}


SAMPLE_FILES = 32  # files read first, spread over a long run's files, whose sections per byte stand for the rest


def sample_first(todo: list) -> tuple[list, int]:
    """The files to read, SAMPLE_FILES of them spread evenly over the list moved to its front (the
    rest in order), and how many: what they need embedded per byte stands for the files not read
    yet (Progress.to_embed). A run of fewer files reads them in order (0). SAMPLE_FILES is a power of 2."""
    n = len(todo)
    if n < 4 * SAMPLE_FILES:
        return todo, 0
    step = n / SAMPLE_FILES
    # in bit-reversed order (0, 16, 8, 24, ...): every prefix of the sample is spread over the files too,
    # since the first estimates are shown before the whole sample is read
    bits = SAMPLE_FILES.bit_length() - 1
    order = sorted(range(SAMPLE_FILES), key=lambda i: int(format(i, f"0{bits}b")[::-1], 2))
    picks = [int(i * step + step / 2) for i in order]
    taken = set(picks)
    return [todo[i] for i in picks] + [e for i, e in enumerate(todo) if i not in taken], len(picks)


class Progress:
    """What a run has done and has left, handed to the progress display (the indexer never prints).
    `event`: calibrating (asking the server before the first embedding) | loading (waiting for a
    server loading its model) | file | embedding (a batch is being sent) | embedded (a batch's
    vectors are committed) | lexical.
    files: files read, of files_total; bytes: of those files' bytes; embedded: sections whose vectors
    are committed (what a killed run keeps); planned: sections the files read so far need embedded
    (the run's summary counts the same sections); sample: files at the front of the reading order
    spread over the rest (sample_first); lexical: no server answers, nothing will be embedded."""

    __slots__ = ("event", "files", "files_total", "bytes", "bytes_total", "embedded", "planned", "lexical",
                 "endpoint", "sample", "_read", "_ratio", "_planning")

    def __init__(self, event: str = "file", files: int = 0, files_total: int = 0, bytes: int = 0,
                 bytes_total: int = 0, embedded: int = 0, planned: int = 0, lexical: bool = False,
                 endpoint: str = "", sample: int = 0):
        self.event, self.files, self.files_total, self.bytes, self.bytes_total = (event, files, files_total, bytes,
                                                                                  bytes_total)
        self.embedded, self.planned, self.lexical, self.endpoint = embedded, planned, lexical, endpoint
        self.sample = sample
        self._read = planned  # planned as of the last file counted read
        self._ratio = None  # sections to embed per byte, fixed once the sample is read
        self._planning = 0  # bytes of the file whose records are planned, embedding before it counts as read

    def read(self, size: int) -> None:
        """One more file read (its records planned): once the sample is read, the sections its files
        need per byte are fixed as the estimate for every file not read yet."""
        self.files += 1
        self.bytes += size
        self._planning = 0
        self._read = self.planned
        if self._ratio is None and self.sample and self.files >= self.sample and self.bytes:
            self._ratio = self.planned / self.bytes

    def planning(self, size: int) -> None:
        """The file being read has its records planned (in `planned`), and is embedded (a big one in
        parts) before it counts as read: its bytes are no longer guessed at the files' rate."""
        self._planning = size

    def firm(self) -> bool:
        """Whether to_embed rests on what was read more than on a guess: every file planned, the sample
        read (spread over the files, its sections per byte stand for the rest), or a quarter of the
        bytes. A few small files read before one big one (a table of thousands of rows) would stand
        for it otherwise: `about 65 minutes ... 11,654 sections` said of a run of 600 and three."""
        return self._ratio is not None or 4 * (self.bytes + self._planning) >= self.bytes_total

    def to_embed(self) -> int:
        """Sections this run embeds: exact once every file is read; until then what the files read
        need, plus the bytes left to read at the sample's sections per byte. Once the sample is read
        that rate stays, so the total moves only by what each file read needs against its estimate,
        never by a new guess for the files not read."""
        known = self.bytes + self._planning
        if known <= 0 or known >= self.bytes_total:
            return self.planned
        ratio = self._ratio if self._ratio is not None else (self._read / self.bytes if self.bytes else
                                                             self.planned / known)
        return self.planned + round(ratio * (self.bytes_total - known))


class Feed:
    """One run's Progress and the caller's display it is handed to (None: nobody watches). Ticked by
    the pass alone, in its own thread: the stages return what it counts."""

    def __init__(self, progress: Progress, show: Callable[[Progress], None] | None):
        self.prog = progress
        self.show = show

    def tick(self, event: str, embedded: int = 0) -> None:
        if self.show is None:
            return
        self.prog.event = event
        self.prog.embedded += embedded
        self.show(self.prog)
