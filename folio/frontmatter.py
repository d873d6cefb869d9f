"""YAML frontmatter -> one flat mapping of dotted keys (`a: {b: x}` is `a.b`), what `--where`,
`folio ls` and `folio status` read.

Owns reading the block between the `---` lines (every scalar its source text; true/false/null only
unquoted), flattening it, and the warnings for a block that is not read or reads ambiguously.
Must not: touch the filesystem, print, or import click/httpx/numpy; it runs over every file of a
corpus (yaml is imported at the first frontmatter met).
"""

from __future__ import annotations

import re
from typing import Any

_OPEN_RE = re.compile(r"---[ \t\r]*(?:\n|\Z)")
_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t\r]*$", re.MULTILINE)
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_NULL = frozenset({"null", "Null", "NULL", "~", ""})
_MAX_VALUES = 10_000  # values past those written out: aliases can expand exponentially ("billion laughs")
# ... in size as well as in count: a few aliases of one long string are gigabytes of JSON. What the
# values and keys hold past the block's own text is capped (text written out in full always fits).
_MAX_EXPANSION = 1 << 20


class _Plain(str):
    """A plain (unquoted) YAML scalar: only these may become true/false/null."""

    __slots__ = ()


def _construct_str(loader: Any, node) -> str:
    value = loader.construct_scalar(node)
    # Plain style is None in PyYAML's Python parser and "" in libyaml's.
    return _Plain(value) if not node.style else value


def _make_loader(base: type) -> type:
    # BaseLoader: no object construction, every scalar keeps its source text.
    loader = type("_FolioLoader" + base.__name__, (base,), {})
    loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
    return loader


_loaders: tuple = ()


def _yaml():
    """(yaml, the libyaml loader or else the Python one, the Python one), made at the first
    frontmatter met: yaml costs ~20 ms to import, which a file without frontmatter never needs."""
    global _loaders
    if not _loaders:
        import yaml

        py = _make_loader(yaml.BaseLoader)
        _loaders = (yaml, _make_loader(yaml.CBaseLoader) if yaml.__with_libyaml__ else py, py)
    return _loaders


class _TooLarge(Exception):
    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def _spend(budget: list, chars: int) -> None:
    """One value (or list item) of `chars` characters out of the budget [values, characters]."""
    budget[0] -= 1
    budget[1] -= chars
    if budget[0] < 0:
        raise _TooLarge(f"more than {_MAX_VALUES:,} values past those it writes out (its aliases repeat them)")
    if budget[1] < 0:
        raise _TooLarge(f"more than {budget[2]:,} characters of keys and values (aliases repeat its text)")


def _scalar(value: Any) -> Any:
    if type(value) is _Plain:
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        if value in _NULL:
            return None
        return str(value)
    return value if value is None else str(value)


def _flatten_list(items: list, key: str, path: tuple, out: dict, origin: dict, w: _Flat) -> list:
    """Scalars of a (possibly nested) list; maps inside it collect into out[key.sub] lists."""
    if id(items) in w.seen:  # a recursive alias
        return []
    w.seen.add(id(items))
    values: list = []
    for item in items:
        if isinstance(item, list):
            _spend(w.budget, 0)  # empty lists nested through aliases are work too
            values.extend(_flatten_list(item, key, path, out, origin, w))
        elif isinstance(item, dict):
            sub: dict = {}
            whence: dict = {}
            _flatten_map(item, "", path, sub, whence, w)
            for k, v in sub.items():
                _spend(w.budget, len(key) + 1 + len(k))
                _put(out, origin, f"{key}.{k}", list(v) if isinstance(v, list) else [v], whence[k], w)
        else:
            _spend(w.budget, len(item) if isinstance(item, str) else 0)
            values.append(_scalar(item))
    w.seen.discard(id(items))
    return values


