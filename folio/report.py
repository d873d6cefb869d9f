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
# waiting: sections left without vectors by a run whose server failed (the next run embeds them);
# error: the run finished but indexed nothing it was given: exit 1 with this.
REPORT_FIELDS = (("root", ""), ("files", 0), ("new", 0), ("changed", 0), ("deleted", 0), ("renamed", 0),
                 ("restamped", 0), ("read", 0), ("unreadable", 0), ("embedded", 0), ("reused", 0), ("copied", 0),
                 ("removed", 0), ("sections", 0), ("dead_rows", 0), ("compacted", 0), ("budget", 0), ("tokens", None),
                 ("lexical_only", False), ("waiting", 0), ("waiting_files", 0), ("model", ""), ("endpoint", ""),
                 ("notices", []), ("warnings", []), ("error", None), ("seconds", 0.0))


class Report:
    __slots__ = tuple(k for k, _ in REPORT_FIELDS)

    def __init__(self, **given):
        for k, default in REPORT_FIELDS:
            setattr(self, k, given.pop(k) if k in given else [] if isinstance(default, list) else default)
        if given:
            raise TypeError(f"Report has no field {sorted(given)[0]}")

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
    `event`: calibrating (asking the server before the first embedding) | file | embedding (a batch
    is being sent) | embedded (a batch's vectors are committed) | lexical.
    files: files read, of files_total; bytes: of those files' bytes; embedded: sections whose vectors
    are committed (what a killed run keeps); planned: sections the files read so far need embedded
    (the run's summary counts the same sections); sample: files at the front of the reading order
    spread over the rest (sample_first); lexical: no server answers, nothing will be embedded."""

    __slots__ = ("event", "files", "files_total", "bytes", "bytes_total", "embedded", "planned", "lexical",
                 "endpoint", "sample", "_read", "_ratio")

    def __init__(self, event: str = "file", files: int = 0, files_total: int = 0, bytes: int = 0,
                 bytes_total: int = 0, embedded: int = 0, planned: int = 0, lexical: bool = False,
                 endpoint: str = "", sample: int = 0):
        self.event, self.files, self.files_total, self.bytes, self.bytes_total = (event, files, files_total, bytes,
                                                                                  bytes_total)
        self.embedded, self.planned, self.lexical, self.endpoint = embedded, planned, lexical, endpoint
        self.sample = sample
        self._read = planned  # planned as of the last file counted read
        self._ratio = None  # sections to embed per byte, fixed once the sample is read

    def read(self, size: int) -> None:
        """One more file read (its records planned): once the sample is read, the sections its files
        need per byte are fixed as the estimate for every file not read yet."""
        self.files += 1
        self.bytes += size
        self._read = self.planned
        if self._ratio is None and self.sample and self.files >= self.sample and self.bytes:
            self._ratio = self.planned / self.bytes

    def to_embed(self) -> int:
        """Sections this run embeds: exact once every file is read; until then what the files read
        need, plus the bytes left to read at the sample's sections per byte. Once the sample is read
        that rate stays, so the total moves only by what each file read needs against its estimate,
        never by a new guess for the files not read."""
        if self.bytes <= 0 or self.bytes >= self.bytes_total:
            return self.planned
        ratio = self._ratio if self._ratio is not None else self._read / self.bytes
        return self.planned + round(ratio * (self.bytes_total - self.bytes))


class Feed:
    """One run's Progress and the caller's display it is handed to (None: nobody watches)."""

    def __init__(self, progress: Progress, show: Callable[[Progress], None] | None):
        self.prog = progress
        self.show = show
        self._lock = None

    def tick(self, event: str, embedded: int = 0) -> None:
        if self.show is None:
            return
        if self._lock is None:
            import threading

            self._lock = threading.Lock()
        with self._lock:  # embedding threads report too
            self.prog.event = event
            self.prog.embedded += embedded
            self.show(self.prog)
