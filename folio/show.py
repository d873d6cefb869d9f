"""`folio show PATH:START-END`: lines read live from a corpus file, with a citation that says
whether they are still the lines that were indexed.

The citation is `path:L12-L40`, the first 12 hex digits of the SHA-256 recorded when the file was
indexed, and a verdict from the bytes read now: current (same bytes), stale (changed since: the
lines may have moved), missing (gone). Given what a query row said (`Said`: its citation.sha, and its
trail), also the truth against that row (`since_row`): the same bytes the row was cut from, or else
where the section it named is in the file now (found by its trail among the file's sections as they
are now), whatever the index did in between. Reads through walk, the stamp and records through store.
Must not print.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from folio.errors import FolioError

SPEC_RE = re.compile(r"^(?P<path>.+):L?(?P<start>\d+)(?:-L?(?P<end>\d+))?$", re.S)  # a name may hold a newline
SHA_RE = re.compile(r"^[0-9a-fA-F]{12,64}$")
PIECES_RE = re.compile(r"\s+\(\d+ sections\)$")  # what `folio query` prints after a merged row's trail


@dataclass(frozen=True)
class Said:
    """What a query row said of its lines: its citation.sha (a hex prefix, lower case) and its trail
    (None: not given)."""
    sha: str
    trail: tuple[str, ...] | None = None


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
    since_row: dict | None = None  # given a row's sha: {sha, state, start, end, trail} (see `_since_row`)

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


def parse_sha(value: str) -> str:
    """A row's citation.sha as given (12 to 64 hex digits) -> lower case; else a usage error."""
    from folio.surface import opt

    if not isinstance(value, str) or not SHA_RE.match(value.strip()):
        shown = value if isinstance(value, str) else str(value)
        shown = shown if len(shown) <= 70 else shown[:67] + "..."
        raise FolioError(f"{opt('--sha', shown, quoted=True)} is not a sha: give the query row's citation.sha, "
                         f"12 hex digits (e.g. {opt('--sha', '516bef067812')})", exit_code=2)
    return value.strip().lower()


def parse_trail(value) -> tuple[str, ...]:
    """A row's trail: its `trail` list as --json gives it (a list, or that list as JSON text), or the
    trail line `folio query` prints (`Cooking > Egg timing`, `(before the first heading)`)."""
    import json

    from folio.render import unquote
    from folio.surface import mcp, opt

    if isinstance(value, list | tuple):
        if all(isinstance(h, str) for h in value):
            return tuple(value)
    elif isinstance(value, str):
        text = PIECES_RE.sub("", value.strip())
        got = None
        if text.startswith("["):  # the --json list; a heading may start with "[" too ("[Draft] Plan")
            with contextlib.suppress(ValueError):
                got = json.loads(text)
        if isinstance(got, list) and all(isinstance(h, str) for h in got):
            return tuple(got)
        if text in ("", "(before the first heading)", "(top level)"):
            return ()
        return tuple(unquote(h) or h for h in text.split(" > "))
    shown = str(value) if len(str(value)) <= 70 else str(value)[:67] + "..."
    example = '["Cooking", "Egg timing"]' if mcp() else "'Cooking > Egg timing'"
    raise FolioError(f"{opt('--trail', shown, quoted=True)} is not a heading trail: give the query row's trail "
                     f"(e.g. {opt('--trail')} {example})", exit_code=2)


