"""The `--json` contract agents rely on, end to end: every command's object, in each situation an agent
meets (a normal answer, no match, filters keeping nothing, several corpora, the server down, a partial
index, stale and missing rows, facets, a clamped range, errors), printed by the real `folio` against the
fake embeddings server and checked against folio/schemas.py made strict (a key the schema does not
name fails: a field added to an object is added to the schema and to SKILL.md), with integers as
integers, numbers as numbers, no NaN or Infinity, `version` in every object, keys in the schema's
order, and the rule for errors (nothing on stdout with exit 2; exit 1 prints one object only where
SKILL.md says so; a `folio:` sentence on stderr). The MCP tools' structured content is checked
against the same schemas, and against the output schema each tool declares."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import anyio
import jsonschema
import pytest
from helpers import folio_command

from folio import schemas

REPO = Path(__file__).resolve().parent.parent
SKILL = (REPO / "SKILL.md").read_text(encoding="utf-8")

# Fields that hold the corpus's own data (frontmatter, a check's measurements, a setting's value): any keys.
_OPEN = {"frontmatter", "data", "frontmatter_keys", "frontmatter_samples", "frontmatter_values", "ranks",
         "settings", "query_fields", "document_fields", "value"}


def strict(schema, name: str = ""):
    """The schema with every object that lists its properties closed to others (`additionalProperties:
    false`), but for the objects that hold data of the corpus's own (_OPEN)."""
    s = copy.deepcopy(schema)

    def close(node, key=""):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and key not in _OPEN:
                node.setdefault("additionalProperties", False)
            for k, v in node.items():
                if k == "properties":
                    for pk, pv in v.items():
                        close(pv, pk)
                elif k in ("anyOf", "oneOf", "allOf"):
                    for item in v:
                        close(item, key)
                elif k in ("items", "additionalProperties"):
                    close(v, key)
        elif isinstance(node, list):
            for item in node:
                close(item, key)

    close(s, name)
    return s


def _is_int(_checker, x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)  # 3.0 is no line number


def _is_number(_checker, x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_V = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=(
    jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_int).redefine("number", _is_number)))


def _no_constant(c: str):
    raise AssertionError(f"stdout holds {c}, which is not JSON (an agent's parser refuses it)")


def loads(text: str):
    """Strict JSON: NaN, Infinity and -Infinity refused."""
    return json.loads(text, parse_constant=_no_constant)


def _order(obj, schema, where: str) -> list[str]:
    """Keys printed out of the schema's order (recursively, for the objects the schema lists)."""
    bad = []
    if isinstance(obj, dict):
        branches = schema.get("anyOf") or [schema]
        for b in branches:
            props = b.get("properties")
            if props and set(obj) <= set(props) and set(b.get("required", [])) <= set(obj):
                want = [k for k in props if k in obj]
                if list(obj) != want:
                    bad.append(f"{where}: keys {list(obj)} not in the schema's order {want}")
                for k, v in obj.items():
                    bad += _order(v, props[k], f"{where}.{k}")
                break
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(obj):
            bad += _order(v, schema["items"], f"{where}[{i}]")
    return bad


def problems(kind: str, obj) -> list[str]:
    """Why `obj` breaks the contract of `kind`'s --json (empty: it keeps it)."""
    if kind not in schemas.OUTPUTS:
        return [f"folio/schemas.py has no schema for {kind}'s --json"]
    schema = strict(schemas.OUTPUTS[kind])
    out = [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
           for e in _V(schema).iter_errors(obj)]
    if not isinstance(obj, dict) or obj.get("version") != 1:
        out.append("no `version: 1` at the top")
    for row in (obj.get("roots") or []) if isinstance(obj, dict) else []:
        if isinstance(row, dict) and row.get("version", 1) != 1:
            out.append("a root's object with another version")
    out += _order(obj, schemas.OUTPUTS[kind], kind)
    return out


