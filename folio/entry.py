"""The `folio` command's entry point: what a command can start before click and its own imports load,
then cli.main. `folio index` begins listing the tree here (readahead.walk_early), so the listing
overlaps the ~50 ms click costs to import as well as the indexer's imports, the lock, the store and
its stamps. Must stay as light as it is: everything it imports, every command pays for.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] != ["index"]:
        from folio.cli import main as cli_main

        return cli_main()
    from folio import readahead

    readahead.walk_early(sys.argv[1:])
    try:
        from folio.cli import main as cli_main

        return cli_main()
    finally:
        readahead.close_early()


if __name__ == "__main__":
    main()
