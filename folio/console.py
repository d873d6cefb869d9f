"""The terminal: the only place that writes to stdout/stderr and the one place errors become exit
codes (0 ok, 1 error, 2 usage, 130 interrupted). cli.py's commands write through it; so does
`folio index` run without click (folio.entry, index_command.py), so it imports nothing click needs.

Writes behave as click.echo's do: a line at a time, flushed, ANSI sequences dropped when the stream
is not a terminal. A reader that goes away (`| head`) ends the output quietly, exit 0.
"""

from __future__ import annotations

import os
import sys

from folio.errors import FolioError


def out(text: str, *, exact: bool = False) -> None:
    """A line (or lines) on stdout. `exact`: written as it is even off a terminal (a file's own lines,
    `folio show`), where other output has its ANSI sequences dropped."""
    if text:
        try:
            _write(sys.stdout, text + "\n", exact)
        except BrokenPipeError:
            # The reader went away (`| head`): what is left has nowhere to go; finish quietly, exit 0.
            quiet_pipe()


def stdout_is_terminal() -> bool:
    return _isatty(sys.stdout)


def err(text: str) -> None:
    from folio.render import one_line

    _write(sys.stderr, one_line(text) + "\n")  # a path named in it cannot split the line or drive the terminal


def err_raw(text: str) -> None:
    """Terminal control for the progress line (no newline added, nothing escaped)."""
    _write(sys.stderr, text)


def out_bytes(data: bytes) -> None:
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        quiet_pipe()


def _write(stream, text: str, exact: bool = False) -> None:
    if stream is None:
        return
    if "\033" in text and not exact and not _isatty(stream):
        import re

        text = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", text)  # what click strips off a terminal
    try:
        stream.write(text)
    except UnicodeEncodeError:  # a stream that cannot hold every character (PYTHONIOENCODING=ascii)
        stream.write(_escaped(text, stream.encoding or "ascii"))
    stream.flush()


def _escaped(text: str, encoding: str) -> str:
    """`text` with each character `encoding` cannot hold written as \\uXXXX (a pair for one past the
    BMP): in --json output such characters only occur inside strings, so it stays JSON that parses
    back to the same text; in plain output the character is still named."""
    def escape(c: str) -> str:
        o = ord(c)
        if o < 0x10000:
            return f"\\u{o:04x}"
        o -= 0x10000
        return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"

    out = []
    for c in text:
        try:
            c.encode(encoding)
            out.append(c)
        except UnicodeEncodeError:
            out.append(escape(c))
    return "".join(out)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):
        return False


def interrupted(e: BaseException | None) -> str:
    """The last line of a run stopped by Ctrl-C (or SIGTERM): `folio: interrupted`, and what was kept
    when the command said it (a KeyboardInterrupt carrying a sentence: `folio index`'s)."""
    said = str(e) if isinstance(e, KeyboardInterrupt) else ""
    return "folio: interrupted" + (f": {said}" if said else "")


def run(call) -> int:
    """`call()` with every error folio expects rendered once, as a sentence on stderr: the exit code
    (call's own when it returns an int). What is left over is a bug, and keeps its traceback."""
    try:
        rv = call()
        code = rv if isinstance(rv, int) else 0
    except FolioError as e:
        flush_quietly()
        err(f"folio: {e}")
        code = e.exit_code
    except KeyboardInterrupt as e:
        err(interrupted(e))
        code = 130
    except BrokenPipeError:
        quiet_pipe()
        code = 0
    except Exception as e:
        from folio.errors import disk_full, full_sentence

        if disk_full(e):  # a query's refresh, or a write no command caught: the same sentence
            flush_quietly()
            err(f"folio: {full_sentence(e, 'the index')}")
        elif damaged(e):
            flush_quietly()
            if isinstance(e, ValueError):  # JSON the store wrote, edited by hand or overwritten
                e = f"a frontmatter or heading trail stored in .folio/index.db is not valid JSON: {e}"
            err(f"folio: the index is damaged ({e}); run `folio index --rebuild` to build it anew")
        else:
            raise
        code = 1
    flush_quietly()
    return code


def damaged(e: Exception) -> bool:
    """A SQLite error that means the file is corrupt, wherever the store met it (the store names the
    path where it can; this catches a bad page found in the middle of a read), or stored JSON that
    does not parse (folio only ever parses JSON it wrote itself, in index.db; the server's answers
    are read and judged in embed.py)."""
    import json

    from folio.store import sqlite_damage

    return isinstance(e, json.JSONDecodeError) or sqlite_damage(e)


def flush_quietly() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_pipe()


READER_GONE = False  # stdout's reader went away: what a command that goes on (a watcher) checks to stop


def quiet_pipe() -> None:
    # The reader went away (`folio query ... | head`): stop writing, exit quietly.
    global READER_GONE
    READER_GONE = True
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
