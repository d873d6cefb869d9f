"""Frontmatter filters (`--where`) and the precedence join (`--exclude-pointed-by` with `--identity`).

Owns the predicate grammar, matching on the source text of flattened frontmatter, the `@path`
identity rule, turning per-file verdicts into a record mask with numpy, and the documents the
filters keep (`folio ls`). Predicates are evaluated once per distinct frontmatter (frontmatter
belongs to a document, not a section), never per record: so a document passes exactly when its
records do, and `folio ls` keeps the documents whose records a query would keep. Sentences name
options through folio.surface (flags on the command line, tool arguments over MCP). Reads only what
the store it is handed offers; must not print or write anything.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from dataclasses import dataclass

from folio.errors import FolioError
from folio.surface import mcp, opt


def grammar() -> str:
    """How to write a filter, for the sentence that refuses one."""
    head = ("write key=value (equal; for a list, contains), key~=value (one item of a comma-separated value "
            "or a list), key!=value (differs, or key absent), key (present) or !key (absent), '|' between "
            "whole alternatives inside one ")
    if mcp():
        return head + ('`where` item, and one item per predicate that must hold (all ANDed), e.g. '
                       'where: ["status=Final|status=Living", "category=Core"]')
    return head + "--where, and repeat --where for predicates that must all hold, e.g. --where 'status=Final|status=Living'"

# Characters that make an operator; a key may not contain them (`version>=7` is refused, not read
# as the key `version>`).
_OPERATOR_CHARS = "=!<>~|"
PATH_IDENTITY = "@path"

# The YAML 1.1 spellings sections.py turns into JSON true/false/null: the source text is gone by
# then, so a predicate value in any of these spellings matches the stored constant.
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_NULL = frozenset({"null", "Null", "NULL", "~", ""})


@dataclass(frozen=True)
class Predicate:
    key: str
    op: str  # "=", "~=" (one item of a comma-separated value), "!=", "present", "absent"
    value: str | None = None

    def __str__(self) -> str:
        if self.op == "present":
            return self.key
        if self.op == "absent":
            return "!" + self.key
        return f"{self.key}{self.op}{self.value}"


@dataclass(frozen=True)
class Where:
    """One --where argument: alternatives ORed."""

    text: str
    alternatives: tuple[Predicate, ...]


@dataclass(frozen=True)
class Plan:
    """Every filter of one query, parsed: --where arguments (ANDed) and the join."""

    wheres: tuple[Where, ...]
    pointers: tuple[str, ...]
    identity: str
    hints: tuple[str, ...]


# ------------------------------------------------------------------------------------ parsing


def _refuse(arg: str, why: str) -> FolioError:
    return FolioError(f"{opt('--where', arg, quoted=True)} cannot be read ({why}): {grammar()}", exit_code=2)


def _key(raw: str, arg: str) -> str:
    key = raw.strip()
    if not key:
        raise _refuse(arg, "a predicate needs a key")
    bad = sorted({c for c in key if c in _OPERATOR_CHARS})
    if bad:
        raise _refuse(arg, f"{''.join(bad)!r} is not an operator folio knows")
    return key


def parse_predicate(part: str, arg: str) -> Predicate:
    s = part.strip()
    if not s:
        raise _refuse(arg, "an empty alternative")
    i = s.find("=")
    if i < 0:
        if s.startswith("!"):
            return Predicate(_key(s[1:], arg), "absent")
        return Predicate(_key(s, arg), "present")
    if i > 0 and s[i - 1] == "!":
        key, op = s[: i - 1], "!="
    elif i > 0 and s[i - 1] == "~":
        key, op = s[: i - 1], "~="
    else:
        key, op = s[:i], "="
    value = s[i + 1:].strip()
    if value.startswith("="):
        raise _refuse(arg, "'==' is not an operator folio knows; one '=' compares")
    return Predicate(_key(key, arg), op, value)


def parse_where(arg: str) -> tuple[Where, list[str]]:
    """One --where argument and the hints it earns (a bare word after `key=value|`)."""
    alternatives = tuple(parse_predicate(part, arg) for part in arg.split("|"))
    hints = []
    last_compared = None
    for p in alternatives:
        if p.op in ("=", "!=", "~="):
            last_compared = p
        elif p.op == "present" and last_compared is not None:
            hints.append(
                f"note: in {opt('--where', arg, quoted=True)}, {p.key!r} is a whole predicate (documents that have a "
                f"{p.key!r} key); for {last_compared.key}{last_compared.op}{p.key} write "
                f"'{last_compared.key}{last_compared.op}{last_compared.value}|"
                f"{last_compared.key}{last_compared.op}{p.key}'")
    return Where(arg, alternatives), hints


def _check_join_key(flag: str, key: str) -> None:
    if not key.strip():
        raise FolioError(f"{opt(flag)} needs a frontmatter key, e.g. {opt(flag, 'supersedes')}", exit_code=2)
    bad = sorted({c for c in key if c in _OPERATOR_CHARS})
    if bad:
        raise FolioError(f"{opt(flag, key, quoted=True)} names a key with {''.join(bad)!r} in it; {opt(flag)} takes "
                         f"a bare frontmatter key (filters on values go in {opt('--where')})", exit_code=2)


def parse(where=(), exclude_pointed_by=(), identity: str = "id") -> Plan:
    """Every filter of a query, or FolioError(exit 2) with the grammar. Call it before any work."""
    identity = identity.strip()
    wheres, hints = [], []
    for arg in dict.fromkeys(where):  # a predicate given twice is one predicate (and one hint)
        w, h = parse_where(arg)
        wheres.append(w)
        hints += h
    exclude_pointed_by = tuple(dict.fromkeys(exclude_pointed_by))
    for key in exclude_pointed_by:
        _check_join_key("--exclude-pointed-by", key)
    if exclude_pointed_by:
        if identity.startswith("@") and identity != PATH_IDENTITY:
            raise FolioError(f"{opt('--identity', identity, quoted=True)} is not known: use a frontmatter key, or "
                             f"{PATH_IDENTITY} to make a document's file path its identity", exit_code=2)
        if identity != PATH_IDENTITY:
            _check_join_key("--identity", identity)
    return Plan(tuple(wheres), tuple(k.strip() for k in exclude_pointed_by), identity, tuple(hints))


# ----------------------------------------------------------------------------------- matching


def _scalar_is(v, text: str) -> bool:
    if v is True:
        return text in _TRUE
    if v is False:
        return text in _FALSE
    if v is None:
        return text in _NULL
    return v == text


def value_matches(v, text: str) -> bool:
    """A stored value (scalar or list) against a predicate's text: exact, case-sensitive; lists by membership."""
    if isinstance(v, list):
        return any(_scalar_is(x, text) for x in v)
    return _scalar_is(v, text)