class _Flat:
    """One block's flattening: the containers on the way down (a recursive alias is met again), the
    budget [values, characters, characters at the start], and the keys that read alike (`clashes`:
    (the path of keys that first gave one, the path of one more))."""

    __slots__ = ("seen", "budget", "clashes")

    def __init__(self, budget: list):
        self.seen: set = set()
        self.budget = budget
        self.clashes: list = []


def _put(out: dict, origin: dict, key: str, value, path: tuple, w: _Flat) -> None:
    """out[key] = value, reached by the keys `path`. A key already there keeps both values, in one
    list: the maps of one list gather so (`authors: [{name: a}, {name: b}]`); a key that reads alike
    from another path (`a.b: x` beside `a: {b: y}`) does too, once each value, and is a clash."""
    was = origin.get(key)
    if was is None:
        origin[key] = path
        out[key] = value
        return
    held = out[key]
    if not isinstance(held, list):
        held = out[key] = [held]
    new = value if isinstance(value, list) else [value]
    if was == path:
        held.extend(new)
        return
    w.clashes.append((was, path))
    have = set(held)
    for v in new:
        if v not in have:
            have.add(v)
            held.append(v)


def _merged(mapping: dict, depth: int = 0) -> dict:
    """`mapping` with YAML's merge key applied (`<<: *base`, or a list of them: the keys of each
    base the mapping does not set itself, an earlier base over a later one), as YAML 1.1 readers
    do; BaseLoader keeps `<<` as a key of its own. A `<<` that is not mappings stays a key."""
    bases = mapping.get("<<")
    if bases is None or depth > 32:
        return mapping
    bases = bases if isinstance(bases, list) else [bases]
    if not bases or not all(isinstance(b, dict) for b in bases):
        return mapping
    out: dict = {}
    for base in bases:
        for k, v in _merged(base, depth + 1).items():
            out.setdefault(k, v)
    out.update((k, v) for k, v in mapping.items() if k != "<<")
    return out


def _flatten_map(mapping: dict, prefix: str, path: tuple, out: dict, origin: dict, w: _Flat) -> None:
    if id(mapping) in w.seen:
        return
    w.seen.add(id(mapping))
    for k, v in _merged(mapping).items():
        key = f"{prefix}{k}"
        here = (*path, k)
        if isinstance(v, dict):
            _spend(w.budget, len(key))
            _flatten_map(v, key + ".", here, out, origin, w)
        elif isinstance(v, list):
            _spend(w.budget, len(key))
            has_maps = any(isinstance(item, dict) for item in v)
            values = _flatten_list(v, key, here, out, origin, w)
            if values or not has_maps:
                _put(out, origin, key, values, here, w)
        else:
            _spend(w.budget, len(key) + (len(v) if isinstance(v, str) else 0))
            _put(out, origin, key, _scalar(v), here, w)
    w.seen.discard(id(mapping))


def _clash_warning(clashes: list, source: str) -> str:
    """The warning for keys that flatten alike: the first pair, as written, on the line of the one
    whose own name holds a dot (the surprise), and how many more there are."""
    was, now = clashes[0]
    key = ".".join(map(str, now))

    def written(path: tuple) -> str:  # ("a", "b") -> "a: {b: ...}"
        text = f"{path[-1]}: ..."
        for k in reversed(path[:-1]):
            text = f"{k}: {{{text}}}"
        return text

    dotted = next((str(k) for k in (*now, *was) if "." in str(k)), None)
    line = 2
    if dotted is not None:
        found = re.search(rf"^[ \t]*(?:-[ \t]+)?(['\"]?){re.escape(dotted)}\1[ \t]*:", source, re.MULTILINE)
        line += source.count("\n", 0, found.start()) if found else 0
    more = len(clashes) - 1
    more = f" (and {more} more such pair{'s' if more > 1 else ''})" if more else ""
    return (f"line {line}: frontmatter `{written(was)}` and `{written(now)}` both read as the key `{key}`; "
            f"both values are kept under it (`--where {key}=...` matches either): rename one to tell them "
            f"apart{more}")