class Checked:
    """Every situation's object checked, the problems gathered (one run names every mismatch)."""

    def __init__(self):
        self.bad: list[str] = []
        self.seen: dict[str, list] = {}

    def json(self, kind: str, situation: str, r, *, code: int = 0) -> dict | None:
        if r.returncode != code:
            self.bad.append(f"{kind} ({situation}): exit {r.returncode}, expected {code}: {r.stderr.strip()[-400:]}")
        try:
            obj = loads(r.stdout)
        except (ValueError, AssertionError) as e:
            self.bad.append(f"{kind} ({situation}): stdout is not one JSON object ({e}): {r.stdout[:200]!r}")
            return None
        self.object(kind, situation, obj)
        return obj

    def object(self, kind: str, situation: str, obj) -> None:
        self.bad += [f"{kind} ({situation}): {p}" for p in problems(kind, obj)]
        self.seen.setdefault(kind, []).append(obj)

    def error(self, situation: str, r, code: int, kind: str | None = None) -> dict | None:
        """An error: exit `code`, one `folio:` sentence as stderr's last line (the only line starting so),
        and nothing on stdout; or, for `kind` (the commands SKILL.md names), that command's object."""
        if r.returncode != code:
            self.bad.append(f"{situation}: exit {r.returncode}, expected {code}: {r.stderr.strip()[-300:]}")
        lines = r.stderr.strip().splitlines()
        if not lines or not lines[-1].startswith("folio: ") or sum(ln.startswith("folio: ") for ln in lines) != 1:
            self.bad.append(f"{situation}: stderr does not end with one `folio:` sentence: {r.stderr[-300:]!r}")
        if kind is None:
            if r.stdout:
                self.bad.append(f"{situation}: exit {r.returncode} with stdout {r.stdout[:200]!r}")
            return None
        return self.json(kind, situation, r, code=code)

    def check(self):
        assert not self.bad, "\n".join(self.bad)


EGGS = ("---\nid: eggs\nstatus: live\n---\n# Cooking\n\nIntro text about kitchens and stoves.\n\n"
        "## Egg timing\n\nBoil an egg for seven minutes for a soft yolk.\n\n"
        "## Bread\n\nBake bread at high heat for a crust.\n")
RETRY = ("---\nid: retry-v1\nstatus: draft\nsupersedes: [eggs-old]\ntags: [net, http]\n---\n# Retries\n\n"
         "Failed requests are retried with exponential backoff, the delay doubling each time.\n")
LONG = "# Long\n\n" + " ".join(["lengthy"] * 120) + "\n\n## After\n\nA short tail section about ferries.\n"
GARDEN = "---\nstatus: live\n---\n# Garden\n\nWater the tomatoes every morning before the heat.\n"


def _corpus(root: Path, files: dict, srv, run_folio, extra: str = "") -> Path:
    from helpers import indexed

    return indexed(root, files, srv, run_folio, extra)


@pytest.fixture
def corpora(tmp_path, fake_server, run_folio):
    srv = fake_server()
    a = _corpus(tmp_path / "a", {"docs/eggs.md": EGGS, "retry.md": RETRY, "long.md": LONG}, srv, run_folio,
                "max_chars: 300\n")
    b = _corpus(tmp_path / "b", {"garden.md": GARDEN}, srv, run_folio, "max_chars: 300\n")
    return a, b, srv