def items(v) -> list:
    """The items of a stored value for `~=`: a string split at its commas (each item stripped), a
    list's elements likewise; a constant (true, false, null) is one item."""
    out = []
    for x in v if isinstance(v, list) else [v]:
        out += [part.strip() for part in x.split(",")] if isinstance(x, str) else [x]
    return out


def item_matches(v, text: str) -> bool:
    return any(_scalar_is(x, text) for x in items(v))


def has_key(fm: dict, key: str) -> bool:
    """Present: the key itself, or a map flattened under it (`milestone` when `milestone.alpha` exists)."""
    if key in fm:
        return True
    prefix = key + "."
    return any(k.startswith(prefix) for k in fm)


def holds(p: Predicate, fm: dict) -> bool:
    if p.op == "=":
        return p.key in fm and value_matches(fm[p.key], p.value)
    if p.op == "~=":
        return p.key in fm and item_matches(fm[p.key], p.value)
    if p.op == "!=":
        return not (p.key in fm and value_matches(fm[p.key], p.value))
    if p.op == "present":
        return has_key(fm, p.key)
    return not has_key(fm, p.key)


def where_holds(w: Where, fm: dict) -> bool:
    return any(holds(p, fm) for p in w.alternatives)


# ------------------------------------------------------------------------------ @path identity


