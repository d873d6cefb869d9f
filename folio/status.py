"""`folio status`: what the index holds, gathered as data (render prints it).

Reads the store and stats the corpus; opens only a file whose stat alone cannot tell a touched file
from a changed one (changes.changed: the verdict an index run reaches). Must not print.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from folio.reader import VERSION as READER_VERSION


def gather(root: Path, settings, key: str | None = None) -> dict:
    """What the index holds; with `key`, also every value of that frontmatter key (document counts)."""
    wanted = key
    from folio.changes import changed as is_changed
    from folio.store import Store, Vanished
    from folio.walk import walk

    for attempt in range(3):
        store = Store.open(root)
        try:
            with store.snapshot():
                try:
                    store.check()
                except Vanished:  # a writer compacted since the snapshot began: look again
                    if attempt == 2:
                        raise
                    continue
                counts = store.counts()
                waiting, waiting_files = store.pending_counts() if store.dim else (0, 0)
                meta = store.meta
                stamps = store.stamps()
                keys: Counter = Counter()
                values: dict[str, Counter] = {}  # key -> how many documents hold each value
                for _fid, raw in zip(*store.frontmatter_table(), strict=False):
                    fm = json.loads(raw)
                    keys.update(fm.keys())
                    for k, v in fm.items():
                        values.setdefault(k, Counter()).update(
                            {_text(x) for x in (v if isinstance(v, list) else [v]) if x not in (None, "")})
                size = store.size_on_disk()
            break
        finally:
            store.close()
    entries, _ = walk(root, settings["extensions"], settings["exclude"])
    seen = {e.path for e in entries}
    # three different things, said apart: a file never indexed (a run stopped before it, or added
    # since) has not "changed since indexing"
    unindexed = sum(1 for e in entries if e.path not in stamps)
    changed = sum(1 for e in entries
                  if (s := stamps.get(e.path)) is not None and is_changed(root, e.path, e.size, e.mtime_ns, s))
    deleted = sum(1 for p in stamps if p not in seen)
    differs = []
    if meta.dim and meta.text != READER_VERSION:
        differs.append("the vectors were embedded from an older record text (the source lines); the next "
                       "`folio index` that reaches the server re-embeds every section as a reader sees it")
    for key, was in (("endpoint", meta.endpoint), ("model", meta.model)):
        now = settings[key]
        if was and now != was and settings.source(key) != "default":
            differs.append(f"{settings.source(key)} now names {key} {now}; the index was built with "
                           f"{was} (queries use the recorded one; `folio index` re-embeds if the "
                           f"space differs)")
    differs += _roles_differ(settings, meta)
    from folio import running, space

    budget = space.indexed_budget(settings, meta)
    return {
        "root": str(root),
        "index": str(root / ".folio"),
        "files": counts["files"],
        "sections": counts["sections"],
        "embedded": counts["embedded"],
        "truncated": counts["truncated"],
        "changed": changed,
        "unindexed": unindexed,
        "deleted": deleted,
        "waiting": waiting,
        "waiting_files": waiting_files,
        "unfinished": meta.unfinished is not None,
        # the run writing the index now, as it says (running.py): how far, about how long is left
        "running": running.current(root),
        "model": meta.model if meta.dim else None,
        "endpoint": meta.endpoint if meta.dim else None,
        "dim": meta.dim or None,
        "roles": _roles(meta) if meta.dim else None,
        "text": (meta.text or "source") if meta.dim else None,
        "budget": budget.chars,
        # why that budget: "setting" (max_chars), "index" (the index's own, max_chars at its default)
        "budget_from": budget.source,
        "budget_text": budget.describe(),
        # the most tokens the server takes in one input (records over it are divided by its counts);
        # 0: the server counts none for folio; null: not learned yet (no server, or an older folio)
        "tokens": meta.tokens,
        "tokens_from": meta.tokens_from if meta.tokens is not None else None,
        "bytes": size,
        "dead_rows": counts["dead_rows"],
        "format": meta.format or 0,
        "frontmatter_keys": dict(sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))),
        # a few values per key, the most common first: what to write after --where KEY= or what
        # --exclude-pointed-by KEY will compare (ids, or paths: then --identity @path)
        "frontmatter_samples": {k: [v for v, _n in _by_count(c)[:SAMPLES]] for k, c in sorted(values.items())},
        "frontmatter_values": ({wanted: dict(_by_count(values.get(wanted, Counter())))} if wanted else None),
        "config_differs": differs,
    }


def _roles_differ(settings, meta) -> list[str]:
    """A note when the settings (or the preset they pick) name other roles than the index recorded.
    With the model only called `default`, the server's id decides at the next `folio index`: no note."""
    from folio import space

    if not meta.dim:
        return []
    model = space.in_force(settings, meta).model
    if space.needs_server_name(settings, model):
        return []
    now, was = space.roles(settings, model), space.recorded_roles(meta)
    notes = []
    if now.document != was.document:
        notes.append(f"the settings now give the document role {now.document.describe()}; the index was embedded "
                     f"with {was.document.describe()} (the next `folio index` re-embeds if the space differs)")
    if now.query != was.query:
        notes.append(f"the settings now give the query role {now.query.describe()}; queries use the recorded "
                     f"{was.query.describe()} until the next `folio index`")
    return notes


def _roles(meta) -> dict:
    """The query/document roles the index's vectors were embedded with (queries use them)."""
    from folio import space

    r = space.recorded_roles(meta)
    src = {"settings": "set in the settings", "none": "no preset for this model"}.get(
        r.source, r.source.replace("preset ", "the preset for "))
    return {"query": r.query.describe(), "document": r.document.describe(), "family": r.family,
            "from": src + (f", model {r.model_name}" if r.model_name and r.source != "settings" else ""),
            "query_prefix": r.query.prefix, "document_prefix": r.document.prefix,
            "query_fields": r.query.fields, "document_fields": r.document.fields}


SAMPLES = 3


def _by_count(c: Counter) -> list[tuple[str, int]]:
    return sorted(c.items(), key=lambda vn: (-vn[1], vn[0]))


def _text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def truncated(root: Path) -> list:
    from folio.store import Store

    store = Store.open(root)
    try:
        return store.truncated_rows()
    finally:
        store.close()


def each(roots: list[Path], read) -> tuple[list, list[str]]:
    """`read(root)` for every corpus: (what the readable ones gave, in order; the sentence for each one
    refused). One corpus refused (a damaged index, one another program wrote, ...) leaves the others
    reported (the caller says the refusals after them); with one corpus its error is raised. SQLite's
    error on a page it could not read is named as this corpus's index's damage."""
    from folio.errors import FolioError
    from folio.store import damage_among

    got, refused = [], []
    for root in roots:
        try:
            got.append(read(root))
        except Exception as e:  # the store's sentence for its damage names the index
            if not isinstance(e, FolioError):  # SQLite's, met mid-read, names none: this root's index.db it is
                found = damage_among(e, [root])
                if found is None:
                    raise
                e = found[1]
            if len(roots) == 1:
                raise e from None
            said = str(e)
            refused.append(said if str(root) in said else f"{root}: {said}")
    return got, refused
