"""What one exhaustive scan costs per million sections, at each dimension (docs/performance.md).

    python bench/scan_cost.py [--rows 1000000] [--dims 384,768,1024] [--reps 9] [--dir /tmp]

Writes a matrix of --rows random L2-normalised float32 rows per dimension to a file under --dir
(removed after), maps it read-only as a query does (numpy.memmap), and times `M @ q` plus one
argpartition for the top 10, warm (the file in the page cache: its pages read once first), in
this process: the floor of the scan a query makes, with no Python start-up, import or request.
Prints the median per scan, per million rows, and the matrix's bytes per million rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dims", default="384,768,1024")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.1f}; {a.rows:,} rows; median of {a.reps} warm scans")
    for dim in (int(d) for d in a.dims.split(",")):
        path = a.dir / f"scan-cost-{os.getpid()}-{dim}.f32"
        try:
            with open(path, "wb") as fh:
                for i in range(0, a.rows, 65536):
                    block = rng.standard_normal((min(65536, a.rows - i), dim), dtype=np.float32)
                    block /= np.linalg.norm(block, axis=1, keepdims=True)
                    fh.write(block.tobytes())
            m = np.memmap(path, dtype="<f4", mode="r", shape=(a.rows, dim))
            q = rng.standard_normal(dim, dtype=np.float32)
            q /= np.linalg.norm(q)
            float((m @ q).sum())  # pages in
            times = []
            for _ in range(a.reps):
                t = time.perf_counter()
                s = m @ q
                np.argpartition(-s, 10)[:10]
                times.append(time.perf_counter() - t)
            ms = statistics.median(times) * 1000
            print(f"dim {dim:5d}: {ms:7.1f} ms a scan, {ms / (a.rows / 1e6):7.1f} ms per million rows "
                  f"(min {min(times) * 1000:.1f}); matrix {dim * 4 * 1e6 / 2**30:.2f} GiB per million rows")
            del m
        finally:
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