def test_every_json_object_keeps_the_documented_shape(corpora, run_folio, tmp_path):
    a, b, srv = corpora
    c = Checked()
    q = lambda *args, **kw: run_folio("query", *args, "--json", cwd=a, **kw)  # noqa: E731

    # query: each situation
    top = c.json("query", "normal", q("how long to boil an egg"))
    c.json("query", "semantic", q("how long to boil an egg", "--mode", "semantic"))
    none = c.json("query", "no match", q("zzzqqq", "--mode", "lexical"))
    c.json("query", "filters keep nothing", q("boil an egg", "--where", "status=nope"))
    c.json("query", "join", q("boil an egg", "--exclude-pointed-by", "supersedes"))
    c.json("query", "facets", q("how long to boil", "--words", "egg yolk", "--passage",
                                "Boil an egg for seven minutes for a soft yolk."))
    several = c.json("query", "several roots", run_folio("query", "water tomatoes", "--json", "--root", a,
                                                         "--root", b, cwd=tmp_path))
    c.json("query", "identifier", q("max_chars"))
    # similar
    c.json("similar", "a file", run_folio("similar", "docs/eggs.md", "--json", cwd=a))
    c.json("similar", "a range", run_folio("similar", "docs/eggs.md:9-11", "--json", cwd=a))
    c.json("similar", "stdin", run_folio("similar", "-", "--json", cwd=a, input="# Eggs\n\nBoiling eggs.\n"))
    c.json("similar", "filters keep nothing", run_folio("similar", "docs/eggs.md", "--json", "--where", "x=y",
                                                        cwd=a))
    c.json("similar", "several roots", run_folio("similar", "garden.md", "--json", "--root", a, "--root", b,
                                                 cwd=b))
    # ls
    c.json("ls", "every document", run_folio("ls", "--json", cwd=a))
    c.json("ls", "filters keep nothing", run_folio("ls", "--json", "--where", "status=nope", cwd=a))
    c.json("ls", "keys", run_folio("ls", "--json", "--key", "status", "--key", "nope", cwd=a))
    c.json("ls", "several roots", run_folio("ls", "--json", "--root", a, "--root", b, cwd=tmp_path))
    # show
    c.json("show", "a range", run_folio("show", "docs/eggs.md:9-11", "--json", cwd=a))
    clamped = c.json("show", "a range past the end", run_folio("show", "docs/eggs.md:9-999", "--json", cwd=a))
    # status
    c.json("status", "one root", run_folio("status", "--json", cwd=a))
    c.json("status", "key", run_folio("status", "--json", "--key", "status", cwd=a))
    c.json("status", "several roots", run_folio("status", "--json", "--root", a, "--root", b, cwd=tmp_path))
    c.json("status", "truncated", run_folio("status", "--json", "--truncated", cwd=a))
    c.json("status", "truncated, several roots", run_folio("status", "--json", "--truncated", "--root", a,
                                                           "--root", b, cwd=tmp_path))
    # config, doctor, index
    c.json("config", "in a corpus", run_folio("config", "--json", cwd=a))
    c.json("config", "outside any corpus", run_folio("config", "--json", cwd=tmp_path))
    doc = run_folio("doctor", "--json", cwd=a)
    c.json("doctor", "the fake server", doc, code=doc.returncode)
    c.json("index", "nothing to do", run_folio("index", "--json", cwd=a))

    # stale and missing rows (--no-refresh), then a refresh
    row_sha = next(r["citation"]["sha"] for r in top["results"] if r["path"] == "docs/eggs.md")  # a row before the edit
    (a / "docs" / "eggs.md").write_text(EGGS.replace("Intro text", "New intro\n\nIntro text"), encoding="utf-8")
    stale = c.json("query", "stale rows", q("boil an egg", "--no-refresh"))
    c.json("show", "stale", run_folio("show", "docs/eggs.md:10-12", "--json", cwd=a))
    moved = c.json("show", "the row's section moved since the row", run_folio(
        "show", "docs/eggs.md:9-11", "--sha", row_sha, "--json", cwd=a))
    c.json("show", "the row's section not found since the row", run_folio(
        "show", "docs/eggs.md:9-11", "--sha", row_sha, "--trail", '["Nowhere"]', "--json", cwd=a), code=1)
    c.json("ls", "stale", run_folio("ls", "--json", cwd=a))
    c.json("query", "refreshed", q("boil an egg"))
    (a / "retry.md").unlink()
    missing = c.json("query", "missing rows", q("failed requests retried backoff", "--no-refresh"))
    c.json("status", "a file deleted", run_folio("status", "--json", cwd=a))

    # a partial index: one section the server refuses waits for its vector
    (a / "poison.md").write_text("# Poison\n\nPOISON ferries across the lake.\n", encoding="utf-8")
    srv.control(fail_input_containing="POISON", fail_input_fault="500")
    part = run_folio("index", "--json", cwd=a)
    c.json("index", "a section refused", part, code=part.returncode)
    c.json("query", "partial index, semantic", q("ferries across the lake", "--mode", "semantic"))
    c.json("query", "partial index, hybrid", q("ferries across the lake"))
    c.json("status", "sections waiting", run_folio("status", "--json", cwd=a))
    c.error("similar: a source the server will not embed", run_folio("similar", "poison.md", "--json", cwd=a), 1)
    srv.control(fail_input_containing=None)

    # the server down: lexical, with the notice saying why
    srv.stop()
    down = c.json("query", "server down", q("how long to boil an egg"))
    c.json("query", "server down, semantic asked", q("how long to boil an egg", "--mode", "semantic"))
    c.json("similar", "server down, stored vectors", run_folio("similar", "docs/eggs.md", "--json", cwd=a))
    (a / "new.md").write_text("# New\n\nA new note about herons.\n", encoding="utf-8")
    ix = run_folio("index", "--json", cwd=a)
    c.json("index", "server down", ix, code=ix.returncode)
    d = run_folio("doctor", "--json", cwd=a)
    c.json("doctor", "server down", d, code=1)

    c.check()
    # what the situations were meant to show did show
    assert top["results"] and top["confidence"]["band"] in ("grounded", "partial", "weak", "none")
    assert none["results"] == [] and none["confidence"] is not None
    assert several["root"] is None and several["confidence"] is None and len(several["roots"]) == 2
    assert clamped["end"] < 999 and clamped["notices"]
    assert {r["freshness"] for r in stale["results"]} >= {"stale"}
    assert moved["since_row"]["state"] == "moved" and moved["start"] == 11
    assert "missing" in {r["freshness"] for r in missing["results"]}
    assert down["mode"] == "lexical" and down["notices"]