def normalise_path(p: str) -> str:
    """A pointer or a file path, reduced for comparison: `/` separators, no leading or trailing `/`,
    no `#fragment`, no `.`/`..` components, no trailing `README.md`/`index.md`/`.md`."""
    p = p.strip().replace("\\", "/").split("#", 1)[0]
    parts = [c for c in p.split("/") if c not in ("", ".", "..")]
    if parts and parts[-1].lower() in ("readme.md", "index.md"):
        parts.pop()
    if parts and parts[-1].lower().endswith(".md") and len(parts[-1]) > 3:
        parts[-1] = parts[-1][:-3]
    return "/".join(parts)


def path_identities(path: str) -> tuple[str, ...]:
    """A file's identities under @path: its normalised path and its directory (never the root)."""
    own = normalise_path(path)
    directory = normalise_path(posixpath.dirname(path.replace("\\", "/")))
    return tuple(dict.fromkeys(x for x in (own, directory) if x))


def _suffixes(p: str, most: int | None = None) -> list[str]:
    """`a/b/c` -> [`a/b/c`, `b/c`, `c`]: the tails at component boundaries (`most`: only the tails of
    at most that many components)."""
    parts = p.split("/")
    first = 0 if most is None else max(0, len(parts) - most)
    return ["/".join(parts[i:]) for i in range(first, len(parts))]


class PathPointers:
    """Pointers as paths. An identity is pointed at when, normalised, one ends with the other at a
    component boundary (a corpus may be indexed from inside the repository its pointers name).
    `depth`: the most components an identity tested has (the corpus's deepest path): a pointer's
    tails longer than that can match none, and keeping them all costs the square of its length."""

    def __init__(self, pointers, depth: int | None = None):
        self.exact: set[str] = set()
        self.tails: set[str] = set()
        for raw in pointers:
            p = normalise_path(raw)
            if p:
                self.exact.add(p)
                self.tails.update(_suffixes(p, depth))

        self.lasts = {p.rsplit("/", 1)[-1] for p in self.exact}

    def __bool__(self) -> bool:
        return bool(self.exact)

    def may_name(self, path: str) -> bool:
        """Cheap first test: when one path ends with the other, their last components are equal."""
        parts = path.replace("\\", "/").rsplit("/", 2)
        name = parts[-1]
        stem = name[:-3] if len(name) > 3 and name.lower().endswith(".md") else name
        return stem in self.lasts or (len(parts) > 1 and parts[-2] in self.lasts)

    def points_at(self, identity: str) -> bool:
        # the pointer ends with the identity, or the identity ends with the pointer
        return identity in self.tails or any(t in self.exact for t in _suffixes(identity))

    def names(self, path: str) -> bool:
        """Does some pointer name the file at this root-relative path (or its directory)?"""
        return bool(path) and self.may_name(path) and any(self.points_at(i) for i in path_identities(path))


# -------------------------------------------------------------------------------- evaluation


def _values(v) -> list[str]:
    """The string values of a stored value (pointers and identities: constants never point)."""
    if isinstance(v, list):
        return [x for x in v if isinstance(x, str) and x.strip()]
    return [v] if isinstance(v, str) and v.strip() else []


_KEY_REST = re.compile(r'((?:\.(?:[^"\\]|\\.)*)?)"\s*:\s*')  # rest of a key: a dotted tail, `": `