def show(root: Path, spec: str, cwd: Path | None = None, outer: Path | None = None,
         said: Said | None = None) -> Shown:
    """The lines of `spec` read now, with the indexed sha and a freshness verdict.

    `said`: what the query row that gave `spec` said (its sha, maybe its trail). The lines shown are
    then the section that row named: the row's own lines while the file is the one the row was cut
    from, else the section found by its trail in the file as it is now (see `_since_row`).

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
        gone = None if said is None else {"sha": said.sha, "state": "not_found", "start": start, "end": end,
                                          "trail": None if said.trail is None else list(said.trail)}
        return Shown(root, path, start, end, sha, "missing", None, end, since_row=gone)
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
    now = hashlib.sha256(raw).hexdigest()
    since = None
    if said is not None:
        since = _since_row(root, path, stamp, now, text, said, start, end)
        if since["state"] == "moved":
            start, end = since["found"]
    if start > len(lines):
        if since is not None and since["state"] in ("not_found", "changed"):
            raise FolioError(since_sentence(given, since))
        raise FolioError(f"{given} {lines_now(len(lines))}, so line {start} does not exist"
                         + (" (it changed since it was indexed: run `folio query` again for a current reference)"
                            if now != stamp.sha256 else ""))
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
    return Shown(root, path, start, shown_end, sha, fresh, body, end if since is None or since["state"] != "moved"
                 else shown_end, older, since)


# since_row["state"]: what became of the lines a query row named, judged from the bytes read now
SINCE_ROW = ("same", "in_place", "moved", "not_found", "changed")


def _since_row(root: Path, path: str, stamp, now: str, text: str, said: Said, start: int, end: int) -> dict:
    """The truth against a query row (`said`) that named lines `start`-`end` of `path`:

    same       the file is the one the row was cut from (its sha): the lines are the row's;
    in_place   it changed since, and the section the row named (by its trail) is at those lines still;
    moved      it changed, and that section is at other lines now (`found`): those are the ones to show;
    not_found  it changed, and no section has the row's trail now (a heading renamed, a section deleted);
    changed    it changed, and nothing says which section the row named (no trail given, and the index
               no longer holds the row's copy of the file).

    The section is looked for in the file as it is now: the index's records when the index holds these
    bytes, else the file parsed now (at the index's section budget). Where the index still holds the
    row's copy (the file changed on disk since, not re-indexed), the row's trail is read from it, and
    so is how it divided the row's section (by the server's tokens, which a parse now cannot redo): a
    section that moved whole moves the row's part of it with it."""
    out = {"sha": said.sha, "state": "same", "start": start, "end": end,
           "trail": list(said.trail) if said.trail is not None else None}
    if now.startswith(said.sha):
        return out
    from folio import rows as rowsmod
    from folio.store import Store

    store = Store.open(root)
    try:
        trail = said.trail
        if trail is None and stamp.sha256 and stamp.sha256.startswith(said.sha):  # the row's copy is indexed
            held = store.file_rows(stamp.id)
            inside = [r for r in held if r.start >= start and r.end <= end] or \
                [r for r in held if r.start <= end and r.end >= start]
            if inside:
                trail = rowsmod.common_trail(inside)
                out["trail"] = list(trail)
        if trail is None:
            return {**out, "state": "changed"}
        held = None  # the row's copy's records, when the index holds it: how it divided the row's section
        if stamp.sha256 and stamp.sha256.startswith(said.sha) and stamp.sha256 != now:
            held = store.file_rows(stamp.id)
        if stamp.sha256 == now:
            records = store.file_rows(stamp.id)
        else:
            from folio import config
            from folio import sections as sec

            budget = int(store.meta.budget or config.resolve(root, {})["max_chars"])
            records = list(sec.parse_document(text, budget).records)
    finally:
        store.close()
    found = locate(records, tuple(trail), start, end)
    if found is None:
        return {**out, "state": "not_found"}
    span, exact = found
    if not exact and held:  # parsed now, the file's sections are whole: the index divided the row's by tokens
        was = _run(held, tuple(trail), start, end)
        if was and was[1] - was[0] == span[1] - span[0]:  # the section moved whole: so did the row's part of it
            shift = span[0] - was[0]
            span, exact = (start + shift, end + shift), True
    return {**out, "state": "in_place" if span == (start, end) else "moved", "found": span, "exact": exact}


def locate(records, trail: tuple[str, ...], start: int, end: int) -> tuple[tuple[int, int], bool] | None:
    """Where the section a row named by `trail` over lines `start`-`end` is among `records` (a file's
    records now, in line order): ((start, end), exact), or None when no record lies under `trail`.

    A row is a run of consecutive records whose common trail is its trail (rows.common_trail). Exact:
    such a run as long as the row (the section moved whole), the one nearest the row's start. Else
    the section changed too: the whole run of consecutive records under `trail` nearest the row's
    start (the section with its subsections, which holds what the row did)."""
    from folio.rows import common_trail

    k, want = len(trail), end - start + 1
    under = [r for r in records if tuple(r.trail[:k]) == trail]
    if not under:
        return None
    exact = []
    for i, first in enumerate(records):
        if tuple(first.trail[:k]) != trail:
            continue
        for j in range(i, len(records)):
            r = records[j]
            length = r.end - first.start + 1
            if tuple(r.trail[:k]) != trail or length > want:
                break
            if length == want and tuple(common_trail(records[i:j + 1])) == trail:
                exact.append((first.start, r.end))
    if exact:
        return min(exact, key=lambda s: (abs(s[0] - start), s[0])), True
    runs, run = [], None
    for r in records:
        if tuple(r.trail[:k]) == trail:
            run = (run[0], r.end) if run else (r.start, r.end)
        elif run:
            runs.append(run)
            run = None
    if run:
        runs.append(run)
    return min(runs, key=lambda s: (max(s[0] - end, start - s[1], 0), abs(s[0] - start))), False


def _run(records, trail: tuple[str, ...], start: int, end: int) -> tuple[int, int] | None:
    """The lines of the run of consecutive records under `trail` that holds lines `start`-`end`, or None."""
    k, run, found = len(trail), None, None
    for r in [*records, None]:
        if r is not None and tuple(r.trail[:k]) == trail:
            run = (run[0], r.end) if run else (r.start, r.end)
            continue
        if run and run[0] <= start and end <= run[1]:
            found = run
        run = None
    return found


def since_sentence(given: str, since: dict) -> str:
    """The error sentence for a row whose section cannot be shown (not_found, changed)."""
    from folio.render import trail_text
    from folio.surface import mcp, opt

    again = "call the query tool again" if mcp() else "run `folio query` again"
    head = f"{given} changed since the query row (its sha {since['sha'][:12]})"
    if since["state"] == "not_found":
        named = trail_text(since["trail"]) or "(before the first heading)"
        return (f"{head}, and no section {named!r} is in it now (its heading renamed, or the section deleted): "
                f"{again} for a current reference")
    return (f"{head}: lines {since['start']}-{since['end']} may hold another section now; {again}, or give the "
            f"row's trail as well ({opt('--trail')}) to find where its section went")


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