def test_errors_print_one_sentence_and_no_object_but_where_skill_md_says(corpora, run_folio, tmp_path):
    """With --json, an agent parses stdout whenever it is not empty: a usage error (exit 2) or an error
    (exit 1) leaves it empty and says why in one `folio:` sentence on stderr, whichever command and
    whoever found it (click or folio); the four answers that are still answers on exit 1 (SKILL.md)
    print their object beside that sentence."""
    a, b, srv = corpora
    c = Checked()
    bare = tmp_path / "bare"
    bare.mkdir()
    usage = {
        "query: an empty question": ("query", "", "--json"),
        "query: a --where folio cannot read": ("query", "x", "--json", "--where", "a>=1"),
        "query: a limit out of range": ("query", "x", "--json", "-l", "0"),
        "query: an unknown option": ("query", "x", "--json", "--bogus"),
        "query: no question": ("query", "--json"),
        "query: --json with -0": ("query", "x", "--json", "-0"),
        "query: a mode folio has not": ("query", "x", "--json", "--mode", "fuzzy"),
        "similar: nothing on stdin": ("similar", "-", "--json"),
        "show: no reference": ("show", "--json"),
        "ls: a --where folio cannot read": ("ls", "--json", "--where", ">"),
        "ls: --json with -0": ("ls", "--json", "-0"),
        "status: an empty key": ("status", "--json", "--key", ""),
        "status: key and truncated": ("status", "--json", "--key", "k", "--truncated"),
        "config: an unknown option": ("config", "--json", "--bogus"),
        "doctor: a budget out of range": ("doctor", "--json", "--max-chars", "5"),
        "index: a budget out of range": ("index", "--json", "--max-chars", "5"),
        "index: --json with --watch": ("index", "--json", "--watch"),
    }
    for situation, args in usage.items():
        try:
            r = run_folio(*args, cwd=a, input="", timeout=30)
        except subprocess.TimeoutExpired:  # `index --json --watch` watched on (a JSON report, then lines)
            c.bad.append(f"{situation}: still running after 30 s")
            continue
        c.error(situation, r, 2)
    failing = {
        "query: a root with no index": (a, ("query", "x", "--json", "--root", bare)),
        "query: no index here": (bare, ("query", "x", "--json")),
        "show: a file the corpus has not": (a, ("show", "nope.md:1-2", "--json")),
        "similar: a file the corpus has not": (a, ("similar", "nope.md", "--json")),
        "ls: a root with no index": (a, ("ls", "--json", "--root", bare)),
        "status: no index here": (bare, ("status", "--json")),
    }
    for situation, (cwd, args) in failing.items():
        c.error(situation, run_folio(*args, cwd=cwd), 1)

    # exit 1 with the object: a file deleted since indexing (show), a damaged corpus among several
    # (status), a failed probe (doctor), a run the server failed (index)
    (a / "retry.md").unlink()
    gone = c.error("show: a file deleted since indexing", run_folio("show", "retry.md:6-8", "--json", cwd=a), 1,
                   "show")
    d = _corpus(tmp_path / "d", {"x.md": "# X\n\nan index to damage\n"}, srv, run_folio)
    import contextlib as _c
    import sqlite3

    with _c.closing(sqlite3.connect(d / ".folio" / "index.db")) as db, db:
        db.execute("UPDATE meta SET value = 'x' WHERE key = 'dim'")
    some = c.error("status: one of several damaged", run_folio("status", "--json", "--root", b, "--root", d,
                                                              cwd=tmp_path), 1, "status")
    (a / "new.md").write_text("# New\n\nherons\n", encoding="utf-8")
    srv.stop()
    ix = c.error("index: the server down", run_folio("index", "--json", cwd=a), 1, "index")
    doc = c.error("doctor: the server down", run_folio("doctor", "--json", cwd=a), 1, "doctor")
    c.check()
    assert gone["freshness"] == "missing" and gone["text"] is None
    assert [x["root"] for x in some["roots"]] == [str(b)]
    assert ix["error"] and ix["waiting"] == 1
    assert doc["ok"] is False and any(ch["status"] == "fail" for ch in doc["checks"])


