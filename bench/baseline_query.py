"""The bare query baseline: the floor folio's whole-process query is compared with.

Imports numpy and httpx, makes one HTTP round trip for the query text (base64, as folio asks),
maps the same matrix, one `M @ q` and one `argpartition`, prints the top rows. Nothing else: no
config, no SQLite, no filters, no freshness, no rendering beyond slot numbers.

    python bench/baseline_query.py MATRIX ROWS DIM ENDPOINT MODEL TEXT [K]

With FOLIO_TIMINGS=1 it prints `bare timings: {...}` (ms) on stderr, stage names as folio's
(FOLIO_TIMINGS=cpu: process CPU time, as folio's).
"""

import os  # noqa: I001
import time

clock = time.process_time if os.environ.get("FOLIO_TIMINGS") == "cpu" else time.perf_counter
t0 = clock()
import base64  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

t1 = clock()
path, rows, dim, endpoint, model, text = sys.argv[1:7]
k = int(sys.argv[7]) if len(sys.argv) > 7 else 5
rows, dim = int(rows), int(dim)
r = httpx.post(endpoint, json={"model": model, "input": [text], "encoding_format": "base64"}, timeout=30)
q = np.frombuffer(base64.b64decode(r.json()["data"][0]["embedding"]), dtype="<f4")
t2 = clock()
m = np.memmap(path, dtype="<f4", mode="r", shape=(rows, dim))
s = m @ q
top = np.argpartition(-s, k - 1)[:k]
top = top[np.argsort(-s[top])]
t3 = clock()
print("\n".join(f"{i} {s[i]:.3f}" for i in top.tolist()))
if os.environ.get("FOLIO_TIMINGS"):
    print("bare timings: " + json.dumps({"imports": round((t1 - t0) * 1000, 3), "request": round((t2 - t1) * 1000, 3),
                                         "scan": round((t3 - t2) * 1000, 3)}), file=sys.stderr)