def _quoted_line(source: str, line: int) -> str:
    """` in `TEXT``: the file's line `line` as the warning quotes it (so the reader sees what the parser
    stumbled on without opening the file), cut at 60 characters; '' for a blank or absent line."""
    lines = source.split("\n")
    text = lines[line - 2].rstrip() if 0 <= line - 2 < len(lines) else ""
    if not text.strip():
        return ""
    return f" in `{text[:60]}{'...' if len(text) > 60 else ''}`"


def _yaml_error_line(exc: Exception, source: str) -> int:
    """File line (frontmatter body starts on line 2) of a YAML error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    context = getattr(exc, "context_mark", None)
    if context is not None and getattr(mark, "index", None) is not None and \
            not source[mark.index:].strip() and getattr(context, "index", None) is not None:
        # The parser ran off the end of the block looking for a closing bracket or quote: the
        # line that opened it is the one to fix, not the closing '---'.
        mark = context
    index = getattr(mark, "index", None)
    if index is None:
        index = getattr(exc, "position", None)  # ReaderError
    if index is None:
        return 2
    # Count "\n" only: YAML also breaks lines at \r, \x85, \u2028, \u2029.
    return 2 + source.count("\n", 0, index)


def parse_frontmatter(text: str) -> tuple[dict, int, str | None]:
    """(flattened frontmatter, number of lines the frontmatter block occupies (0 if none), warning or None)."""
    offset = 1 if text.startswith("\ufeff") else 0
    opening = _OPEN_RE.match(text, offset)
    if opening is None:
        return {}, 0, None
    closing = _CLOSE_RE.search(text, opening.end())
    if closing is None:
        return (
            {},
            0,
            "line 1: frontmatter opened with '---' is never closed; indexed without frontmatter",
        )
    source = text[opening.end() : closing.start()]
    nlines = text.count("\n", 0, closing.start()) + 1
    fm, n, warning = _parsed(source, nlines)
    if warning is not None and not source.split("\n", 1)[0].strip():
        # `---` then a blank line, and no mapping below it: a thematic break opening the text, as pandoc
        # reads it (a YAML block's opening line must not be followed by a blank one), not frontmatter
        # whose lines would be left out of the index
        return {}, 0, None
    return fm, n, warning


def _parsed(source: str, nlines: int) -> tuple[dict, int, str | None]:
    """parse_frontmatter's answer for the block `source` (the lines between the `---` lines)."""
    yaml, fast_loader, py_loader = _yaml()
    try:
        try:
            data = yaml.load(source, Loader=fast_loader)  # noqa: S506 - BaseLoader constructs no objects
        except yaml.YAMLError:
            # libyaml's marks may count bytes; the Python parser gives exact character offsets.
            data = yaml.load(source, Loader=py_loader)  # noqa: S506
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
        if problem is None:
            problem = str(exc).split("\n", 1)[0]
        line = _yaml_error_line(exc, source)
        return (
            {},
            nlines,
            f"line {line}: invalid YAML frontmatter ({problem}){_quoted_line(source, line)}; indexed without "
            f"frontmatter until the YAML there (or just above it) is fixed",
        )
    except RecursionError:
        return {}, nlines, "line 2: YAML frontmatter nested too deeply; indexed without frontmatter"
    if data is None:  # an empty block
        return {}, nlines, None
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else "a single value"
        return (
            {},
            nlines,
            (f"line 2: YAML frontmatter is {kind}, not a mapping; indexed without frontmatter"),
        )
    out: dict = {}
    chars = len(source) + _MAX_EXPANSION
    # values written out in full always fit: at most one per two characters of the block
    w = _Flat([_MAX_VALUES + len(source) // 2, chars, chars])
    try:
        _flatten_map(data, "", (), out, {}, w)
    except _TooLarge as e:
        return {}, nlines, f"line 2: YAML frontmatter expands to {e.what}; indexed without frontmatter"
    return out, nlines, _clash_warning(w.clashes, source) if w.clashes else None
