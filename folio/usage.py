"""A usage error, as every error is said: one sentence on stderr starting `folio:`, exit 2, whether
click found it (an unknown option, a missing argument, a value out of range) or folio did. Owns
what click's own sentences get added (the help that lists what a command takes; a question or path
starting with '-' goes after `--`). Prints through console.py; used by cli.py alone.
"""

from __future__ import annotations

import sys

import click

from folio.console import err

POSITIONAL = {"query": "a question", "show": "a path", "similar": "a path"}


def dash_hint(e: click.NoSuchOption) -> None:
    """A question or path starting with '-' (`folio query "--fail-swap-on"`, a file `-x.md`) is read
    as an option: say, after click's own sentence (and the option it thinks was meant), to put it
    after `--`."""
    name = e.ctx.command.name if e.ctx is not None else None
    if name not in POSITIONAL:
        return
    import shlex

    given = next((a for a in sys.argv[1:] if a.startswith(e.option_name)), e.option_name)
    e.message = (f"{e.format_message()} {POSITIONAL[name].capitalize()} that starts with '-' goes after `--`, "
                 f"the options before it: folio {name} [OPTIONS] -- {shlex.quote(given)}")
    e.possibilities = None  # said above


def said(e: click.UsageError) -> int:
    """A usage error as every error is said: one sentence on stderr starting `folio:` (exit 2), whatever
    the command and whether click or folio found it; click's own (an unknown option, a missing
    argument, a value out of range) name the help that lists what the command takes. `folio` alone
    prints its help, as click does, then that sentence."""
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)
    if no_args is not None and isinstance(e, no_args):
        e.show()
        err("folio: name a command (the list above); `folio COMMAND --help` says what it takes")
        return 2
    said = e.format_message()
    if type(e) is not click.UsageError and e.ctx is not None:  # click's sentence: where to look
        said += f" (`{e.ctx.command_path} --help` lists what it takes)"
    err(f"folio: {said}")
    return 2
