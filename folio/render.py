"""Human text and JSON from result objects. Pure: returns strings, never prints, never computes ranks.

The JSON shapes are the agent contract documented in README.md and SKILL.md: one object per
command, data only (notices are also carried inside it, and printed on stderr by cli).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from folio.config import shown
from folio.surface import invoke, mcp, opt

JSON_VERSION = 1

# Characters that must not reach a terminal or a pipe raw: C0 controls (a newline splits a row, ESC
# starts an escape sequence), DEL, C1 controls (0x9b is a one-byte CSI on some terminals), Unicode line
# and paragraph separators, the bidirectional overrides (they reorder what is shown), and the lone
# surrogates that stand for the bytes of a file name that is not UTF-8.
_UNSAFE_PAST_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = "\x00-\x1f" + _UNSAFE_PAST_C0
_UNSAFE_RE = re.compile(f"[{_UNSAFE}]")
_QUOTED_RE = re.compile(f'[{_UNSAFE}"\\\\]')
_JSON_RAW_RE = re.compile(f"[{_UNSAFE_PAST_C0}]")  # what json.dumps leaves raw
_BODY_UNSAFE_RE = re.compile(f"[\x00-\x08\x0b-\x1f{_UNSAFE_PAST_C0}]")  # lines shown on a terminal: \n and \t kept
_NAMED = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
          '"': '\\"', "\\": "\\\\"}


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a byte of a file name that is not UTF-8, as os.fsdecode keeps it
        return f"\\{o - 0xDC00:03o}"
    return "".join(f"\\{b:03o}" for b in c.encode("utf-8", "surrogatepass"))


def quote(text: str, *, path: bool = True) -> str:
    """`text` safe to print on one line, as git prints a path with core.quotePath: unchanged when it
    holds nothing unusual, else in double quotes with C-style escapes (`\\n`, `\\t`, `\\"`, `\\\\`, and
    octal UTF-8 bytes such as `\\033`). A path is also quoted when it holds `"` or `\\`, so a quoted
    name never reads as another name; a heading (path=False) only when it holds a control character.
    --json output is exact instead (JSON escapes these itself: see dumps)."""
    if not (_UNSAFE_RE.search(text) or (path and ('"' in text or "\\" in text))):
        return text
    return '"' + _QUOTED_RE.sub(_escape, text) + '"'


_UNNAMED = {v[1]: k for k, v in _NAMED.items()}  # the escape's letter -> the character


def unquote(text: str) -> str | None:
    """The name `quote` printed as `text` (double quotes, C-style escapes, octal bytes), or None when
    `text` is not such a quoted name: what `folio query` prints can be handed back to `folio show`."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == '"':
            return None  # quote() escapes every quote inside
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1:i + 2] in _UNNAMED:
            out += _UNNAMED[body[i + 1]].encode()
            i += 2
        elif re.fullmatch("[0-3][0-7]{2}", body[i + 1:i + 4]):
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
        else:
            return None
    return out.decode("utf-8", "surrogateescape")


def one_line(text: str) -> str:
    """A sentence for stderr with every unsafe character escaped in place (no quotes added): a path
    named in a notice or an error cannot split the line or reach the terminal as a control sequence."""
    return _UNSAFE_RE.sub(_escape, text)


def shown_path(root: Path, path: str, cwd: Path | None = None) -> str:
    """A root-relative path as it opens from the current directory."""
    cwd = cwd or Path.cwd()
    full = os.path.join(root, path)
    try:
        rel = os.path.relpath(full, cwd)
    except ValueError:  # another drive (Windows)
        return full
    return rel.replace(os.sep, "/")


def ref(hit, cwd: Path | None = None, *, raw: bool = False) -> str:
    """`path:start-end` as it opens from here; the path quoted when unusual (raw: exact, for JSON and -0)."""
    path = shown_path(hit.root, hit.path, cwd)
    return f"{path if raw else quote(path)}:{hit.start}-{hit.end}"


