"""The objects `--json` prints, as JSON Schemas: every command's (OUTPUTS), which are also the MCP
tools' output schemas (`folio mcp` answers each call with the object the same command prints with
--json), and the tools' input schemas.

Owns those shapes as data. An MCP client checks every answer against them, and
tests/test_json_contract.py checks every command's object against them with no field left out, so
a field added to a `--json` object is added here (in the order it is printed) and to SKILL.md too
(additional fields are allowed here, so an older client still reads a newer folio's answers).
Must not import anything: pure data.
"""

from __future__ import annotations

_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_STRS = {"type": "array", "items": _STR}
_OBJ = {"type": "object"}


def _null(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(props: dict, required: tuple | None = None) -> dict:
    return {"type": "object", "properties": props, "required": list(required if required is not None else props)}


FRESHNESS = {"type": "string", "enum": ["current", "stale", "missing"]}
MODE = {"type": "string", "enum": ["semantic", "lexical", "hybrid"]}

# -- outputs ---------------------------------------------------------------------------------

QUERY_ROW = _object({
    "rank": _INT, "score": _NUM, "ref": _STR, "path": _STR, "root": _STR, "start": _INT, "end": _INT,
    "trail": _STRS, "pieces": _INT, "frontmatter": _OBJ, "freshness": FRESHNESS,
    "citation": _object({"loc": _STR, "sha": _STR, "freshness": FRESHNESS}),
    "ranks": {"type": "object", "additionalProperties": _null(_INT),
              "description": "fused rankings only (hybrid, or facets): the best rank any piece of the row has in each "
                             "rank list that ranked (semantic, lexical, words, passage; null: that list did not "
                             "rank the row)"},
}, required=("rank", "score", "ref", "path", "root", "start", "end", "trail", "pieces", "frontmatter", "freshness",
             "citation"))

CONFIDENCE = _object({
    "band": {"type": "string", "enum": ["none", "partial", "weak", "grounded"]}, "answerable": _BOOL,
    "coverage": _NUM, "separation": _NUM, "separation_floor": _NUM, "doc_coverage": _NUM,
    "doc_coverage_floor": _NUM, "support": _INT, "missing": _STRS,
    "verified": {**_null({"type": "string", "enum": ["current", "stale"]}),
                 "description": "the top row's freshness; null when there is no row"},
    "indexed_files": {**_INT, "description": "only while fewer than half the files the last run found are indexed"},
    "found_files": _INT,
}, required=("band", "answerable", "coverage", "separation", "separation_floor", "doc_coverage", "doc_coverage_floor",
             "support", "missing", "verified"))

QUERY = _object({
    "version": _INT, "query": _STR, "mode": MODE, "feedback": _BOOL,
    "facets": {**_STRS, "description": "the facets that ranked beside the question (words, passage)"},
    "model": _STR, "endpoint": _STR, "root": _null(_STR),
    "roots": _STRS, "notices": _STRS, "dropped": _INT, "results": {"type": "array", "items": QUERY_ROW},
    "confidence": {**_null(CONFIDENCE), "description": "null over several roots (the band describes one corpus)"},
})

SHOW = _object({
    "version": _INT, "loc": _STR, "sha": _null(_STR), "freshness": FRESHNESS, "text": _null(_STR), "root": _STR,
    "path": _STR, "ref": _STR, "start": _INT, "end": _INT,
    "notices": {**_STRS, "description": "what the text output notes beside the lines: the file changed since it "
                                        "was indexed, a range past the file's end, an older copy where you stand"},
    "since_row": {**_null(_object({
        "sha": _STR,
        "state": {"type": "string", "enum": ["same", "in_place", "moved", "not_found", "changed"]},
        "start": _INT, "end": _INT, "trail": _null(_STRS)})),
        "description": "null unless the query row's sha was given: what became of the row's lines since (same: "
                       "the file is the row's; in_place: it changed, the row's section is at its lines still; moved: "
                       "the section is at start-end above now, and those lines are shown; not_found: no section has "
                       "the row's trail now; changed: it changed, and no trail was given to find the section by). "
                       "start, end: the row's lines; trail: the row's trail (null: not known)"},
})

RUNNING = _object({
    "pid": _INT, "started": _NUM, "updated": _NUM, "files": _INT, "files_total": _INT, "embedded": _INT,
    "to_embed": _INT, "lexical": _BOOL,
    "loading": {**_BOOL, "description": "true while the run waits for its embeddings server to load its model (the "
                                        "counts are left out until the run has walked the tree: a first build has "
                                        "indexed every file's words by then)"},
    "left": {**_NUM, "description": "seconds the run expects to take still, once it has measured its pace"},
}, required=("pid", "started", "updated"))
ROLES = _object({
    "query": _STR, "document": _STR, "family": _null(_STR), "from": _STR, "query_prefix": _STR,
    "document_prefix": _STR, "query_fields": _OBJ, "document_fields": _OBJ,
})

_STATUS_ONE = _object({
    "version": _INT, "root": _STR, "index": _STR, "files": _INT, "sections": _INT, "embedded": _INT, "truncated": _INT,
    "changed": _INT, "unindexed": _INT, "deleted": _INT, "waiting": _INT, "waiting_files": _INT,
    "unfinished": _BOOL, "running": _null(RUNNING), "model": _null(_STR), "endpoint": _null(_STR), "dim": _null(_INT),
    "roles": _null(ROLES),
    "text": _null(_STR), "budget": _INT, "budget_from": _STR, "budget_text": _STR, "tokens": _null(_INT),
    "tokens_from": _null(_STR), "bytes": _INT, "dead_rows": _INT, "format": _INT, "frontmatter_keys": _OBJ,
    "frontmatter_samples": _OBJ, "frontmatter_values": _null(_OBJ), "config_differs": _STRS,
}, required=("root", "index", "files", "sections", "embedded", "truncated", "changed", "unindexed", "deleted",
             "waiting", "waiting_files", "unfinished", "running", "model", "endpoint", "dim", "roles", "text",
             "budget", "budget_from", "budget_text", "tokens", "tokens_from", "bytes", "dead_rows", "format",
             "frontmatter_keys", "frontmatter_samples", "frontmatter_values", "config_differs"))
_TRUNCATED = _object({
    "version": _INT, "root": _null(_STR), "roots": _STRS,
    "truncated": {"type": "array", "items": _object({"ref": _STR, "path": _STR, "root": _STR, "start": _INT,
                                                      "end": _INT, "trail": _STRS})},
})
STATUS = {"type": "object", "anyOf": [
    _STATUS_ONE,
    _object({"version": _INT, "roots": {"type": "array", "items": _STATUS_ONE}}),
    _TRUNCATED,
], "description": "what `folio status --json` prints: one corpus's status, {roots: [...]} for several, or, "
                  "with `truncated`, the records whose over-long line was cut"}

LS = _object({
    "version": _INT, "root": _null(_STR), "roots": _STRS, "notices": _STRS, "dropped": _INT,
    "documents": {"type": "array", "items": _object({"path": _STR, "root": _STR, "ref": _STR, "title": _STR,
                                                      "frontmatter": _OBJ, "freshness": FRESHNESS})},
})

_INDEX_ONE = _object({
    "version": _INT, "root": _STR, "files": _INT, "new": _INT, "changed": _INT, "deleted": _INT, "renamed": _INT,
    "restamped": _INT, "read": _INT, "unreadable": _INT, "embedded": _INT, "reused": _INT, "copied": _INT,
    "truncated": _INT, "removed": _INT, "sections": _INT, "dead_rows": _INT, "compacted": _INT, "budget": _INT,
    "tokens": _null(_INT), "lexical_only": _BOOL, "waiting": _INT, "waiting_files": _INT, "model": _STR,
    "endpoint": _STR, "notices": _STRS, "warnings": _STRS, "error": _null(_STR), "seconds": _NUM,
})
INDEX = {"type": "object", "anyOf": [_INDEX_ONE, _object({"version": _INT, "roots": {"type": "array", "items": _INDEX_ONE}})],
         "description": "what `folio index --json` prints; the index tool over several roots: {version, roots: [...]}"}

SIMILAR = {**QUERY, "properties": {
    **QUERY["properties"],
    "results": {"type": "array", "items": {**QUERY_ROW, "properties": {**QUERY_ROW["properties"], "like": _STR},
                                           "required": [*QUERY_ROW["required"], "like"]}},
    "source": _object({"spec": _STR, "root": _null(_STR), "path": _null(_STR), "sections": _STRS,
                       "embedded": _INT}),
}, "required": [*QUERY["required"], "source"]}

CONFIG = _object({
    "version": _INT, "root": _null(_STR), "user_file": _STR, "user_file_exists": _BOOL, "project_file": _null(_STR),
    "project_file_exists": _BOOL,
    "settings": {"type": "object", "additionalProperties": _object({"value": {}, "source": _STR}),
                 "description": "each setting: its value (an API key as `(set)`) and where it came from"},
    "budget": _STR,
    "recorded": _null(_object({"endpoint": _STR, "model": _STR})),
})

DOCTOR = _object({
    "version": _INT, "ok": _BOOL, "root": _null(_STR), "corpus": _STR, "endpoint": _STR, "model": _STR,
    "checks": {"type": "array", "items": _object({
        "name": _STR, "status": {"type": "string", "enum": ["pass", "fail", "skip"]}, "summary": _STR,
        "detail": _STRS, "data": _OBJ})},
    "cannot_tell": _STRS,
})

# Every command's --json; the MCP tools (folio mcp) declare theirs by name: config and doctor have no tool.
OUTPUTS = {"query": QUERY, "show": SHOW, "status": STATUS, "ls": LS, "similar": SIMILAR, "index": INDEX,
           "config": CONFIG, "doctor": DOCTOR}

# -- inputs: what each argument takes (folio checks them itself, with its own sentences) --------

TEXT_OR_TEXTS = {"anyOf": [_STR, _STRS]}
