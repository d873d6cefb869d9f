"""The vector space in force: which endpoint, model and key embed, and whether two spaces are one.

Owns the rule that an index keeps the endpoint and model that built it unless a setting names
another, the Target a run embeds through, the fingerprint (the vector the endpoint returns for
embed.PROBE_TEXT, stored in the index as the hex of little-endian float32) and the same-space
verdict (cosine >= SAME_SPACE), and the budget calibration: how many tokens the server takes in
one input (Tokens, learned by limit_probe). It returns verdicts; callers act on them. Must not write
the store or know about files; numpy is imported only where a vector is read.
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


# -- the budget calibration: the server's token limit ----------------------------------------


@dataclass(frozen=True)
class Tokens:
    """How many tokens the server takes in one input, and where folio learned it: the budget
    calibration. A record over `limit` is divided by the server's own token counts
    (sections.divide_to_tokens); the others stay whole, so no record's division depends on another
    file. limit 0: the server counts no tokens for folio (no /tokenize): records are divided by the
    character budget, and a record the server refuses is divided on its own.

    source: `context` (llama-server's /v1/models context, a probe that long taken whole) | `batch`
    (refused: "... current batch size: M") | `refusal` (refused, naming another limit) | `none`."""

    limit: int
    source: str

    @classmethod
    def recorded(cls, meta: dict) -> Tokens | None:
        v = meta.get("tokens")
        return cls(int(v), meta.get("tokens_from") or "") if v is not None and str(v).isdigit() else None

    def meta(self) -> dict:
        return {"tokens": self.limit, "tokens_from": self.source}

    def describe(self) -> str:
        if not self.limit:
            return "no token limit (the server counts no tokens for folio)"
        why = {"context": "the model's context", "batch": "its physical batch"}.get(self.source, "its limit")
        return f"{self.limit} tokens an input ({why})"


def limit_probe(client) -> tuple[str, int] | None:
    """(text, n): a text of exactly n tokens, n the model's context by llama-server's /v1/models,
    counted by its /tokenize. Sent with the fingerprint probe: a server that takes it takes any input
    that long, and one that refuses it names its real limit (the physical batch, `-ub`). None when the
    server says neither its context nor its counts."""
    ctx = client.context()
    if not ctx:
        return None
    empty = client.count_tokens("")
    if empty is None:
        return None
    k = ctx - empty
    for _ in range(8):
        if k < 1:
            return None
        text = " ".join(["a"] * k)
        n = client.count_tokens(text)
        if n is None:
            return None
        if n == ctx:
            return text, ctx
        step = round(k * (ctx - empty) / max(1, n - empty)) - k  # a word may not be one token
        k += step if step else (1 if n < ctx else -1)
    return None


def learned_tokens(probe: tuple[str, int] | None, refusal) -> Tokens:
    """What the limit probe showed: taken whole (the context), or refused with the server's limit."""
    if probe is None:
        return Tokens(0, "none")
    if refusal is None:
        return Tokens(probe[1], "context")
    if refusal.kind == "too_large" and refusal.limit:
        return Tokens(min(refusal.limit, probe[1]), "batch" if "batch size" in refusal.server else "refusal")
    return Tokens(0, "none")