def _files_committed(root: Path) -> int:
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{root / '.folio' / 'index.db'}?mode=ro", uri=True)) as db:
            return db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_run_under_way_and_a_run_stopped_keep_the_shape(tmp_path, fake_server, run_folio):
    """`running` while `folio index` writes the index, and the confidence block of a half-built index
    (`indexed_files`, `found_files`), during the run and after it was killed, in the schemas' shapes."""
    from helpers import write_tree

    srv = fake_server(delay_ms=300)
    n = 600  # the first commit (256 sections) holds fewer than half of them
    root = write_tree(tmp_path / "slow", {f"n{i:03}.md": f"# Note {i}\n\nferries and herons, note {i}\n"
                                          for i in range(n)})
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\nmodel: fake\n", encoding="utf-8")
    c = Checked()
    proc = subprocess.Popen([*folio_command(), "index"], cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # its group: it and its workers
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and _files_committed(root) == 0:
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGSTOP)  # held after its first commit: under way, and no further
        assert proc.poll() is None and _files_committed(root) < n / 2, "the run ended before a first commit was seen"
        during = c.json("status", "a run under way", run_folio("status", "--json", cwd=root))
        c.json("query", "a run under way", run_folio("query", "ferries", "--json", "--no-refresh", cwd=root))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    half = c.json("query", "a run stopped", run_folio("query", "ferries herons", "--json", "--no-refresh",
                                                      cwd=root))
    c.json("status", "a run stopped", run_folio("status", "--json", cwd=root))
    c.check()
    assert during["running"] and during["running"]["files_total"] == n
    assert half["confidence"]["indexed_files"] < half["confidence"]["found_files"] == n


def _paragraph(text: str, start: str) -> str:
    at = text.index(start)
    end = text.find("\n\n", at)
    return text[at:end if end >= 0 else len(text)]


def _described(kind: str) -> str:
    """What SKILL.md says of `kind`'s --json: its paragraph in "The --json shapes" (with the example
    object), or its --json row in the command's flag table."""
    shapes = SKILL[SKILL.index("## The --json shapes"):]
    rule = _paragraph(shapes, "Data on stdout")
    if kind == "query":
        return rule + shapes[shapes.index("`folio query --json`"):shapes.index("`folio doctor --json`")]
    if kind == "doctor":
        return rule + shapes[shapes.index("`folio doctor --json`"):shapes.index("`folio index --json`")]
    if kind == "status":
        return rule + _paragraph(shapes, "`folio status --json`") + _paragraph(shapes, "`folio status --truncated")
    if kind in ("index", "ls", "config"):
        return rule + _paragraph(shapes, f"`folio {kind} --json`")
    row = {"show": "| `--json` | `folio show ", "similar": "| `--json` | `folio similar "}[kind]
    return rule + SKILL[SKILL.index(row):].split("\n", 1)[0] + (_described("query") if kind == "similar" else "")


