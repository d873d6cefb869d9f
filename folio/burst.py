"""What a live index's burst hands the passes of its two runs (folio.watch): the files its events
named, and the documents its words pass parsed.

Owns that hand-over: which files a pass reads whatever their stat says (Indexer.files takes them
out of the clean set), and the parses the vectors pass takes instead of parsing the same bytes
again (as read_ahead's `early`), at most KEPT_PARSES of them (a catch-up of the whole tree keeps
what fits). Must not read files or the index.
"""

from __future__ import annotations

from folio.readahead import Parsed
from folio.walk import Entry

KEPT_PARSES = 2000  # a burst's words pass keeps the documents of at most this many files for its vectors pass


class Burst:
    """What a live index's burst tells the passes of its two runs (folio.watch): the files its events
    named, read whatever their stat says (Indexer.files), and the documents the words pass parsed,
    (sha, Parsed) by path, which the vectors pass takes for the same bytes instead of parsing them again."""

    def __init__(self, named: frozenset[str] = frozenset()):
        self.named = named
        self.parsed: dict[str, tuple[str, Parsed]] = {}

    def keep(self, path: str, sha: str, parsed: Parsed) -> None:
        if len(self.parsed) < KEPT_PARSES:  # the lexical plane's part is written: only the document
            self.parsed[path] = (sha, Parsed(parsed.budget, parsed.binary, parsed.warning, parsed.document))

    def early(self, then):
        """read_ahead's `early`: the document kept for these bytes, else `then`'s (None: none)."""
        def early(e: Entry, sha: str):
            hit = self.parsed.get(e.path)
            if hit is not None and hit[0] == sha:
                return hit[1]
            return then(e, sha) if then is not None else None
        return early
