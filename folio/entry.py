"""The `folio` command's entry point: what a command can start before click and its own imports load,
then cli.main. `folio index` begins listing the tree here (readahead.walk_early), so the listing
overlaps the indexer's imports, the lock, the store and its stamps; and when its argv holds only
index's own options (index_command.plain) it runs without click, whose import alone is ~45 ms.
Must stay as light as it is: everything it imports, every command pays for.
"""

from __future__ import annotations

import contextlib
import os
import sys


def utf8_mode() -> None:
    """Run in Python's UTF-8 mode whatever the locale: under `LC_ALL=C` (with PYTHONUTF8=0, which
    keeps Python from choosing it itself) file names and arguments would be decoded as ASCII, every
    non-ASCII name taken for bytes that are not UTF-8 and its file for a deleted one. The process
    starts again as it was started (the same bytes), with `-X utf8` and PYTHONUTF8=1 for what it
    starts; names that truly are not UTF-8 stay surrogate escapes, as before. Nothing is imported."""
    if sys.flags.utf8_mode or sys.getfilesystemencoding().lower().replace("-", "") == "utf8" or not sys.executable:
        return
    env = dict(os.environ, PYTHONUTF8="1")
    try:
        os.execve(sys.executable, [sys.executable, "-X", "utf8", *sys.orig_argv[1:]], env)
    except OSError:
        return  # cannot start again: go on as the locale says


def main() -> None:
    utf8_mode()
    if sys.argv[1:2] != ["index"]:
        from folio.cli import main as cli_main

        return cli_main()
    from folio import index_command, readahead

    opts = index_command.plain(sys.argv[2:])
    readahead.walk_early(opts)
    try:
        if opts is None:  # help, a usage error, anything unusual: click reads it
            from folio.cli import main as cli_main

            cli_main()
            code = 0
        else:
            from folio import console

            code = console.run(lambda: index_command.index_plain(opts))
    except SystemExit as e:
        if not isinstance(e.code, int | None):
            raise
        code = e.code or 0
    finally:
        readahead.close_early()
    # `folio index` has closed its store, its child and its workers, and said everything: the
    # interpreter's teardown of what it imported (a tenth of a no-op run) changes nothing.
    for f in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            f.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
