"""Per-stage timings for benchmarks: `FOLIO_TIMINGS=1 folio query ...` prints them on stderr
(wall clock; `FOLIO_TIMINGS=cpu` charges process CPU time instead, which a loaded machine
barely moves).

Lap style: `lap(name)` charges the time since the previous lap to `name`, so the stages of one
command add up to its in-process time. Off (the default) a lap is one clock read and a branch.
Must not import anything heavy: it loads with cli.
"""

from __future__ import annotations

import os
import time

ON = os.environ.get("FOLIO_TIMINGS", "") not in ("", "0")
_clock = time.process_time if os.environ.get("FOLIO_TIMINGS") == "cpu" else time.perf_counter
_spent: dict[str, float] = {}
_last = [_clock()]


def lap(name: str) -> None:
    now = _clock()
    if ON:
        _spent[name] = _spent.get(name, 0.0) + now - _last[0]
    _last[0] = now


def start() -> None:
    """Turn laps on in this process (a bench calling folio in-process) and begin again from zero."""
    global ON
    ON = True
    _spent.clear()
    _last[0] = _clock()


def spent() -> dict[str, float]:
    """Seconds charged to each stage since start (or since the process began, under FOLIO_TIMINGS)."""
    return dict(_spent)


def line() -> str:
    """One stderr line: `folio timings: {"stage": ms, ...}` in the order the stages first ran."""
    import json  # here: folio.entry imports this module before it forks the walk

    return "folio timings: " + json.dumps({k: round(v * 1000, 3) for k, v in _spent.items()})