def trail_text(trail) -> str:
    return " > ".join(quote(h, path=False) for h in trail)


def query_text(answer) -> str:
    lines = []
    for i, h in enumerate(answer.hits, 1):
        mark = "" if h.freshness == "current" else f" ({h.freshness})"
        if h.ranks:  # hybrid: the fused score, and where each plane put the row
            parts = ", ".join(f"{plane} #{r}" if r else f"{plane} -" for plane, r in h.ranks.items())
            lines.append(f"#{i}  {h.score:.4f}  {ref(h)}{mark}  [{parts}]")
        else:
            lines.append(f"#{i}  {h.score:.3f}  {ref(h)}{mark}")
        if h.trail:
            trail = trail_text(h.trail)
        else:  # a merged row whose pieces share no heading: top-level siblings, or the preamble and what follows
            trail = "(before the first heading)" if h.pieces == 1 else "(top level)"
        if h.pieces > 1:
            trail += f"  ({h.pieces} sections)"
        lines.append(f"    {trail}")
    return "\n".join(lines)


def dropped_text(dropped: int, pointer_keys, identity: str) -> str:
    """How many documents the join dropped (all it drops, whatever the mode or the question)."""
    keys = list(dict.fromkeys(pointer_keys))
    by = opt("--exclude-pointed-by", keys if mcp() and len(keys) > 1 else ", ".join(keys))
    return f"({dropped} document{'' if dropped == 1 else 's'} dropped by {by}, {opt('--identity', identity)})"


def query_notes(answer, exclude_pointed_by=(), identity: str = "id") -> list[str]:
    """What is said beside a query's rows (the CLI's stderr, the MCP text after the rows): its
    notices and hints, and the count --exclude-pointed-by dropped (always, even when 0)."""
    notes = answer.notices + answer.hints
    if exclude_pointed_by:
        notes.append(dropped_text(answer.dropped, exclude_pointed_by, identity))
    return notes


def filter_notes(hints, dropped: int, exclude_pointed_by=(), identity: str = "id") -> list[str]:
    """What is said beside the documents `folio ls` keeps: the filters' hints, and the count the
    join dropped (always, even when 0)."""
    return list(hints) + ([dropped_text(dropped, exclude_pointed_by, identity)] if exclude_pointed_by else [])


def _under(fm: dict, keys) -> dict:
    """The frontmatter under `keys` (each key itself, and the keys flattened under it), in key order."""
    if not keys:
        return fm
    return {k: v for key in dict.fromkeys(keys) for k, v in fm.items() if k == key or k.startswith(key + ".")}


def ls_text(docs, keys=()) -> str:
    """One document a line, as its path opens from here (quoted when unusual); with `keys`, each
    key's value after it (`  status=Final`)."""
    lines = []
    for d in docs:
        line = quote(shown_path(d.root, d.path)) + (f" ({d.freshness})" if d.freshness != "current" else "")
        for k, v in _under(d.frontmatter, keys).items() if keys else ():
            shown_v = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            line += f"  {quote(k, path=False)}={quote(shown_v, path=False)}"
        lines.append(line)
    return "\n".join(lines)