class Frontmatter:
    """The index's frontmatter as stored (one flat JSON object per file), read on demand: only the
    keys a query names (and keys flattened under them) are decoded, and each distinct text once
    (files without frontmatter, or with a copy of another file's, cost nothing more)."""

    def __init__(self, ids: list[int], raws: list[str], keys):
        self.ids = ids
        self.raws = raws
        self._needles = sorted({'"' + json.dumps(k, ensure_ascii=False)[1:-1] for k in keys})
        self._decoder = json.JSONDecoder()
        self._seen: dict[str, dict] = {}

    def get(self, raw: str) -> dict:
        """The part of one file's frontmatter under the query's keys."""
        fm = self._seen.get(raw)
        if fm is not None:
            return fm
        fm = {}
        # A key of a JSON object is a string right after `{` or `,`: inside a string every `"` is
        # escaped, so `, "status":` cannot occur in a value. str.find scans far faster than a regex.
        for needle in self._needles:
            i = raw.find(needle)
            while i >= 0:
                end = i + len(needle)
                m = _KEY_REST.match(raw, end)
                k = i - 1
                while k > 0 and raw[k] in " \t\r\n":
                    k -= 1
                if m and k >= 0 and raw[k] in "{,":
                    text = raw[i + 1: m.end(1)]
                    key = json.loads('"' + text + '"') if "\\" in text else text
                    fm[key] = self._decoder.raw_decode(raw, m.end())[0]
                i = raw.find(needle, end)
        self._seen[raw] = fm
        return fm

    @staticmethod
    def full(raw: str) -> dict:
        return json.loads(raw)


def _per_file(fms: Frontmatter, test) -> list[bool]:
    memo: dict[str, bool] = {}
    out = []
    for raw in fms.raws:
        r = memo.get(raw)
        if r is None:
            r = memo[raw] = bool(test(fms.get(raw)))
        out.append(r)
    return out


@dataclass(frozen=True)
class Pointers:
    """The join's pointer values, collected from every file (of one index, or of every queried index)."""

    values: tuple[str, ...]
    keys_seen: frozenset[str]


def _collect(fms: Frontmatter, keys) -> Pointers:
    values: list[str] = []
    seen: set[str] = set()
    for raw in set(fms.raws):
        fm = fms.get(raw)
        for key in keys:
            if key in fm:
                seen.add(key)
                values += _values(fm[key])
    return Pointers(tuple(values), frozenset(seen))


def collect_pointers(stores, exclude_pointed_by) -> Pointers:
    """The values of the pointer keys over every file of every store: a query over several indexes
    lets a document in one retire a document in another."""
    keys = [k.strip() for k in exclude_pointed_by]
    values: list[str] = []
    seen: set[str] = set()
    for store in stores:
        ids, raws = store.frontmatter_table()
        got = _collect(Frontmatter(list(ids), list(raws), keys), keys)
        values += got.values
        seen |= got.keys_seen
    return Pointers(tuple(values), frozenset(seen))


class EmptyHint(str):
    """A hint that is one of apply's reasons for an empty candidate set: moot when the query spans
    indexes and another has candidates, so search drops hints of this type (never by their words).
    A str, so every reader of hints shows it as before."""


