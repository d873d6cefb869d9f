"""The vector space in force: which endpoint, model and key embed, and whether two spaces are one.

Owns the rule that an index keeps the endpoint and model that built it unless a setting names
another, the Target a run embeds through, the fingerprint (the vector the endpoint returns for
embed.PROBE_TEXT, stored in the index as the hex of little-endian float32) and the same-space
verdict (cosine >= SAME_SPACE). It returns verdicts; callers act on them. Must not write the store
or know about files; numpy is imported only where a vector is read.
"""

from __future__ import annotations

from dataclasses import dataclass

SAME_SPACE = 0.999  # fingerprint cosine at or above which two endpoints/models are one vector space


@dataclass
class Target:
    """Where vectors come from for this run."""

    endpoint: str
    model: str
    endpoint_source: str
    api_key: str | None
    batch_size: int = 32
    jobs: int = 1
    timeout: float = 60.0


@dataclass(frozen=True)
class InForce:
    """The endpoint and model a command uses for an index, and where each came from."""

    endpoint: str
    endpoint_source: str  # as the index records it: flag, env FOLIO_ENDPOINT, folio.yaml, user config, default
    model: str
    endpoint_recorded: bool  # the endpoint is the one the index recorded (no setting names another)
    model_recorded: bool

    @property
    def key_source(self) -> str:
        """What the API-key policy judges: a recorded endpoint is vetted as one (`.folio/` may come from
        anywhere), whatever source the index says it was set by."""
        return "index" if self.endpoint_recorded else self.endpoint_source


def in_force(settings, meta: dict) -> InForce:
    """An index remembers what built it: only an explicit setting (flag, env, folio.yaml, user config)
    points it elsewhere, never a default. `meta`: the index's meta ({} when there is no index)."""
    endpoint, source, model = settings["endpoint"], settings.source("endpoint"), settings["model"]
    ep_recorded = source == "default" and bool(meta.get("endpoint"))
    if ep_recorded:
        endpoint, source = meta["endpoint"], meta.get("endpoint_source") or "index"
    model_recorded = settings.source("model") == "default" and bool(meta.get("model"))
    if model_recorded:
        model = meta["model"]
    return InForce(endpoint, source, model, ep_recorded, model_recorded)


def target(settings, meta: dict) -> tuple[Target, object]:
    """(Target, the key decision) for `folio index`: the endpoint and model in force (in_force)."""
    from folio.config import key_policy

    place = in_force(settings, meta)
    decision = key_policy(place.endpoint, place.key_source, settings)
    return Target(place.endpoint, place.model, place.endpoint_source, settings["api_key"] if decision.send else None,
                  settings["batch_size"], settings["jobs"], settings["timeout"]), decision


def recorded_target(settings, meta: dict) -> tuple[Target, object]:
    """(Target, the key decision) for what the index recorded, whatever the settings name now: a query
    embeds its question, and refreshes the files behind its rows, in the index's own space."""
    from folio.config import key_policy

    decision = key_policy(meta["endpoint"], "index", settings)
    return Target(meta["endpoint"], meta.get("model") or "", meta.get("endpoint_source") or "index",
                  settings["api_key"] if decision.send else None, settings["batch_size"], 1), decision


# -- the fingerprint --------------------------------------------------------------------------


def encode_fingerprint(vec) -> str:
    return vec.astype("<f4").tobytes().hex()


def fingerprint(meta: dict):
    """The fingerprint an index recorded, as a float32 vector (empty when none was recorded)."""
    import numpy as np

    return np.frombuffer(bytes.fromhex(meta.get("fingerprint") or ""), dtype="<f4")


def same_space(a, b) -> bool:
    """Whether two fingerprints (vectors of one probe text) name one vector space."""
    from folio.embed import cosine

    return cosine(a, b) >= SAME_SPACE
