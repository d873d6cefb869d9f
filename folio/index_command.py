"""`folio index`: the command's body and its progress view, without click. cli.index reaches it after
click's parse; folio.entry reaches it directly when argv holds nothing but index's own options
(`plain`), since importing click is a fifth of a no-op re-index (~45 ms of ~0.2 s on 16k files).

`plain` must read argv exactly as click reads index's options, or give up (None) and leave it to
click: help, an unknown option, a value click would refuse or that looks like an option, a root
that exists and is not a directory. tests/test_lean_paths.py checks the option names against click's.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from folio import timing
from folio.console import err, err_raw, out
from folio.errors import FolioError

# index's options (cli.index): those that take a value, with their type, and the flags.
VALUE_OPTIONS = {"--endpoint": str, "--model": str, "--max-chars": int, "--jobs": int}
FLAGS = {"--rebuild": "rebuild", "--no-wait": "no_wait", "--json": "as_json", "--watch": "watch"}


def plain(argv: list[str]) -> dict | None:
    """index's keyword arguments from `folio index ARGV`, or None for anything click must read."""
    if os.environ.get("_FOLIO_COMPLETE"):  # click's shell completion
        return None
    kw = {"root": None, "endpoint": None, "model": None, "max_chars": None, "jobs": None,
          "rebuild": False, "no_wait": False, "as_json": False, "watch": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        name, eq, value = a.partition("=")
        if name in VALUE_OPTIONS and a.startswith("--"):
            if not eq:
                if i >= len(argv) or argv[i].startswith("-"):
                    return None
                value, i = argv[i], i + 1
            try:
                kw[name[2:].replace("-", "_")] = VALUE_OPTIONS[name](value)
            except ValueError:
                return None
        elif a in FLAGS:
            kw[FLAGS[a]] = True
        elif a.startswith("-") or kw["root"] is not None:
            return None
        else:
            if os.path.exists(a) and not os.path.isdir(a):
                return None  # click says it is a file
            kw["root"] = Path(a)
    return kw


def index(root: Path | None, endpoint: str | None, model: str | None, max_chars: int | None, rebuild: bool,
          jobs: int | None, no_wait: bool, as_json: bool, watch: bool = False) -> None:
    """`folio index [ROOT]`: options as click's parse gives them (cli.index), or this module's (plain)."""
    timing.lap("cli")
    if as_json and watch:  # --json's stdout is one object; a watch's, a line per burst for as long as it runs
        raise FolioError("--json prints one report; --watch then prints a line for each burst of changes: choose "
                         "one (`folio index --json`, then `folio index --watch`)", exit_code=2)
    from folio import config

    if root is None:
        root = config.find_root() or Path.cwd()
        if sys.stderr.isatty() and root != Path.cwd().resolve():  # run from below the corpus root: which one
            err(f"indexing the corpus at {root} (found above this directory)")
    else:
        if not root.is_dir():
            raise FolioError(f"{root} is not a directory", exit_code=2)
        root = root.resolve()
    settings = config.resolve(root, {"endpoint": endpoint, "model": model, "max_chars": max_chars, "jobs": jobs})
    timing.lap("config")
    import signal

    from folio import indexer, render

    signal.signal(signal.SIGTERM, _on_sigterm)
    view = Progress(sys.stderr.isatty())
    try:
        rep = indexer.words_first(root, settings, rebuild=rebuild, wait=not no_wait, on_wait=view.say,
                                  progress=view, budget_flag=max_chars)
    except KeyboardInterrupt:
        view.close("interrupted")
        raise KeyboardInterrupt(kept(root)) from None  # console: `folio: interrupted: <what the index keeps>`
    except BaseException:
        view.close("failed")
        raise
    view.close("done")
    for w in rep.warnings:
        err(f"warning: {w}")
    for n in rep.notices:
        err(n)
    out(render.index_json(rep) if as_json else render.index_text(rep))
    timing.lap("render")
    if timing.ON:
        err(timing.line())
    if rep.error and not watch:
        raise FolioError(rep.error)
    if watch:
        if rep.error:  # said, and followed all the same: the next burst tries again
            err(f"folio: {rep.error}")
        follow(root, {"endpoint": endpoint, "model": model, "max_chars": max_chars, "jobs": jobs},
               said=[f"warning: {w}" for w in rep.warnings] + rep.notices)


def kept(root: Path) -> str:
    """What a run stopped by Ctrl-C (or SIGTERM) left in the index, said after `folio: interrupted: `,
    so the user knows the work is not lost and how to go on; '' when the index cannot tell (none yet)."""
    from folio.store import Store

    try:
        store = Store.open(root)
        try:
            c, dim = store.counts(), store.dim
        finally:
            store.close()
    except Exception:  # no index yet, or one this moment cannot read: the bare word stands
        return ""
    if not c["files"]:
        return "nothing was committed yet; run `folio index` again to start"
    held = f"{c['files']:,} file{'s' * (c['files'] != 1)}, {c['sections']:,} section{'s' * (c['sections'] != 1)}"
    if dim:
        held += f", {c['embedded']:,} of them with vectors"
    return (f"the index keeps everything committed before the stop: {held}; run `folio index` again to go on "
            f"from there (only what is left is read and embedded)")


def follow(root: Path, flags: dict, said: list[str]) -> None:
    """`folio index --watch` after its first run: one line on stdout per burst of changes, until
    Ctrl-C (or SIGTERM), which stops it cleanly: exit 0 when it was waiting, 130 when a run was cut
    short (what it committed stays; the next run finishes it)."""
    from folio import config, console, render, watch

    if console.READER_GONE:  # the first run's report had no reader left: nothing would see a burst's line
        return

    def show(o: watch.Outcome) -> None:
        for rep in (o.words, o.vectors):  # each warning and notice once, not on every burst
            for line in ([f"warning: {w}" for w in rep.warnings] + rep.notices) if rep is not None else []:
                if line not in said:
                    said.append(line)
                    err(line)
        if (o.first or o.retry) and not o.paths and (_idle(o) or o.again):
            return  # the catch-up found nothing written during the first run, or nothing to embed, or a
            # retry of a server failed as the run before it had said: no line
        out(render.one_line(watch.outcome_text(o)))
        if console.READER_GONE:  # `folio index --watch | head -3`: ends as `tail -f | head -3` does
            follower.stop()

    # catch_up: a burst of the whole tree first, for files written while the first run (hours on a
    # big corpus) had no watcher yet; a no-op run when there were none
    follower = watch.Follower([root], on_outcome=show, say=err, catch_up=True,
                              settings_of=lambda r: config.resolve(r, flags))
    try:
        follower.start(runner=False)
        follower.settle()
        err(f"watching {root} for changes ({follower.modes[root]}); Ctrl-C stops")
        follower.run()
    except KeyboardInterrupt:
        cut = follower.busy
        follower.stop()
        err(f"stopped watching {root}" + ("; the run under way was cut short (what it committed stays: the next "
                                           "`folio index` finishes it)" if cut else ""))
        if cut:
            raise
        return


def _idle(o) -> bool:
    """Whether a burst's runs changed nothing (nothing re-indexed, nothing embedded, no error)."""
    w, v = o.words, o.vectors
    return (w is not None and not (w.new or w.changed or w.deleted or w.renamed) and not o.error and not o.yielded
            and (v is None or not (v.embedded or v.error)))


def index_plain(opts: dict) -> None:
    """index(**opts) where click would have run it: Ctrl-C ends the progress line as click does."""
    try:
        index(**opts)
    except KeyboardInterrupt:
        err_raw("\n")
        raise


class Progress:
    """`folio index` progress on stderr. On a terminal, click's progress bar: sections embedded (their
    vectors committed) of the sections this run embeds (done/total, percent, rate, ETA), or files read when nothing is embedded
    (a lexical-only run); a status line while folio asks the server for its first vectors. Off a
    terminal, a few plain lines on a long run. A run that takes long says how long when it starts."""

    PLAIN_AFTER, PLAIN_EVERY = 10.0, 30.0  # off a terminal: a line once a run has taken 10 s, then every 30 s
    ESTIMATE_ABOVE = 15.0  # a run expected to embed for longer than this says so once it has measured
    MEASURE = (2.0, 64)  # ... after at least 2 s and 64 sections of embedding

    def __init__(self, tty: bool):
        self.tty = tty
        self.bar = None
        self.kind = None
        self.status = False
        self.start = None  # (time, sections) when the first batch is sent: the rate counts from there
        self.latest = None  # (time, sections) at the latest commit of vectors
        self.said = False
        self.last = 0.0
        self.next_plain = time.monotonic() + self.PLAIN_AFTER

    def __call__(self, p) -> None:
        now = time.monotonic()
        if p.event == "loading":  # said once on a line of its own (say); the bar stays as it was
            return
        if p.event == "calibrating":
            if self.tty:
                self._status(f"asking the embeddings server at {p.endpoint} for its first vectors and how many "
                             f"tokens it takes in one input ...")
            return
        if p.event in ("embedding", "embedded") and self.start is None:
            self.start = (now, p.embedded)
        if p.event == "embedded":
            self.latest = (now, p.embedded)
        rate = self._rate()
        total = max(p.to_embed(), p.embedded)
        if rate and not self.said and self.latest[0] - self.start[0] >= self.MEASURE[0] and \
                p.embedded - self.start[1] >= self.MEASURE[1] and p.firm():  # not a guess from a few small files
            self.said = True
            left = (total - p.embedded) / rate
            if left >= self.ESTIMATE_ABOVE:
                self._line(f"indexing: about {_duration(left)} to embed the {total - p.embedded:,} sections left"
                           f"{'' if p.files >= p.files_total else ' (estimated from the bytes still to read)'}, "
                           f"at the {rate:.0f} sections/s measured so far")
        if not self.tty:
            if now >= self.next_plain:
                self.next_plain = now + self.PLAIN_EVERY
                err(self._plain(p, total, rate))
            return
        if now - self.last < 0.1 and p.event not in ("lexical", "embedded"):  # every commit is shown
            return
        self.last = now
        if self.start is not None and not p.lexical:
            self._bar("sections", total, "embedding sections")
            self.bar.update(p.embedded - self.bar.pos, f"{rate:.0f} sections/s" if rate else "")
        else:
            self._bar("lexical" if p.lexical else "files", p.files_total,
                      "reading files (lexical plane only)" if p.lexical else "reading files")
            self.bar.update(p.files - self.bar.pos, "")

    def _rate(self) -> float | None:
        """Sections/s from the first batch sent to the latest commit (what is committed, by when)."""
        if self.start is None or self.latest is None or self.latest[0] - self.start[0] < 0.5 or \
                self.latest[1] <= self.start[1]:
            return None
        return (self.latest[1] - self.start[1]) / (self.latest[0] - self.start[0])

    def _plain(self, p, total, rate) -> str:
        if p.lexical or self.start is None:
            return f"indexing: read {p.files:,} of {p.files_total:,} files"
        eta = f", about {_duration((total - p.embedded) / rate)} left" if rate else ""
        return f"indexing: embedded {p.embedded:,} of {total:,} sections ({rate or 0:.0f}/s{eta})"

    def _bar(self, kind: str, length: int, label: str) -> None:
        if self.kind == kind:
            self.bar.length = max(length, 1, self.bar.pos)
            return
        self._clear()
        self.kind = kind
        import click  # only a terminal's bar: `folio index` off a terminal never loads click

        self.bar = click.progressbar(length=max(length, 1), label=label, file=sys.stderr, show_pos=True,
                                     show_percent=True, show_eta=True, item_show_func=lambda s: s, width=24)
        if kind == "sections" and self.start is not None:
            # click times its ETA from the bar's creation; a bar drawn again below a line (the run's
            # estimate) at hundreds of sections would take them for done at once and say 2 minutes
            # where the rate beside it said 6: it counts from the first batch sent, as the rate does
            self.bar.start -= time.monotonic() - self.start[0]
        self.bar.__enter__()

    def _status(self, text: str) -> None:
        self._clear()
        err_raw(text)
        self.status = True

    def say(self, text: str) -> None:
        """A message from the run (e.g. that it waits): on a line of its own, never inside the bar."""
        self._line(text)

    def _line(self, text: str) -> None:
        """A line of its own; on a terminal the bar redraws below it at the next update."""
        self._clear()
        err(text)

    def _clear(self) -> None:
        if self.tty and (self.status or self.bar is not None):
            # wipe the line; click's bar hid the cursor (its own finish would show it again)
            err_raw("\r\033[K" + ("\033[?25h" if self.bar is not None else ""))
        self.status = False
        self.bar, self.kind = None, None

    def close(self, how: str) -> None:
        """done: wipe the bar (the run's report follows). failed / interrupted: leave the line where it
        stopped and end it, so what follows starts on a line of its own (click itself writes that
        newline for Ctrl-C and SIGTERM, which reach it as KeyboardInterrupt)."""
        if not self.tty or not (self.status or self.bar is not None):
            return
        if how == "done":
            self._clear()
            return
        err_raw(("\033[?25h" if self.bar is not None else "") + ("\n" if how == "failed" else ""))
        self.status, self.bar = False, None


def _duration(seconds: float) -> str:
    from folio.estimate import duration  # one wording for `doctor`'s estimate and `index`'s

    return duration(seconds)


def _on_sigterm(_signum, _frame):
    raise KeyboardInterrupt  # `kill PID`: stop like Ctrl-C, so the run ends cleanly (exit 130)