def apply(store, slots, file_ids, where=(), exclude_pointed_by=(), identity: str = "id",
          pointers: Pointers | None = None, noun: str = "section"):
    """(keep mask over slots, documents dropped by the join, hints) for candidate records.

    `slots` and `file_ids` are parallel int arrays, one entry per candidate record. The join's
    pointers are collected from every file in the index, not only the candidates (or handed in as
    `pointers`, collected over several indexes). The count dropped is of documents, every one the
    --where predicates keep and the join drops, whichever of their records are candidates: so it is
    one number for one set of filters, whatever the mode or the question (`folio ls` gives it too).
    """
    import numpy as np

    plan = parse(where, exclude_pointed_by, identity)
    hints = list(plan.hints)
    keys = {p.key for w in plan.wheres for p in w.alternatives} | set(plan.pointers)
    if plan.pointers and plan.identity != PATH_IDENTITY:
        keys.add(plan.identity)
    ids, raws = store.frontmatter_table()
    fms = Frontmatter(list(ids), list(raws), keys)
    n = len(fms.ids)
    file_ids = np.asarray(file_ids, dtype=np.int64)
    # position of each file id in the table; records of a file the table lacks read as "no frontmatter"
    top = int(max(max(fms.ids, default=0), int(file_ids.max()) if len(file_ids) else 0))
    lut = np.full(top + 2, n, dtype=np.int64)
    lut[np.asarray(fms.ids, dtype=np.int64)] = np.arange(n, dtype=np.int64)
    pos = lut[file_ids]

    def expand(per_file: list[bool], for_missing: bool):
        arr = np.empty(n + 1, dtype=bool)
        arr[:n] = per_file
        arr[n] = for_missing
        return arr[pos]

    keep = np.ones(len(file_ids), dtype=bool)
    for w in plan.wheres:
        keep &= expand(_per_file(fms, lambda fm, w=w: where_holds(w, fm)), where_holds(w, {}))
        hints += _item_hints(w, fms, noun)
    if plan.wheres and len(file_ids) and not keep.any():
        hints += _empty_hints(plan, fms, pos, expand, n, noun)

    dropped = 0
    if plan.pointers:
        pointed, join_hints = _pointed_files(store, fms, plan, pointers or _collect(fms, plan.pointers),
                                             single=pointers is None)
        hints += join_hints
        keep &= ~expand(pointed, False)
        passing = _per_file(fms, lambda fm: all(where_holds(w, fm) for w in plan.wheres))
        dropped = sum(1 for gone, kept in zip(pointed, passing, strict=True) if gone and kept)
    return keep, dropped, hints


@dataclass(frozen=True)
class Listed:
    """One document the filters keep (`folio ls`)."""

    root: object  # Path
    path: str  # root-relative
    title: str
    frontmatter: dict
    freshness: str = "current"  # "stale": the file changed since, in a way `folio ls` cannot bring in
    stamp: object = None  # the store's Stamp: `folio ls` stats the file against it (changes.changed)


def documents(stores, where=(), exclude_pointed_by=(), identity: str = "id"):
    """`folio ls`: (the documents the filters keep, in root then path order; documents dropped by
    the join; hints). The filters are the query's, applied to one stand-in record per document:
    frontmatter belongs to the document, so a document is kept exactly when a query would keep its
    records, and the join runs over every document of every store, as a query's does."""

    from folio.store.records import Stamp

    pointers = collect_pointers(stores, exclude_pointed_by) if exclude_pointed_by and len(stores) > 1 else None
    out: list[Listed] = []
    dropped, hints, any_kept = 0, [], False
    for store in stores:
        ids = _documents(store)
        if where or exclude_pointed_by:
            keep, gone, said = apply(store, ids, ids, where, exclude_pointed_by, identity, pointers,
                                     noun="document")
            dropped += gone
            hints += [h for h in said if h not in hints]
            ids = ids[keep]
        any_kept = any_kept or len(ids) > 0
        files = store.files(ids.tolist())
        out += sorted((Listed(store.root, f["path"], f["title"], f["frontmatter"],
                              stamp=Stamp(f["id"], f["path"], f["size"], f["mtime_ns"], f["sha256"], f["stamped_ns"]))
                       for f in files.values()),
                      key=lambda d: d.path)
    if any_kept and len(stores) > 1:  # one index without a match is no empty answer
        hints = [h for h in hints if not isinstance(h, EmptyHint)]
    return out, dropped, hints


def _item_hints(w: Where, fms: Frontmatter, noun: str) -> list[str]:
    """A `key=value` that compares whole values, where some documents hold the value as one item of
    a comma-separated string (`requires: 1559, 2718`): how many, and the `~=` that matches them."""
    hints = []
    for p in w.alternatives:
        if p.op != "=" or "," in (p.value or ""):
            continue
        missed = _per_file(fms, lambda fm, p=p: p.key in fm and not value_matches(fm[p.key], p.value)
                           and item_matches(fm[p.key], p.value))
        n = sum(missed)
        if n:
            example = next(fms.get(raw)[p.key] for raw, m in zip(fms.raws, missed, strict=True) if m)
            hints.append(f"note: {n} document{' holds' if n == 1 else 's hold'} {p.value!r} as one item of a "
                         f"comma-separated {p.key!r} (e.g. {_shown(example)!r}), which {p} does not match (it "
                         f"compares whole values): {opt('--where', f'{p.key}~={p.value}', quoted=True)} matches "
                         f"one item")
    return hints


