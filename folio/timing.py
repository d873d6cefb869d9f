"""Per-stage timings for benchmarks: `FOLIO_TIMINGS=1 folio query ...` prints them on stderr.

Lap style: `lap(name)` charges the time since the previous lap to `name`, so the stages of one
command add up to its in-process time. Off (the default) a lap is one clock read and a branch.
Must not import anything heavy: it loads with cli.
"""

from __future__ import annotations

import json
import os
import time

ON = os.environ.get("FOLIO_TIMINGS", "") not in ("", "0")
_spent: dict[str, float] = {}
_last = [time.perf_counter()]


def lap(name: str) -> None:
    now = time.perf_counter()
    if ON:
        _spent[name] = _spent.get(name, 0.0) + now - _last[0]
    _last[0] = now


def line() -> str:
    """One stderr line: `folio timings: {"stage": ms, ...}` in the order the stages first ran."""
    return "folio timings: " + json.dumps({k: round(v * 1000, 3) for k, v in _spent.items()})