def key_notes(docs, keys) -> list[str]:
    """A note for each `--key` no listed document holds, with the closest key they hold: a typo
    (`--key stauts`) otherwise prints nothing after every path, as if no document had a value."""
    import difflib

    held = sorted({k for d in docs for k in d.frontmatter})
    notes = []
    for key in dict.fromkeys(keys) if docs else ():
        if not any(k == key or k.startswith(key + ".") for k in held):
            close = difflib.get_close_matches(key, held, n=1)
            notes.append(f"note: no listed document has a {key!r} key"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    return notes


def ls_null(docs) -> str:
    """Each exact path (as it opens from here) ended by NUL, for `xargs -0`."""
    return "".join(shown_path(d.root, d.path) + "\0" for d in docs)


def ls_json(docs, roots, notices, dropped: int, keys=()) -> str:
    return dumps({
        "version": JSON_VERSION,
        "root": str(roots[0]) if len(roots) == 1 else None,
        "roots": [str(r) for r in roots],
        "notices": list(notices),
        "dropped": dropped,
        "documents": [{"path": d.path, "root": str(d.root), "ref": shown_path(d.root, d.path), "title": d.title,
                       "frontmatter": _under(d.frontmatter, keys), "freshness": d.freshness} for d in docs],
    })


def paths_only(answer, null: bool = False) -> str:
    """One reference a line, paths quoted when unusual; with `null`, exact paths each ended by NUL
    (like `git ls-files -z`: for `xargs -0`)."""
    if null:
        return "".join(ref(h, raw=True) + "\0" for h in answer.hits)
    return "\n".join(ref(h) for h in answer.hits)


def hit_json(i: int, h) -> dict:
    d = {
        "rank": i,
        "score": round(h.score, 6),
        "ref": ref(h, raw=True),
        "path": h.path,
        "root": str(h.root),
        "start": h.start,
        "end": h.end,
        "trail": list(h.trail),
        "pieces": h.pieces,
        "frontmatter": h.frontmatter,
        "freshness": h.freshness,
        "citation": {"loc": f"{h.path}:L{h.start}-L{h.end}", "sha": h.sha, "freshness": h.freshness},
    }
    if h.ranks:
        d["ranks"] = h.ranks
    return d


def query_json(answer) -> str:
    obj = {
        "version": JSON_VERSION,
        "query": answer.query,
        "mode": answer.mode,
        "feedback": answer.feedback,
        "facets": list(answer.facets),
        "model": answer.model,
        "endpoint": answer.endpoint,
        "root": str(answer.roots[0]) if len(answer.roots) == 1 else None,
        "roots": [str(r) for r in answer.roots],
        "notices": answer.notices + answer.hints,
        "dropped": answer.dropped,
        "results": [hit_json(i, h) for i, h in enumerate(answer.hits, 1)],
        "confidence": answer.confidence,
    }
    return dumps(obj)


def similar_text(sim) -> str:
    """`folio similar`'s rows as a query's, each trail line followed by the source section it is
    nearest to when the source has several."""
    lines = query_text(sim.answer).split("\n")
    if len(sim.source.refs) < 2:
        return "\n".join(lines)
    src = sim.source
    out = []
    for i, line in enumerate(lines):
        if i % 2:
            like = sim.likes[i // 2]
            if src.root is not None:  # a file's section as it opens from here, as the rows print; `-:3-9` as it is
                like = f"{quote(shown_path(src.root, src.path))}:{like.rpartition(':')[2]}"
            else:
                like = quote(like)
            line += f"  (like {like})"
        out.append(line)
    return "\n".join(out)


def similar_json(sim) -> str:
    """A query's object, the source (its sections and how many were embedded now: 0 when every one had
    its stored vector) and each row's `like`."""
    obj = json.loads(query_json(sim.answer))
    obj["source"] = {"spec": sim.source.spec, "root": str(sim.source.root) if sim.source.root else None,
                     "path": sim.source.path, "sections": sim.source.refs, "embedded": sim.source.embedded}
    for row, like in zip(obj["results"], sim.likes, strict=True):
        row["like"] = like
    return dumps(obj)


def citation_line(shown, cwd: Path | None = None) -> str:
    """`-- path:L12-L40 (sha 516bef067812, current)`, the path as it opens from the current directory;
    given a query row's sha, what became of the row's lines after the freshness (since_row_text)."""
    sha = shown.sha or "-"
    return (f"-- {quote(shown_path(shown.root, shown.path, cwd))}:L{shown.start}-L{shown.end} (sha {sha}, "
            f"{shown.freshness}{since_row_text(shown.since_row)})")


def since_row_text(since: dict | None) -> str:
    """What the citation line adds for a query row's sha: nothing while the file is the row's."""
    if since is None or since["state"] == "same":
        return ""
    return {"in_place": "; changed since the row, its section still here",
            "moved": f"; the row's section, moved here since the row from L{since['start']}-L{since['end']}",
            "not_found": "; changed since the row, which named a section not in it now",
            "changed": "; changed since the row: these lines may hold another section"}[since["state"]]


def since_row_note(name: str, since: dict, shown) -> str:
    """The note for a query row whose section was found in a file changed since the row (in_place, moved)."""
    named = trail_text(since["trail"]) or "before the first heading"
    head = f"{name} changed since the query row (its sha {since['sha'][:12]})"
    if since["state"] == "in_place":
        return f"{head}, but the section it named ({named}) is at lines {since['start']}-{since['end']} still"
    return (f"{head}: the section it named ({named}) is at lines {shown.start}-{shown.end} now, not "
            f"{since['start']}-{since['end']}; these are its lines" +
            ("" if since.get("exact") else " (its text changed too: the whole section, with its subsections)"))


def show_text(shown, *, visible: bool = False) -> str:
    """The lines and their citation. `visible` (a terminal): every control character but the newline
    and the tab escaped as query output escapes a heading (`\\033`), so a file's bytes never drive
    the terminal; else (a pipe, a file) the lines exactly as they are."""
    if shown.text is None:
        return citation_line(shown)
    text = _BODY_UNSAFE_RE.sub(_escape, shown.text) if visible else shown.text
    return f"{text}\n{citation_line(shown)}"


def show_json(shown, notices=()) -> str:
    """`folio show --json`: the citation and the text, with the notes the text output says beside them
    (`notices`: a stale file, a range past the file's end, an older copy where you stand), as a query's."""
    return dumps({
        "version": JSON_VERSION,
        "loc": shown.loc,
        "sha": shown.sha,
        "freshness": shown.freshness,
        "text": shown.text,
        "root": str(shown.root),
        "path": shown.path,
        "ref": f"{shown_path(shown.root, shown.path)}:{shown.start}-{shown.end}",
        "start": shown.start,
        "end": shown.end,
        "notices": list(notices),
        "since_row": None if shown.since_row is None else {k: shown.since_row[k] for k in SINCE_ROW_KEYS},
    })


SINCE_ROW_KEYS = ("sha", "state", "start", "end", "trail")  # `folio show --sha`'s verdict in --json


def band_text(conf: dict, *, filtered_out: bool = False) -> str | None:
    """The confidence band on a terminal; silent at grounded. `filtered_out`: no row came back and
    filters were given, so the filters, not the mode or the words, are what to change."""
    band = conf.get("band")
    if band == "grounded":
        return None
    if band == "none" and filtered_out:
        return (f"confidence: none - no row came back: the filters keep no section that ranks for this question "
                f"(the lines above say what each kept); loosen {opt('--where')} or {opt('--exclude-pointed-by')} "
                f"before concluding the corpus has nothing on it.")
    if band == "none":
        if conf.get("coverage", 0) > 0:  # ranked by meaning: the rows miss the words the corpus has
            return ("confidence: none - none of these rows mentions a word of the question, though the "
                    f"corpus does: try {opt('--mode', 'lexical')}.")
        return "confidence: none - nothing in the index scored for this query."
    if band == "partial" and "found_files" in conf:
        return (f"confidence: partial - only {conf['indexed_files']:,} of the {conf['found_files']:,} files are "
                f"indexed yet: the answer may be in one that is not; say so, or query again once the index is "
                f"built.")
    if band == "partial":
        miss = conf.get("missing") or []
        if miss:
            return f"confidence: partial - answer, but say what is missing. Not in this corpus: {', '.join(miss)}."
        if conf.get("verified") == "stale":
            return ("confidence: partial - the top result's file changed since it was indexed; "
                    "re-read it (folio show) before quoting.")
        return (f"confidence: partial - no single section holds the whole question (doc_coverage "
                f"{conf.get('doc_coverage', 0):.2f}, floor {conf.get('doc_coverage_floor', 0):.2f}); "
                f"answer, but say which part is unsupported.")
    if band == "weak":
        return (f"confidence: weak - the ranking cannot separate the top results "
                f"(separation {conf.get('separation', 0):.2f}, floor {conf.get('separation_floor', 0):.2f}).")
    return f"confidence: {band}"


def index_text(rep) -> str:
    parts = [f"{rep.files} file" + ("" if rep.files == 1 else "s")]
    for name, n in (("new", rep.new), ("changed", rep.changed), ("renamed", rep.renamed),
                    ("deleted", rep.deleted), ("re-stamped", rep.restamped)):
        if n:
            parts.append(f"{n} {name}")
    line1 = ", ".join(parts)
    if rep.lexical_only and rep.sections:  # no server: "0 embedded" alone read as nothing indexed
        line2 = f"sections: {rep.sections} in the lexical plane, 0 embedded" + (
            f", {rep.removed} removed" if rep.removed else "")
    else:
        line2 = (f"sections: {rep.embedded} embedded, {rep.reused} reused, {rep.copied} copied, "
                 f"{rep.removed} removed" + (f", {rep.waiting} waiting for vectors" if rep.waiting else ""))
    extra = []
    if rep.dead_rows:
        extra.append(f"{rep.dead_rows} dead rows")
    if rep.compacted:
        extra.append(f"compacted {rep.compacted} rows")
    extra.append(f"budget {rep.budget} chars" + (f", {rep.tokens} tokens" if rep.tokens else ""))
    extra.append(f"{rep.seconds:.2f} s")
    return f"indexed {line1}; {line2}; {', '.join(extra)}"


def index_json(rep) -> str:
    return dumps({"version": JSON_VERSION, **rep.to_dict()})


def status_json(infos: list[dict], several: bool = False) -> dict:
    """`folio status --json`: one corpus's status, {roots: [...]} for several (`several`: asked of several,
    some refused); versioned as every --json."""
    if len(infos) == 1 and not several:
        return {"version": JSON_VERSION, **infos[0]}
    return {"version": JSON_VERSION, "roots": infos}


def status_text(s: dict) -> str:
    moved = [f"{s[k]} {what}" for k, what in (("unindexed", "not indexed yet"), ("changed", "changed since indexing"),
                                              ("deleted", "deleted since indexing")) if s.get(k)]
    out = [
        f"root      {quote(s['root'])}",
        f"files     {s['files']}" + (f" ({', '.join(moved)})" if moved else ""),
        f"sections  {s['sections']} ({s['embedded']} with vectors, {s['truncated']} truncated)",
    ]
    if s.get("running"):
        from folio.running import describe

        out.append(f"          note: {describe(s['running'], s['sections'])}")
    elif s.get("unfinished"):
        out.append(f"          note: the last `folio index` stopped before the end of its walk: {invoke('index')} "
                   f"to finish it")
    if s.get("waiting") and not s.get("running"):
        n, f = s["waiting"], s["waiting_files"]
        out.append(f"          note: {n:,} section{'s' * (n != 1)} in {f:,} file{'s' * (f != 1)} "
                   f"{'have' if n != 1 else 'has'} no vectors yet (a run stopped, or its server failed, before "
                   f"embedding them): until a `folio index` embeds them, a query ranks them by their words only "
                   f"(`--mode semantic` leaves them out)")
    if s["model"]:
        out.append(one_line(f"model     {s['model']} @ {s['endpoint']}"))
    elif s.get("running"):  # a first build under way: no vector committed yet, not an index built without them
        out.append("model     none yet: the run under way records it with its first vectors" + (
            " (once its embeddings server has loaded its model)" if s["running"].get("loading") else ""))
    else:
        out.append("model     none: lexical plane only (no embeddings server gave it vectors when it was built)")
    r = s.get("roles")
    if r:
        out.append(one_line(f"roles     query {r['query']}; document {r['document']} ({r['from']})"))
    for note in s.get("config_differs", []):
        out.append(one_line(f"          note: {note}"))
    out.append(f"dim       {s['dim'] or '-'}")
    out.append(one_line(f"budget    {s['budget_text']}"))
    out.append(f"size      {_human(s['bytes'])} in {quote(s['index'])}" + (f", {s['dead_rows']} dead rows"
                                                                      if s["dead_rows"] else ""))
    keys = s.get("frontmatter_keys") or {}
    if keys:
        samples = s.get("frontmatter_samples") or {}
        every = "the status tool's `key` argument" if mcp() else "`folio status --key KEY`"
        out.append(f"keys      (documents holding it: a few of its values, the most common first; "
                   f"{every} lists them all)")
        for k, n in keys.items():
            vals = ", ".join(_cut(v) for v in samples.get(k, []))
            if not vals:  # held empty, or a map (a list of maps) whose values are under its dotted keys
                subs = [quote(x, path=False) for x in keys if x.startswith(k + ".")]
                vals = "(held empty" + (f"; its values elsewhere are under {', '.join(subs[:2])}"
                                        f"{', ...' if len(subs) > 2 else ''}" if subs else "") + ")"
            out.append(one_line(f"          {quote(k, path=False)} ({n}): {vals}"))
    else:
        out.append("keys      (no frontmatter)")
    return "\n".join(out)


def truncated_text(cut: list) -> str:
    """cut: [(root, [(path, Row), ...]), ...]."""
    lines = [f"{quote(shown_path(root, p))}:{r.start}-{r.end}  {trail_text(r.trail) or '(before the first heading)'}"
             for root, rows in cut for p, r in rows]
    if not lines:
        return "no record was cut: every section fit the budget or was divided at line ends"
    return "\n".join(lines)


def truncated_json(cut: list) -> str:
    return dumps({"version": JSON_VERSION, "root": str(cut[0][0]) if len(cut) == 1 else None,
                  "roots": [str(root) for root, _ in cut], "truncated": [
        {"ref": f"{shown_path(root, p)}:{r.start}-{r.end}", "path": p, "root": str(root), "start": r.start,
         "end": r.end, "trail": list(r.trail)} for root, rows in cut for p, r in rows]})


def setting_value(key: str, value) -> str:
    """One setting's value as `folio config` prints it (a secret only as set or not)."""
    value = shown(key, value)
    if key.endswith("_prefix"):
        value = repr(value)  # quoted: a prefix's trailing space (or newline) shows
    elif isinstance(value, dict):
        value = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, list):
        value = ", ".join(value) if value else "[]"
    return one_line(str(value))


def config_text(info: dict) -> str:
    out = []
    for key, (value, source) in info["values"].items():
        value = setting_value(key, value)
        out.append(f"{key:<19} {value}  ({source})")
        rec = info.get("recorded")
        if key == "endpoint" and rec and rec["endpoint"] != value:
            moves = ("`folio index` keeps it, `folio index --endpoint URL` moves it" if source == "default"
                     else f"`folio index` moves it to {value}")
            out.append(one_line(f"{'':<19} in force for queries: {rec['endpoint']} (recorded by the index: a query "
                                f"embeds there whatever the settings name; {moves})"))
        if key == "max_chars" and info.get("budget"):
            out.append(one_line(f"{'':<19} in force: {info['budget']}"))
    absent = "  (does not exist yet: `folio config set {}KEY VALUE` creates it)"
    out.append(f"user config         {quote(info['user_file'])}"
               + ("" if info.get("user_file_exists", True) else absent.format("")))
    out.append(f"project file        {quote(info['project_file'] or '') or '(no corpus found: folio.yaml goes in the corpus root)'}"
               + ("" if not info["project_file"] or info.get("project_file_exists", True) else absent.format("--project ")))
    return "\n".join(out)


def key_values_text(s: dict, key: str, several: bool) -> str:
    """`folio status --key KEY`: every value, most common first, with its document count."""
    vals = (s.get("frontmatter_values") or {}).get(key) or {}
    head = [f"root      {quote(s['root'])}"] if several else []
    if not vals:
        import difflib

        from folio.surface import mcp, opt

        keys = list(s.get("frontmatter_keys") or {})
        held = (s.get("frontmatter_keys") or {}).get(key)
        under = [k for k in keys if k.startswith(key + ".")]
        if held or under:  # the key is there with no value of its own: say so, not "did you mean" itself
            said = []
            if held:
                said.append(f"{held} document{'s' if held != 1 else ''} hold{'s' if held == 1 else ''} {key!r} "
                            f"with no value (empty)")
            if under:
                shown = ", ".join(repr(k) for k in under[:6]) + (" ..." if len(under) > 6 else "")
                how = (f"the status tool with {opt('--key', under[0])}" if mcp()
                       else f"`folio status --key {under[0]}`")
                lead = "its values" if held else f"{key!r} holds no value of its own: its values"
                said.append(f"{lead} are under its keys {shown} (a map, or a list of maps): {how} lists one's values")
            else:
                said.append(f"{opt('--where', key)} keeps them, {opt('--where', '!' + key, quoted=True)} the others")
            return "\n".join(head + [one_line("; ".join(said))])
        close = difflib.get_close_matches(key, keys, n=1)
        known = ", ".join(keys[:8])
        return "\n".join(head + [one_line(f"no document has a value for {key!r}"
                                           + (f" (did you mean {close[0]!r}?)" if close else "")
                                           + (f"; keys here include {known}" if known else ""))])
    return "\n".join(head + [one_line(f"{n:>6}  {json.dumps(v, ensure_ascii=False)}") for v, n in vals.items()])


def _cut(v: str, n: int = 60) -> str:
    return json.dumps(v if len(v) <= n else v[: n - 3] + "...", ensure_ascii=False)


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def dumps(obj) -> str:
    """JSON with text kept readable (ensure_ascii off) yet exact and inert: json escapes C0 controls
    itself; DEL, C1 controls, line separators, bidi overrides and the surrogates of a non-UTF-8 file
    name are written as \\uXXXX too (they can only occur inside strings), so nothing reaches a
    terminal raw and every path parses back to the same string."""
    return _JSON_RAW_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(obj, ensure_ascii=False, indent=2))


