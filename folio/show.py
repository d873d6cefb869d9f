"""`folio show PATH:START-END`: lines read live from a corpus file, with a citation that says
whether they are still the lines that were indexed.

The citation is `path:L12-L40`, the first 12 hex digits of the SHA-256 recorded when the file was
indexed, and a verdict from the bytes read now: current (same bytes), stale (changed since: the
lines may have moved), missing (gone). Reads through walk, the stamp through store. Must not print.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from folio.errors import FolioError

SPEC_RE = re.compile(r"^(?P<path>.+):L?(?P<start>\d+)(?:-L?(?P<end>\d+))?$", re.S)  # a name may hold a newline


@dataclass(frozen=True)
class Shown:
    root: Path
    path: str  # root-relative, '/'-separated
    start: int  # the lines shown (END clamped to the file's length)
    end: int
    sha: str | None  # first 12 hex digits of the SHA-256 at indexing; None when never indexed
    freshness: str  # current | stale | missing
    text: str | None  # None when missing
    asked_end: int  # END as given
    older_in: Path | None = None  # an enclosing index holding an older copy of the file (see show's `outer`)

    @property
    def loc(self) -> str:
        return f"{self.path}:L{self.start}-L{self.end}"


def parse_spec(spec: str) -> tuple[str, int, int]:
    """'docs/a.md:12-40' (also 'docs/a.md:L12-L40', 'docs/a.md:12', and a path quoted as `folio query`
    prints an unusual one: '"a\\nb.md":1-3') -> (path, start, end)."""
    from folio.render import unquote
    from folio.surface import as_printed, given, mcp

    def spelled(ref: str) -> str:  # a reference offered as the fix: bare on the command line
        return given("ref", ref) if mcp() else ref

    m = SPEC_RE.match(spec.strip())
    if not m:
        shape = "path:start-end" if mcp() else "PATH:START-END"
        raise FolioError(f"{given('ref', spec)} is not {shape} (e.g. {spelled('docs/setup.md:12-40')}, "
                         f"{as_printed()})", exit_code=2)
    start = int(m["start"])
    end = int(m["end"]) if m["end"] is not None else start
    if start < 1 or end < start:
        lo = max(1, min(start, end))
        meant = f"{m['path']}:{lo}-{max(lo, start, end)}"
        order = "the start must not exceed the end" if mcp() else "START must not exceed END"
        raise FolioError(f"{given('ref', spec)}: lines are numbered from 1 and {order} (did you mean "
                         f"{spelled(meant)}?)", exit_code=2)
    return unquote(m["path"]) or m["path"], start, end


def show(root: Path, spec: str, cwd: Path | None = None, outer: Path | None = None) -> Shown:
    """The lines of `spec` read now, with the indexed sha and a freshness verdict.

    `outer`: an index enclosing `root` that may have printed the reference (the one `folio show` is run
    in): it holds the file too, under its own stamp, and a reference it printed names the lines of the
    copy it indexed. Where that copy is not the file's bytes now, the lines are `stale` whatever
    `root`'s stamp says (older_in names it)."""
    from folio.store import Store
    from folio.walk import corpus_path, read_bytes

    given, start, end = parse_spec(spec)
    path = corpus_path(root, given, cwd)
    store = Store.open(root)
    try:
        stamp = store.stamp(path)
    finally:
        store.close()
    sha = stamp.sha256[:12] if stamp is not None and stamp.sha256 else None
    try:
        raw = read_bytes(root, path)
    except FileNotFoundError:
        if stamp is None:
            raise FolioError(f"{given}: no such file in the corpus at {root}") from None
        return Shown(root, path, start, end, sha, "missing", None, end)
    except IsADirectoryError:
        raise FolioError(f"{given} is a directory: name a file, as PATH:START-END") from None
    except OSError as e:
        raise FolioError(f"{given} could not be read ({e.strerror or e})") from None
    if stamp is None:
        raise FolioError(f"{given} is not in the index: {_why_not_indexed(root, path, f'{start},{end}p', given)}")
    from folio.sections import decode

    text, _warn = decode(raw)
    lines = text.split("\n") if text else []  # an empty file has no lines
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()  # a final newline ends the last line, it does not start another
    if start > len(lines):
        raise FolioError(f"{given} {lines_now(len(lines))}, so line {start} does not exist"
                         + (" (it changed since it was indexed: run `folio query` again for a current reference)"
                            if hashlib.sha256(raw).hexdigest() != stamp.sha256 else ""))
    shown_end = min(end, len(lines))
    fresh = _verdict(root, path, stamp, raw)
    older = None
    if outer is not None and fresh == "current":
        held = f"{root.relative_to(outer).as_posix()}/{path}"
        try:
            store = Store.open(outer)
            try:
                other = store.stamp(held)
            finally:
                store.close()
        except FolioError:  # that index unreadable: a query there says why; these lines are `root`'s
            other = None
        if other is not None and _verdict(outer, held, other, raw) == "stale":
            fresh, older = "stale", outer
    body = "\n".join(line.removesuffix("\r") for line in lines[start - 1:shown_end])  # CRLF files
    return Shown(root, path, start, shown_end, sha, fresh, body, end, older)


def _verdict(root: Path, path: str, stamp, raw: bytes) -> str:
    """current (the bytes `stamp` was taken of) or stale."""
    if stamp.sha256:
        return "current" if hashlib.sha256(raw).hexdigest() == stamp.sha256 else "stale"
    # due to be divided or embedded anew (Store.reread_all): judged by its stat, as a query judges it
    from folio.walk import stat_file

    return "current" if stat_file(root, path) == (stamp.size, stamp.mtime_ns) else "stale"


def lines_now(n: int) -> str:
    """How long a file is now, as a sentence's predicate: 'is empty now', 'has 1 line now', 'has 8 lines now'."""
    return "is empty now" if n == 0 else f"has {n} line{'' if n == 1 else 's'} now"


def never_indexed(path: str, extensions) -> bool:
    """A file folio never indexes, whatever a run finds: not one of `extensions`, or under a hidden name."""
    return not path.lower().endswith(tuple(e.lower() for e in extensions)) or \
        any(part.startswith(".") for part in path.split("/"))


def _why_not_indexed(root: Path, path: str, lines: str, given: str) -> str:
    """Why a file that exists is not in the index, and the fix: a file folio never indexes (not one
    of the corpus's extensions, or under a hidden name) is read by other means; any other one is new
    since the last run, or excluded by the corpus's settings."""
    from folio import config

    extensions = [e.lower() for e in config.resolve(root, {})["extensions"]]
    if never_indexed(path, extensions):
        import shlex

        first = f"sed -n '{lines}' {shlex.quote(given)}"
        return (f"folio indexes only {', '.join(extensions)} files (`extensions` in folio.yaml) and skips hidden "
                f"names, so it cites only those: read this one with `{first}`")
    return "it is new since the last `folio index`, or excluded (`exclude`, .gitignore): run `folio index`, then " \
           "cite it from `folio query`"