def _unmatched(fms: Frontmatter, plan: Plan, pointers: Pointers, paths: dict | None) -> list[str]:
    """The distinct pointer values that name no document of this index (its identities: the identity
    key's values, or with @path the files' paths), in order."""
    values = list(dict.fromkeys(v.strip() for v in pointers.values))
    if plan.identity == PATH_IDENTITY:
        ids, tails = set(), set()
        for path in (paths or {}).values():
            for i in path_identities(path):
                ids.add(i)
                tails.update(_suffixes(i))
        depth = max((i.count("/") + 1 for i in ids), default=1)  # a pointer's longer tails name nothing
        return [v for v in values if not ((p := normalise_path(v)) and (p in tails or any(
            t in ids for t in _suffixes(p, depth))))]
    ids = set()
    for raw in set(fms.raws):
        fm = fms.get(raw)
        if plan.identity in fm:
            ids.update(x.strip() for x in _values(fm[plan.identity]))
    return [v for v in values if v not in ids]


def _documents(store):
    """The file ids of a store's documents: every file that holds a section or frontmatter. A file
    with neither (skipped as binary, or empty) is indexed only so it is not read again: no query or
    filter reaches it, and `folio ls` does not list it."""
    import numpy as np

    table, raws = store.frontmatter_table()
    ids = np.asarray(table, dtype=np.int64)
    if not len(ids):
        return ids
    holding = np.zeros(int(ids.max()) + 1, dtype=bool)
    owners = np.asarray(store.live(vectors_only=False)[1], dtype=np.int64)
    holding[owners[owners <= ids.max()]] = True
    bare = np.fromiter((raw is None or raw == "{}" for raw in raws), dtype=bool, count=len(ids))
    return ids[holding[ids] | ~bare]


def _pointed_files(store, fms: Frontmatter, plan: Plan, pointers: Pointers,
                   single: bool = True) -> tuple[list[bool], list[str]]:
    """Per file of the table: is its identity named by any of the pointer values. `single`: the
    pointers were collected from this index alone."""
    hints = []
    values = pointers.values
    held = None
    for key in plan.pointers:
        if key not in pointers.keys_seen:
            if held is None:  # every key the documents hold, once: the closest is the likely meant one
                import difflib

                held = sorted(set().union(*(Frontmatter.full(raw) for raw in set(fms.raws) if raw)))
            # close only: `supersedes` must not be offered `superseded-by`, which points the other way
            close = difflib.get_close_matches(key, held, n=1, cutoff=0.85)
            hints.append(f"note: no document in the index has a {key!r} key"
                         + (f" (did you mean {close[0]!r}?)" if close else "")
                         + f", so {opt('--exclude-pointed-by', key)} drops nothing")
    if plan.identity == PATH_IDENTITY:
        paths = store.paths() if values else {}
        ptrs = PathPointers(values, max((p.count("/") + p.count("\\") + 1 for p in paths.values()), default=1))
        hints += _unmatched_hint(fms, plan, pointers, paths, single)
        return [ptrs.names(paths.get(fid, "")) for fid in fms.ids], hints
    wanted = set(values)
    key = plan.identity
    carried = False

    def named(fm: dict) -> bool:
        nonlocal carried
        if key not in fm:
            return False
        carried = True
        return any(v in wanted for v in _values(fm[key]))

    pointed = _per_file(fms, named)
    if not carried and values:
        hints.append(f"note: no document in the index has the identity key {key!r}; name the key that holds "
                     f"a document's identity with {opt('--identity', 'KEY')}, or use {opt('--identity', PATH_IDENTITY)} "
                     f"when the pointers are file paths")
    elif values and not any(pointed):
        paths = sorted(v for v in values if isinstance(v, str) and _looks_like_path(v))
        if paths and len(paths) * 2 >= len(values):
            keys = ", ".join(plan.pointers)
            hints.append(f"note: no document's {key!r} is named by any {keys} value, and those values look like "
                         f"file paths (e.g. {_example(paths)!r}): use {opt('--identity', PATH_IDENTITY)} to match them "
                         f"against the documents' paths")
            return pointed, hints  # that note says it: none matched
    if carried:
        hints += _unmatched_hint(fms, plan, pointers, None, single)
    return pointed, hints


