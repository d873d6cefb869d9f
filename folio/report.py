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


class Progress:
    """What a run has done and has left, handed to the progress display (the indexer never prints).
    `event`: calibrating (asking the server before the first embedding) | file | embedded | lexical.
    files: files read, of files_total; bytes: of those files' bytes; embedded: sections embedded so
    far; planned: sections the files read so far need embedded; lexical: no server answers, nothing
    will be embedded."""

    __slots__ = ("event", "files", "files_total", "bytes", "bytes_total", "embedded", "planned", "lexical",
                 "endpoint")

    def __init__(self, event: str = "file", files: int = 0, files_total: int = 0, bytes: int = 0,
                 bytes_total: int = 0, embedded: int = 0, planned: int = 0, lexical: bool = False,
                 endpoint: str = ""):
        self.event, self.files, self.files_total, self.bytes, self.bytes_total = (event, files, files_total, bytes,
                                                                                  bytes_total)
        self.embedded, self.planned, self.lexical, self.endpoint = embedded, planned, lexical, endpoint

    def to_embed(self) -> int:
        """Sections this run embeds: exact once every file is read; until then what the files read
        need, scaled by the bytes left to read (a run reads and embeds as it goes)."""
        if self.bytes <= 0 or self.bytes >= self.bytes_total:
            return self.planned
        return max(self.planned, round(self.planned * self.bytes_total / self.bytes))


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