_MARK = {"pass": "ok", "fail": "FAIL", "skip": "skip"}


def doctor_text(rep) -> str:
    """One line per probe (`ok`/`FAIL`/`skip`, name, verdict); notes indented under it; the footer."""
    lines = []
    for c in rep.checks:
        lines.append(f"{_MARK[c.status]:<5} {c.name:<11} {one_line(c.summary)}")  # they name files
        lines.extend(f"{'':<17} {one_line(d)}" for d in c.detail)
    skipped = sum(1 for c in rep.checks if c.status == "skip")
    if not rep.ok:
        lines.append(doctor_failed(rep))
    else:
        lines.append("every probe passed" + (f" ({skipped} skipped)" if skipped else ""))
    lines.append(one_line("doctor cannot tell: " + "; ".join(rep.cannot_tell) + "."))
    return "\n".join(lines)


def doctor_failed(rep) -> str:
    """`1 of 8 probes failed: pooling`: the footer, and with --json the error's sentence on stderr."""
    failed = [c.name for c in rep.checks if c.status == "fail"]
    return f"{len(failed)} of {len(rep.checks)} probes failed: {', '.join(failed)}"


def doctor_json(rep) -> str:
    return dumps({
        "version": JSON_VERSION,
        "ok": rep.ok,
        "root": rep.root,
        "corpus": rep.corpus,
        "endpoint": rep.endpoint,
        "model": rep.model,
        "checks": [{"name": c.name, "status": c.status, "summary": c.summary, "detail": list(c.detail),
                    "data": c.data} for c in rep.checks],
        "cannot_tell": list(rep.cannot_tell),
    })
