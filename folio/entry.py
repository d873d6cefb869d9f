"""The `folio` command's entry point: what a command can start before click and its own imports load,
then cli.main. `folio index` begins listing the tree here (readahead.walk_early), so the listing
overlaps the ~50 ms click costs to import as well as the indexer's imports, the lock, the store and
its stamps. Must stay as light as it is: everything it imports, every command pays for.
"""

from __future__ import annotations

import contextlib
import os
import sys


def main() -> None:
    if sys.argv[1:2] != ["index"]:
        from folio.cli import main as cli_main

        return cli_main()
    from folio import readahead

    readahead.walk_early(sys.argv[1:])
    try:
        from folio.cli import main as cli_main

        cli_main()
        code = 0
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
