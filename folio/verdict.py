"""A probe's verdict: what `folio doctor` (doctor.py) and its speed probe (estimate.py) return.

Owns `Check` and its three statuses. Must not probe, print or read anything: it is the shape the
probes share, so neither has to import the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class Check:
    """One probe's verdict. `status`: pass | fail | skip. `summary` is one line; on a failure it
    carries the server's own sentence and the fix. `data` holds the measured values."""

    name: str
    status: str
    summary: str
    detail: tuple[str, ...] = ()
    data: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool | None:
        return None if self.status == SKIP else self.status == PASS


def skip(name: str, why: str, data: dict | None = None) -> Check:
    return Check(name, SKIP, why, data=data or {})
