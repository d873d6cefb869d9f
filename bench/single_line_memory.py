"""Peak memory of `folio index` on one huge single-line Markdown file (issue 15, item 9).

A 49 MB file that is one line of words is one record whose body the lexical plane reads whole.
Prints the file size, folio's peak RSS (ru_maxrss of the child) and the ratio; run by hand:

    python bench/single_line_memory.py [--mb 49] [--distinct 100000]

`--distinct` is how many distinct words the line draws from (the worst case is every word distinct).
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fake_server, folio_cmd  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=49)
    ap.add_argument("--distinct", type=int, default=100_000)
    a = ap.parse_args()
    rng = random.Random(1)
    stems = ["alpha", "beta", "gamma", "delta", "lighthouse", "keeper", "kettle", "wick", "revenue", "timing"]
    vocab = [rng.choice(stems) + str(i) for i in range(a.distinct)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        size, parts = 0, []
        while size < a.mb * 1e6:
            w = rng.choice(vocab)
            parts.append(w)
            size += len(w) + 1
        (root / "huge.md").write_text("# Huge\n\n" + " ".join(parts) + "\n")
        del parts
        file_mb = (root / "huge.md").stat().st_size / 1e6
        srv = fake_server(dim=64, cheap=True)
        try:
            t = time.perf_counter()
            r = subprocess.run([*folio_cmd(), "index", "--endpoint", srv.url], cwd=root, capture_output=True,
                               text=True)
            secs = time.perf_counter() - t
        finally:
            srv.stop()
        if r.returncode != 0:
            sys.exit(r.stderr)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"file {file_mb:.1f} MB ({a.distinct} distinct words), peak RSS {peak_mb:.0f} MB "
              f"= {peak_mb / file_mb:.1f}x the file, {secs:.1f} s")


if __name__ == "__main__":
    main()
