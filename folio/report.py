"""What an index run tells its caller: the Report it returns and the Progress it hands out as it goes.

Owns those records and the one place progress is handed to the caller's display (Feed: embedding
threads report too). Must not print: cli.py renders both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Report:
    root: str = ""
    files: int = 0
    new: int = 0
    changed: int = 0
    deleted: int = 0
    renamed: int = 0
    restamped: int = 0
    read: int = 0  # files opened (a no-op run opens none)
    unreadable: int = 0  # files the walk listed that could not be read or are not text
    embedded: int = 0
    reused: int = 0
    copied: int = 0
    removed: int = 0
    sections: int = 0
    dead_rows: int = 0
    compacted: int = 0
    budget: int = 0
    tokens: int | None = None  # the most tokens the server takes in one input (0: it counts none for folio)
    lexical_only: bool = False
    waiting: int = 0  # sections left without vectors by a run whose server failed (next run embeds them)
    waiting_files: int = 0
    model: str = ""
    endpoint: str = ""
    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # the run finished but indexed nothing it was given: exit 1 with this
    seconds: float = 0.0


@dataclass
class Progress:
    """What a run has done and has left, handed to the progress display (the indexer never prints).
    `event`: calibrating (asking the server before the first embedding) | file | embedded | lexical."""

    event: str = "file"
    files: int = 0  # files read, of files_total
    files_total: int = 0
    bytes: int = 0  # of those files' bytes
    bytes_total: int = 0
    embedded: int = 0  # sections embedded so far
    planned: int = 0  # sections the files read so far need embedded
    lexical: bool = False  # no server answers: nothing will be embedded
    endpoint: str = ""

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
