"""What an index run tells its caller: the Report it returns and the Progress it hands out as it goes.

Owns those records and the one place progress is handed to the caller's display (Feed: embedding
threads report too). Must not print: index_command.py renders both.
"""

from __future__ import annotations

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