def _unmatched_hint(fms, plan: Plan, pointers: Pointers, paths, single: bool) -> list[str]:
    """One note saying how many pointer values named no document (they drop nothing); only where the
    pointers were collected from this index alone (over several, one index's miss is another's match)."""
    if not single or not pointers.values:
        return []
    missed = _unmatched(fms, plan, pointers, paths)
    if not missed:
        return []
    total = len(set(v.strip() for v in pointers.values))
    keys = ", ".join(plan.pointers)
    return [f"note: {len(missed)} of the {total} {keys} value{'' if total == 1 else 's'} "
            f"name{'s' if len(missed) == 1 else ''} no document in the "
            f"index (e.g. {_example(missed)!r}), so they drop nothing"]


def _example(paths: list[str]) -> str:
    return min(paths, key=lambda v: ("://" in v, not v.startswith("/"), len(v), v))


def _looks_like_path(v: str) -> bool:
    return "/" in v or v.endswith((".md", ".markdown", ".mdx"))


def _shown(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _empty_hints(plan: Plan, fms: Frontmatter, pos, expand, n, noun: str = "section") -> list[EmptyHint]:
    """Why nothing passed: each --where that matches nothing on its own, with what its keys hold
    (`noun`: what the filters kept none of, sections or documents)."""
    import difflib

    import numpy as np

    alone_empty = [w for w in plan.wheres
                   if not expand(_per_file(fms, lambda fm, w=w: where_holds(w, fm)), where_holds(w, {})).any()]
    if not alone_empty:
        listed = ", ".join(repr(w.text) for w in plan.wheres)
        return [EmptyHint(f"no {noun} passes every {opt('--where')} together ({listed}), though each matches "
                          f"some on its own")]
    # what the candidates' documents hold, counted per document, each distinct text decoded once
    texts = Counter(fms.raws[i] for i in np.unique(pos).tolist() if i < n)
    decoded = {raw: Frontmatter.full(raw) for raw in texts}
    keys = set().union(*decoded.values()) if decoded else set()
    hints = []
    for w in alone_empty:
        detail = []
        for p in w.alternatives:
            if p.op in ("=", "!=") and p.key in keys:
                held: Counter = Counter()
                for raw, count in texts.items():
                    if p.key in decoded[raw]:
                        v = decoded[raw][p.key]
                        for x in {_shown(x) for x in (v if isinstance(v, list) else [v])}:
                            held[x] += count
                top = sorted(held.items(), key=lambda kv: (-kv[1], kv[0]))
                more = " ..." if len(top) > 6 else ""
                detail.append(f"{p.key} holds " + ", ".join(f"{v} ({c})" for v, c in top[:6]) + more)
            elif p.op in ("=", "present") and not any(k == p.key or k.startswith(p.key + ".") for k in keys):
                close = difflib.get_close_matches(p.key, sorted(keys), n=1)
                detail.append(f"no document has a {p.key!r} key" + (f" (did you mean {close[0]!r}?)" if close else ""))
        tail = f"; {'; '.join(detail)}" if detail else ""
        hints.append(EmptyHint(f"{opt('--where', w.text, quoted=True)} matches no {noun} on its own (matching is "
                               f"exact and case-sensitive){tail}"))
    return hints