def _named(key: str, text: str) -> bool:
    return f'"{key}"' in text or f"`{key}`" in text


def test_skill_md_names_every_field_and_its_examples_keep_the_schemas():
    """SKILL.md is the promise agents read: each field of each command's object is named where SKILL.md
    describes that command's --json, and its example objects validate."""
    shapes = SKILL[SKILL.index("## The --json shapes"):]
    examples = re.findall(r"```json\n(.*?)```", shapes, flags=re.S)
    assert len(examples) == 2
    for kind, text in zip(("query", "doctor"), examples, strict=True):
        assert problems(kind, loads(text)) == [], (kind, problems(kind, loads(text)))
    unnamed = []
    for kind, schema in schemas.OUTPUTS.items():
        said = _described(kind)
        for branch in schema.get("anyOf") or [schema]:
            unnamed += [f"{kind}.{key}" for key in branch["properties"] if not _named(key, said)]
    said = _described("query")
    unnamed += [f"query.results.{key}" for key in schemas.QUERY_ROW["properties"] if not _named(key, said)]
    unnamed += [f"query.confidence.{key}" for key in schemas.CONFIDENCE["properties"] if not _named(key, said)]
    said = _described("status")
    unnamed += [f"status.running.{key}" for key in schemas.RUNNING["properties"] if not _named(key, said)]
    said = _described("similar")
    unnamed += [f"similar.source.{key}" for key in schemas.SIMILAR["properties"]["source"]["properties"]
                if not _named(key, said)]
    assert not unnamed, f"fields SKILL.md does not name where it describes their command's --json: {unnamed}"


@contextlib.asynccontextmanager
async def _mcp(cwd: Path, *args: str):
    from mcp.client.stdio import StdioServerParameters

    mcp_client = pytest.importorskip("mcp.client")
    cmd = folio_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", *args], cwd=str(cwd),
                                   env={**os.environ, "FOLIO_WATCH": "off"})
    async with mcp_client.Client(params, read_timeout_seconds=120) as client:
        yield client


def test_mcp_tools_answer_the_objects_the_cli_prints(corpora, run_folio, tmp_path):
    """Each tool declares its command's schema as its output schema (the SDK's client validates every
    answer against it), and its structured content keeps the strict contract too; an error is a
    tool error carrying one `folio:` sentence and no structured content, but for the answers an exit 1
    of the CLI still prints (show of a file gone, status with a corpus refused, index with work left
    undone): their tool error carries that object as structured content too, as the CLI prints it (they
    came back as text alone, and an agent over MCP lost what an agent of the CLI gets)."""
    a, b, srv = corpora
    c = Checked()

    def text_of(result) -> str:
        return "\n".join(x.text for x in result.content if getattr(x, "text", None) is not None)

    async def call(client, tool, args, situation):
        got = await client.call_tool(tool, args)  # the SDK validates it against the declared schema
        if got.is_error:
            c.bad.append(f"{tool} ({situation}): a tool error: {text_of(got)[:300]}")
        else:
            c.object(tool, f"MCP, {situation}", got.structured_content)
        return got.structured_content

    async def error(client, tool, args, situation):
        got = await client.call_tool(tool, args)
        said = text_of(got)
        if not got.is_error or got.structured_content is not None or not said.startswith("folio: "):
            c.bad.append(f"{tool} ({situation}): not a tool error with one `folio:` sentence: "
                         f"{got.is_error} {got.structured_content} {said[:200]!r}")

    async def answered(client, tool, args, situation):
        """A tool error that is still an answer: the object, and the text ending with the `folio:` sentence."""
        got = await client.call_tool(tool, args)
        lines = text_of(got).splitlines()
        if not got.is_error or not lines or not lines[-1].startswith("folio: "):
            c.bad.append(f"{tool} ({situation}): not a tool error ending with a `folio:` sentence: "
                         f"{got.is_error} {text_of(got)[-200:]!r}")
        if got.structured_content is None:
            c.bad.append(f"{tool} ({situation}): the tool error carries no object (the CLI prints it on exit 1)")
            return {}
        c.object(tool, f"MCP error, {situation}", got.structured_content)
        return got.structured_content

    async def body():
        async with _mcp(a) as one:
            tools = {t.name: t for t in (await one.list_tools()).tools}
            for name, tool in tools.items():
                if tool.output_schema != schemas.OUTPUTS[name]:
                    c.bad.append(f"the {name} tool declares another output schema than folio/schemas.py's")
            await call(one, "query", {"query": "how long to boil an egg"}, "normal")
            await call(one, "query", {"query": "zzzqqq", "mode": "lexical"}, "no match")
            await call(one, "query", {"query": "boil", "where": "status=nope"}, "filters keep nothing")
            await call(one, "query", {"query": "how long to boil", "words": "egg yolk",
                                      "passage": "Boil an egg for seven minutes."}, "facets")
            await call(one, "similar", {"ref": "docs/eggs.md"}, "a file")
            await call(one, "similar", {"text": "# Eggs\n\nBoiling eggs.\n"}, "a text")
            await call(one, "ls", {}, "every document")
            await call(one, "ls", {"where": "status=nope"}, "filters keep nothing")
            await call(one, "show", {"ref": "docs/eggs.md:9-999"}, "a range past the end")
            await call(one, "status", {}, "one root")
            await call(one, "status", {"key": "status"}, "key")
            await call(one, "status", {"truncated": True}, "truncated")
            await call(one, "index", {}, "nothing to do")
            await error(one, "query", {"query": ""}, "an empty question")
            await error(one, "query", {"query": "x", "mode": "fuzzy"}, "a mode folio has not")
            await error(one, "query", {"query": "x", "root": "/"}, "an argument it does not take")
            await error(one, "show", {"ref": "nope.md:1-2"}, "a file the corpus has not")
            await error(one, "status", {"key": "k", "truncated": True}, "key and truncated")
            await error(one, "similar", {}, "neither ref nor text")
            (a / "retry.md").unlink()
            gone = await answered(one, "show", {"ref": "retry.md:6-8"}, "a file deleted since indexing")
            assert gone.get("freshness") == "missing" and gone.get("text", "") is None, gone
            srv.stop()
            down = await call(one, "query", {"query": "how long to boil an egg"}, "server down")
            assert down["mode"] == "lexical"
        async with _mcp(tmp_path, "--root", str(a), "--root", str(b)) as two:
            await call(two, "query", {"query": "water the tomatoes"}, "several roots")
            await call(two, "ls", {}, "several roots")
            await call(two, "status", {}, "several roots")
            await call(two, "status", {"truncated": True}, "truncated, several roots")
            await call(two, "similar", {"ref": "garden.md"}, "several roots")
            # the server down: a run with nothing to embed still reports each root
            several = await call(two, "index", {}, "several roots")
            assert [x["root"] for x in several["roots"]] == [str(a), str(b)]
            (a / "new.md").write_text("# New\n\nA new note about herons.\n", encoding="utf-8")
            left = await answered(two, "index", {}, "the server down, a section to embed")
            assert [(x["waiting"], bool(x["error"])) for x in left.get("roots", [])] == [(1, True), (0, False)], left
            import sqlite3

            with contextlib.closing(sqlite3.connect(b / ".folio" / "index.db")) as db, db:
                db.execute("UPDATE meta SET value = 'x' WHERE key = 'dim'")
            some = await answered(two, "status", {}, "one of several damaged")
            assert [x["root"] for x in some.get("roots", [])] == [str(a)], some
            cut = await answered(two, "status", {"truncated": True}, "truncated, one of several damaged")
            assert cut.get("roots") == [str(a)], cut

    anyio.run(body)
    c.check()
