"""The lexical plane as a user meets it, through the real `folio` CLI: indexing with no server, the
fallback when the server goes away (DESIGN §6), `query --lexical`, citations, the confidence block,
and `folio show`."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from helpers import free_port, many_files

from folio import lexical, sections

DOCS = {
    "docs/mesh.md": (
        "# Service mesh\n\n"
        "We adopted a service mesh to stop a slow dependency taking down checkout.\n\n"
        "## Why we chose Helix\n\n"
        "Helix gave us per-route timeouts and circuit breaking without touching\n"
        "application code. The alternative was a library in every service.\n"
    ),
    "docs/cache.md": (
        "# Cache\n\nThe cache keeps rendered pages on local disk for an hour.\n\n"
        "## Eviction\n\nLeast recently used pages are evicted first when the disk fills.\n"
    ),
    "docs/retries.md": (
        "# Retries\n\nClients retry idempotent requests with exponential backoff and jitter.\n\n"
        "## Budgets\n\nA retry budget caps retries at ten percent of traffic.\n"
    ),
    "ops/oncall.md": (
        "---\ntitle: On-call handbook\n---\n# Paging\n\nThe pager rotates weekly; escalate after fifteen minutes.\n\n"
        "## Handover\n\nWrite a handover note with open incidents before your shift ends.\n"
    ),
    "ops/deploy.md": (
        "# Deploys\n\nDeploys go out behind a feature flag, canary first, then ten percent.\n\n"
        "## Rollback\n\nRoll back by flipping the flag; never redeploy an old build under pressure.\n"
    ),
    "notes/glossary.md": (
        "# Glossary\n\n## Canary\n\nA small slice of traffic that meets a new build first.\n\n"
        "## Idempotent\n\nA request that can be repeated without changing the result twice.\n"
    ),
}


def closed_endpoint() -> str:
    return f"http://127.0.0.1:{free_port()}/v1/embeddings"


def corpus(tmp_path: Path, write_tree, files=DOCS) -> Path:
    root = tmp_path / "corpus"
    write_tree(root, files)
    return root


def index(run_folio, root: Path, endpoint: str, *args):
    return run_folio("index", *args, cwd=root, env={"FOLIO_ENDPOINT": endpoint})


def query_json(run_folio, root: Path, text: str, *args, endpoint: str | None = None, cwd: Path | None = None):
    env = {"FOLIO_ENDPOINT": endpoint} if endpoint else None
    r = run_folio("query", text, "--json", *args, cwd=cwd or root, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def snapshot(root: Path) -> dict:
    """Everything a run could change: every table of index.db, and every file under .folio/."""
    db = sqlite3.connect(root / ".folio" / "index.db")
    try:
        tables = {t: sorted(map(repr, db.execute(f"SELECT * FROM {t}")))  # noqa: S608 - our own names
                  for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        db.close()
    files = {}
    for p in sorted((root / ".folio").rglob("*")):
        if p.is_file() and p.suffix not in (".db-wal", ".db-shm") and p.name not in (
                "index.db", "index.db-wal", "index.db-shm", "write.lock"):
            files[str(p.relative_to(root))] = p.read_bytes()
    return {"tables": tables, "files": files}


# --------------------------------------------------------------------------- no server at all


def test_no_server_index_exits_0_and_query_answers_lexically_with_notice(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    endpoint = closed_endpoint()
    r = index(run_folio, root, endpoint)
    assert r.returncode == 0, r.stderr
    notice = [ln for ln in r.stderr.splitlines() if "lexical plane only" in ln]
    assert len(notice) == 1 and endpoint in notice[0] and "folio index" in notice[0]
    assert "Traceback" not in r.stderr
    # what it indexed, not only "0 embedded" (read as nothing indexed)
    assert re.search(r"^indexed \d+ files, \d+ new; sections: [1-9]\d* in the lexical plane, 0 embedded; ", r.stdout), \
        r.stdout

    r = run_folio("query", "why did we choose helix", cwd=root, env={"FOLIO_ENDPOINT": endpoint})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].endswith("docs/mesh.md:5-8")
    assert "Why we chose Helix" in r.stdout.splitlines()[1]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "lexical" in lines[0] and endpoint in lines[0]

    data, _ = query_json(run_folio, root, "rollback a deploy", endpoint=endpoint)
    assert data["mode"] == "lexical"
    top = data["results"][0]
    assert top["path"] == "ops/deploy.md" and top["trail"] == ["Deploys", "Rollback"]
    sha = __import__("hashlib").sha256((root / "ops/deploy.md").read_bytes()).hexdigest()[:12]
    assert top["citation"] == {"loc": f"ops/deploy.md:L{top['start']}-L{top['end']}", "sha": sha,
                               "freshness": "current"}


def test_quickstart_from_a_subdirectory_prints_paths_from_there(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    r = run_folio("query", "handover note", "--paths-only", cwd=root / "ops")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "oncall.md:8-10"


# --------------------------------------------------------------------------- the server comes and goes


def test_lexical_flag_ranks_bm25f_while_the_server_answers(tmp_path, write_tree, run_folio, fake_server):
    srv = fake_server()
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, srv.url).returncode == 0
    sem, err = query_json(run_folio, root, "exponential backoff jitter", "--mode", "semantic")
    assert sem["mode"] == "semantic" and err == ""
    lex, err = query_json(run_folio, root, "exponential backoff jitter", "--lexical")
    assert lex["mode"] == "lexical" and err == ""
    assert lex["results"][0]["path"] == "docs/retries.md"
    # BM25F scores, not cosines: the reference scorer over the indexed records gives the same number
    got = {(r["path"], r["start"], r["end"]): r["score"] for r in lex["results"]}
    assert_reference(got, reference_scores(root, "exponential backoff jitter"))


def test_server_down_query_answers_lexically_naming_both_endpoints(tmp_path, write_tree, run_folio, fake_server):
    srv = fake_server()
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, srv.url).returncode == 0
    srv.stop()
    now = closed_endpoint()
    data, err = query_json(run_folio, root, "retry budget", endpoint=now)
    assert data["mode"] == "lexical"
    assert data["results"][0]["path"] == "docs/retries.md"
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert srv.url in lines[0] and now in lines[0] and "lexical" in lines[0]
    assert data["notices"] == lines


def test_index_holding_vectors_with_server_down_indexes_every_file_lexically_and_exits_1(
        tmp_path, write_tree, run_folio, fake_server):
    srv = fake_server()
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, srv.url).returncode == 0
    srv.stop()
    write_tree(root, {"docs/cache.md": DOCS["docs/cache.md"] + "\n## Warmup\n\nWarm the cache at boot.\n",
                      "docs/new.md": "# New\n\nA brand new page about sharding.\n"})
    os.remove(root / "notes/glossary.md")
    r = index(run_folio, root, srv.url)
    # exit 1: the semantic plane is behind (a script running `folio index` must notice), but the
    # lexical plane holds every file walked: the new page is found by its words, the deleted one is gone
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("folio: ") and srv.url in lines[0], r.stderr
    assert "2 sections in 2 files wait for vectors" in lines[0] and "run `folio index` again" in lines[0]
    assert "committed before" not in lines[0]
    data, err = query_json(run_folio, root, "sharding")
    assert data["mode"] == "lexical" and data["results"][0]["path"] == "docs/new.md"
    data, _ = query_json(run_folio, root, "idempotent canary glossary", "--lexical")
    assert all(h["path"] != "notes/glossary.md" for h in data["results"])
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (s["files"], s["sections"] - s["embedded"]) == (6, 2)

    # the server is back: the next run embeds only what waits, and the query no longer warns
    srv.restart()
    srv.control(reset_stats=True)
    r = index(run_folio, root, srv.url)
    assert r.returncode == 0, r.stderr
    assert srv.stats()["inputs"] <= 2 + 2  # the two waiting sections (+ the probe and the budget check)
    data, err = query_json(run_folio, root, "sharding")
    assert data["mode"] == "hybrid" and err == ""


def test_server_dying_mid_run_exits_1_keeping_committed_batches(tmp_path, write_tree, run_folio, fake_server):
    # 60 files x 9 records = 540 texts: three commits of <= 256 texts. The probe, the budget check and
    # 8 requests of 32 finish the first commit; the server fails from its 12th good answer on.
    srv = fake_server(fail_after=12)
    root = tmp_path / "corpus"
    write_tree(root, many_files(60, 8))
    r = index(run_folio, root, srv.url)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "failed mid-run" in lines[0] and "kept" in lines[0], r.stderr
    db = sqlite3.connect(root / ".folio" / "index.db")
    files, records, embedded = db.execute(
        "SELECT (SELECT COUNT(*) FROM files), COUNT(*), SUM(vec) FROM records").fetchone()
    db.close()
    # every file walked is in the index (the lexical plane); what the server did not embed waits
    assert files == 60 and records == 540 and 0 < embedded < 540
    assert f"the {embedded} sections embedded before that are kept" in lines[0]
    assert f"{540 - embedded} sections in " in lines[0] and "wait for vectors" in lines[0]
    # while it fails, every file answers lexically (with the notice), the last one too
    data, err = query_json(run_folio, root, "widget59x3", "--no-refresh", endpoint=srv.url)
    assert data["mode"] == "lexical" and srv.url in err and data["results"][0]["path"] == "bulk/f059.md"
    # once it is back, by meaning, saying which part of the corpus has no vectors yet
    srv.control(fail_after=None)
    data, err = query_json(run_folio, root, "widget0x3", "--no-refresh", "--mode", "semantic", endpoint=srv.url)
    assert data["mode"] == "semantic" and data["results"][0]["path"] == "bulk/f000.md"
    partial = [n for n in data["notices"] if "no vectors" in n]
    assert len(partial) == 1 and f"{540 - embedded} of the 540 sections" in partial[0]
    assert "folio index" in partial[0] and partial[0] in err

    srv.control(reset_stats=True)
    r = index(run_folio, root, srv.url)
    assert r.returncode == 0, r.stderr
    db = sqlite3.connect(root / ".folio" / "index.db")
    assert db.execute("SELECT (SELECT COUNT(*) FROM files), COUNT(*), SUM(vec) FROM records").fetchone() == (
        60, 540, 540)
    db.close()
    # the second run embedded only what the first did not commit (+ its probe and budget check)
    assert srv.stats()["inputs"] <= 540 - embedded + 2


@pytest.mark.llama
def test_real_llama_server_semantic_then_down_then_lexical(tmp_path, write_tree, run_folio, llama_server):
    root = corpus(tmp_path, write_tree)
    down = closed_endpoint()
    assert index(run_folio, root, down).returncode == 0  # no server yet: lexical only
    data, _ = query_json(run_folio, root, "rolling back a bad release", endpoint=down)
    assert data["mode"] == "lexical"

    srv = llama_server()
    r = index(run_folio, root, srv.url)
    assert r.returncode == 0, r.stderr
    st = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert st["embedded"] == st["sections"] > 0 and st["dim"] == 384
    data, err = query_json(run_folio, root, "rolling back a bad release", "--mode", "semantic", endpoint=srv.url)
    assert data["mode"] == "semantic" and err == ""
    assert data["results"][0]["path"] == "ops/deploy.md"  # by meaning: the section says "roll back"
    # and the block says which words of the question no section contains
    assert data["confidence"]["missing"] == ["bad", "release"] and data["confidence"]["band"] == "partial"

    srv.stop()
    data, err = query_json(run_folio, root, "rolling back a bad release", endpoint=srv.url)
    assert data["mode"] == "lexical"
    assert srv.url in err and "lexical" in err
    assert data["results"][0]["path"] == "ops/deploy.md"


# --------------------------------------------------------------------------- incremental == clean


def reference_scores(root: Path, text: str) -> dict[tuple[str, int, int], float]:
    """A short pure-Python BM25F over the corpus files as they are now (sections parsed by folio)."""
    docs = {}
    for p in sorted(root.rglob("*.md")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith("."):
            continue
        doc = sections.parse_document(sections.decode(p.read_bytes())[0], 8000)
        for s in doc.records:
            docs[(rel, s.start, s.end)] = (s.text, s.heading, doc.title, rel, " ".join(s.trail[:-1]))
    fields = {k: [lexical.analyze(" ".join(lexical.tokenize_path(v)) if f == 3 else v) for f, v in enumerate(d)]
              for k, d in docs.items()}
    n = len(docs)
    avg = [sum(len(fs[f]) for fs in fields.values()) / n or 1.0 for f in range(5)]
    out = dict.fromkeys(docs, 0.0)
    for term in dict.fromkeys(lexical.analyze(text)):
        df = sum(1 for fs in fields.values() if any(term in x for x in fs))
        if not df:
            continue
        idf = math.log((n - df + 0.5) / (df + 0.5) + 1)
        for k, fs in fields.items():
            tft = sum(lexical.WEIGHTS[f] * fs[f].count(term) / (1 - lexical.B + lexical.B * len(fs[f]) / avg[f])
                      for f in range(5) if fs[f])
            if tft:
                out[k] += idf * tft * (lexical.K1 + 1) / (tft + lexical.K1)
    return {k: v for k, v in out.items() if v > 0}


def assert_reference(rows: dict, ref: dict, complete: bool = False) -> None:
    """Every result row scores like the reference: a row merged from touching records scores their
    line-weighted mean. complete: the rows cover exactly the records the reference scores > 0."""
    covered = set()
    for (path, start, end), value in rows.items():
        recs = {k: v for k, v in ref.items() if k[0] == path and start <= k[1] and k[2] <= end}
        assert recs, (path, start, end)
        lines = {k: k[2] - k[1] + 1 for k in recs}
        want = sum(v * lines[k] for k, v in recs.items()) / sum(lines.values())
        assert value == pytest.approx(want, rel=1e-5), (path, start, end)
        covered |= recs.keys()
    if complete:
        assert covered == ref.keys()


QUERIES = ("helix timeouts", "cache eviction disk", "retry budget traffic", "canary deploy flag",
           "handover incidents", "widget gadget topic", "zorblaxian")


def lexical_results(run_folio, root: Path, text: str) -> dict:
    data, _ = query_json(run_folio, root, text, "--lexical", "-l", "1000", "--no-refresh")
    return {(r["path"], r["start"], r["end"]): r["score"] for r in data["results"]}


def test_incremental_edits_through_folio_index_score_like_a_clean_build(tmp_path, write_tree, run_folio):
    """After a series of edits, each followed by `folio index`, `folio query --lexical --json` gives
    the scores of a clean build of the final tree, and of a pure-Python BM25F over it."""
    endpoint = closed_endpoint()
    root = tmp_path / "corpus"
    big = many_files(1, 100)["bulk/f000.md"]
    write_tree(root, {**DOCS, "bulk/big.md": big})

    def step(**edits):
        for rel, content in edits.items():
            if content is None:
                os.remove(root / rel)
            elif isinstance(content, tuple):  # rename
                os.rename(root / rel, root / content[0])
            else:
                write_tree(root, {rel: content})
        r = index(run_folio, root, endpoint, "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    step()
    step(**{"docs/cache.md": DOCS["docs/cache.md"].replace("an hour", "a day") + "\n## Warmup\n\nWarm at boot.\n"})
    step(**{"docs/new.md": "# Sharding\n\nShard the cache by tenant; eviction stays per shard.\n"})
    step(**{"notes/glossary.md": None})
    step(**{"ops/deploy.md": ("ops/release.md",)})
    step(**{"bulk/big.md": big.replace("about", "regarding")})  # every record of a big file changes
    rep = step(**{"bulk/big.md": big.replace("about", "concerning").replace("gadget", "gizmo")})
    assert rep["compacted"] > 0  # dead rows outnumbered live ones: slots renumbered, segments merged
    step(**{"docs/retries.md": DOCS["docs/retries.md"].replace("ten percent", "twenty percent of traffic")})
    step(**{"notes/glossary.md": DOCS["notes/glossary.md"]})  # back again
    db = sqlite3.connect(root / ".folio" / "index.db")
    assert db.execute("SELECT COUNT(*) FROM lexseg").fetchone()[0] >= 1
    db.close()

    clean = tmp_path / "clean"
    shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".folio"))
    assert index(run_folio, clean, endpoint).returncode == 0

    for q in QUERIES:
        inc, fresh = lexical_results(run_folio, root, q), lexical_results(run_folio, clean, q)
        assert inc.keys() == fresh.keys(), q
        for key in inc:
            assert inc[key] == pytest.approx(fresh[key], rel=1e-6, abs=1e-6), (q, key)
        assert_reference(inc, reference_scores(root, q), complete=True)
    assert lexical_results(run_folio, root, "zorblaxian") == {}
    assert next(iter(lexical_results(run_folio, root, "roll back flag"))) == ("ops/release.md", 5, 7)


# --------------------------------------------------------------------------- confidence


def test_missing_names_a_made_up_word_in_the_users_spelling(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    data, _ = query_json(run_folio, root, "Helix timeouts with Zorblaxian")
    c = data["confidence"]
    assert c["missing"] == ["Zorblaxian"] and c["band"] == "partial" and c["answerable"] is True
    assert 0 < c["coverage"] < 1
    assert c["separation_floor"] == lexical.DEFAULT_SEPARATION_FLOOR
    assert c["doc_coverage_floor"] == lexical.DEFAULT_DOC_COVERAGE_FLOOR
    r = run_folio("query", "Helix timeouts with Zorblaxian", "--band", cwd=root)
    assert r.returncode == 0
    band = [ln for ln in r.stderr.splitlines() if ln.startswith("confidence:")]
    assert band == ["confidence: partial - answer, but say what is missing. Not in this corpus: Zorblaxian."]
    assert "confidence" not in r.stdout


def test_band_none_when_nothing_scores(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    data, _ = query_json(run_folio, root, "kubernetes zorblaxian")
    assert data["results"] == []
    c = data["confidence"]
    assert c["band"] == "none" and c["answerable"] is False and c["support"] == 0
    assert c["missing"] == ["kubernetes", "zorblaxian"] and c["coverage"] == 0.0
    r = run_folio("query", "kubernetes zorblaxian", "--band", cwd=root)
    assert "confidence: none - nothing in the index scored for this query." in r.stderr.splitlines()


def test_band_none_under_filters_that_keep_nothing_names_the_filters_not_the_mode(tmp_path, write_tree, run_folio):
    # the question's words are in the corpus, but --where keeps no section: the band must not send the
    # agent to --mode lexical (this query already ranks lexically), it must point at the filter
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    data, _ = query_json(run_folio, root, "helix circuit breaking", "--where", "title=Nonexistent")
    assert data["results"] == [] and data["mode"] == "lexical"
    assert data["confidence"]["band"] == "none" and data["confidence"]["coverage"] > 0
    r = run_folio("query", "helix circuit breaking", "--where", "title=Nonexistent", "--band", cwd=root)
    assert r.returncode == 0
    band = [ln for ln in r.stderr.splitlines() if ln.startswith("confidence:")]
    assert len(band) == 1 and "--mode" not in band[0], band
    assert "loosen --where or --exclude-pointed-by" in band[0], band
    r = run_folio("query", "kubernetes zorblaxian", "--where", "title=Nonexistent", "--band", cwd=root)
    assert "--mode" not in r.stderr and "loosen --where" in r.stderr, r.stderr


def test_band_is_silent_when_grounded_and_absent_without_the_flag(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    data, _ = query_json(run_folio, root, "helix circuit breaking")
    assert data["confidence"]["band"] == "grounded"
    r = run_folio("query", "helix circuit breaking", "--band", cwd=root)
    assert r.returncode == 0 and "confidence" not in r.stderr
    r = run_folio("query", "helix zorblaxian", cwd=root)  # partial, but --band was not asked for
    assert "confidence" not in r.stderr


def test_doc_coverage_floor_flags_words_that_no_one_section_holds(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    data, _ = query_json(run_folio, root, "helix pager eviction")  # three sections, three files
    c = data["confidence"]
    assert c["missing"] == [] and c["coverage"] == 1.0
    assert c["doc_coverage"] < c["doc_coverage_floor"] and c["band"] == "partial"
    r = run_folio("query", "helix pager eviction", "--band", cwd=root)
    assert any(ln.startswith("confidence: partial") and "no single section" in ln for ln in r.stderr.splitlines())


def test_confidence_travels_with_semantic_results(tmp_path, write_tree, run_folio, fake_server):
    srv = fake_server()
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, srv.url).returncode == 0
    data, _ = query_json(run_folio, root, "circuit breaking with mTLS", "--mode", "semantic")
    assert data["mode"] == "semantic"
    c = data["confidence"]
    assert c["missing"] == ["mTLS"] and c["band"] == "partial"
    assert c["support"] >= 1


# --------------------------------------------------------------------------- folio show


def test_show_prints_live_lines_then_a_citation_that_turns_stale(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    sha = __import__("hashlib").sha256((root / "docs/mesh.md").read_bytes()).hexdigest()[:12]
    r = run_folio("show", "docs/mesh.md:5-8", cwd=root)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == ("## Why we chose Helix\n\nHelix gave us per-route timeouts and circuit breaking without "
                        "touching\napplication code. The alternative was a library in every service.\n"
                        f"-- docs/mesh.md:L5-L8 (sha {sha}, current)\n")
    r = run_folio("show", "docs/mesh.md:L5-L5", "--json", cwd=root)
    data = json.loads(r.stdout)
    assert {k: data[k] for k in ("loc", "sha", "freshness", "text")} == {
        "loc": "docs/mesh.md:L5-L5", "sha": sha, "freshness": "current", "text": "## Why we chose Helix"}

    text = (root / "docs/mesh.md").read_text()
    (root / "docs/mesh.md").write_text("# Service mesh\n\nA new first paragraph.\n\n" + text.split("\n", 2)[2])
    r = run_folio("show", "docs/mesh.md:5-8", cwd=root)
    assert r.returncode == 0
    assert r.stdout.splitlines()[-1] == f"-- docs/mesh.md:L5-L8 (sha {sha}, stale)"
    assert r.stdout.splitlines()[0] == "We adopted a service mesh to stop a slow dependency taking down checkout."
    assert "changed since it was indexed" in r.stderr
    data = json.loads(run_folio("show", "docs/mesh.md:5-8", "--json", cwd=root).stdout)
    assert data["freshness"] == "stale" and data["sha"] == sha

    os.remove(root / "docs/mesh.md")
    r = run_folio("show", "docs/mesh.md:5-8", "--json", cwd=root)
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["freshness"] == "missing" and data["text"] is None and data["sha"] == sha
    assert r.stderr.startswith("folio: docs/mesh.md no longer exists")


def test_show_from_a_subdirectory_takes_paths_as_query_prints_them(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    ref = run_folio("query", "handover note", "--paths-only", cwd=root / "ops").stdout.splitlines()[0]
    r = run_folio("show", ref, cwd=root / "ops")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "## Handover"
    assert r.stdout.splitlines()[-1].startswith("-- oncall.md:L8-L10 (sha ")
    data = json.loads(run_folio("show", ref, "--json", cwd=root / "ops").stdout)
    assert data["loc"] == "ops/oncall.md:L8-L10" and data["path"] == "ops/oncall.md"


def test_show_refuses_paths_outside_the_corpus(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    write_tree(tmp_path, {"secret.md": "# Secret\n\nkeep out\n"})
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    os.symlink(tmp_path / "secret.md", root / "docs/link.md")
    for spec, why in (("../secret.md:1-2", "outside the corpus"),
                      (f"{tmp_path / 'secret.md'}:1-2", "outside the corpus"),
                      ("docs/../../secret.md:1-2", "outside the corpus"),
                      ("docs/link.md:1-2", "symlink to a file outside the corpus")):
        r = run_folio("show", spec, cwd=root)
        assert r.returncode == 1, spec
        assert r.stdout == "" and "keep out" not in r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("folio: ") and why in lines[0], (spec, r.stderr)


def test_show_bad_specs_get_one_sentence(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    write_tree(root, {"docs/unindexed.md": "# Later\n", "docs/notes.txt": "plain\n"})
    for spec, code, words in (("docs/mesh.md", 2, "PATH:START-END"),
                              ("docs/mesh.md:9-3", 2, "START must not exceed END"),
                              ("docs/nope.md:1-2", 1, "no such file"),
                              ("docs/unindexed.md:1-1", 1, "is new since the last `folio index`"),
                              ("docs/notes.txt:1-1", 1, "indexes only .md files"),
                              (".folio/index.db:1-1", 1, "skips hidden names"),
                              ("docs/mesh.md:99-120", 1, "has 8 lines")):
        r = run_folio("show", spec, cwd=root)
        assert r.returncode == code, (spec, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.stderr, (spec, r.stderr)
    r = run_folio("show", "docs/mesh.md:7-40", cwd=root)  # past the end: what exists, and a note
    assert r.returncode == 0
    assert r.stdout.splitlines()[-1].startswith("-- docs/mesh.md:L7-L8 (sha ")
    assert "has 8 lines now" in r.stderr


def test_show_counts_the_lines_of_a_file_emptied_or_cut_to_one_line_since_indexing(tmp_path, write_tree, run_folio):
    # A stale reference into a file now empty said "has 1 lines now": an empty file has no lines.
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    (root / "docs/mesh.md").write_bytes(b"")
    r = run_folio("show", "docs/mesh.md:3-4", cwd=root)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "folio: docs/mesh.md is empty now, so line 3 does not exist (it changed since it was indexed: run `folio "
        "query` again for a current reference)"]
    (root / "docs/mesh.md").write_bytes(b"only")  # one line, no newline
    r = run_folio("show", "docs/mesh.md:3", cwd=root)
    assert r.returncode == 1 and "docs/mesh.md has 1 line now, so line 3 does not exist" in r.stderr
    r = run_folio("show", "docs/mesh.md:1-3", cwd=root)
    assert r.returncode == 0 and r.stdout.startswith("only\n-- docs/mesh.md:L1-L1 (sha ")
    assert "note: docs/mesh.md has 1 line now; showed 1-1" in r.stderr


def test_show_of_a_file_two_nested_indexes_hold_is_stale_while_the_one_you_stand_in_is(tmp_path, write_tree,
                                                                                      run_folio):
    # The index you stand in printed sub/x.md:5-7; sub's own index, re-run since, called those lines
    # (now other ones) current, because show judged the file by the nearest index alone.
    outer = write_tree(tmp_path / "outer", {"top.md": "# Top\n\nplums\n",
                                             "sub/x.md": "# Sub\n\nintro\n\n## Deep\n\nquince fruit here\n"})
    assert index(run_folio, outer, closed_endpoint()).returncode == 0
    assert index(run_folio, outer / "sub", closed_endpoint(), ".").returncode == 0  # ROOT given: a nested index
    out, _ = query_json(run_folio, outer, "quince")
    assert out["results"][0]["ref"] == "sub/x.md:5-7"
    x = outer / "sub/x.md"
    x.write_text("new\n\nlines\n\n" + x.read_text())
    assert index(run_folio, outer / "sub", closed_endpoint(), ".").returncode == 0
    out, _ = query_json(run_folio, outer, "quince", "--no-refresh")
    assert (out["results"][0]["ref"], out["results"][0]["freshness"]) == ("sub/x.md:5-7", "stale")
    r = run_folio("show", "--json", "sub/x.md:5-7", cwd=outer)
    assert r.returncode == 0 and json.loads(r.stdout)["freshness"] == "stale", r.stdout
    r = run_folio("show", "sub/x.md:5-7", cwd=outer)
    assert r.stdout.splitlines()[-1].endswith(", stale)")
    assert f"the index at {outer} (where you stand) holds an older copy of sub/x.md" in r.stderr
    r = run_folio("show", "--json", "x.md:9-11", cwd=outer / "sub")  # standing in sub: its own index alone
    assert json.loads(r.stdout)["freshness"] == "current"
    assert index(run_folio, outer, closed_endpoint()).returncode == 0  # both current again
    r = run_folio("show", "--json", "sub/x.md:9-11", cwd=outer)
    assert json.loads(r.stdout)["freshness"] == "current" and r.stderr == ""


def test_show_crlf_file_lines_as_numbered_by_the_index(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree, {"w.md": "\ufeff# Win\r\n\r\n## Part\r\n\r\nline one\r\nline two\r\n"})
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    data, _ = query_json(run_folio, root, "part line")
    ref = data["results"][0]["ref"]
    assert ref == "w.md:3-6"
    data = json.loads(run_folio("show", ref, "--json", cwd=root).stdout)
    assert data["text"] == "## Part\n\nline one\nline two" and data["freshness"] == "current"


def test_show_from_outside_any_corpus_says_where_to_index(tmp_path, run_folio):
    r = run_folio("show", "a.md:1-2", cwd=tmp_path)
    assert r.returncode == 1 and "folio index" in r.stderr


def test_show_stays_current_when_a_file_is_touched_but_unchanged(tmp_path, write_tree, run_folio):
    root = corpus(tmp_path, write_tree)
    assert index(run_folio, root, closed_endpoint()).returncode == 0
    later = time.time() + 5
    os.utime(root / "docs/cache.md", (later, later))
    data = json.loads(run_folio("show", "docs/cache.md:1-3", "--json", cwd=root).stdout)
    assert data["freshness"] == "current"  # the bytes are what a citation vouches for


def test_a_file_opening_with_a_rule_then_a_blank_line_keeps_its_text_searchable(tmp_path, write_tree, run_folio):
    """`---`, a blank line, prose, `---`: a thematic break (pandoc: a YAML block's opening line is never
    followed by a blank one). It was read as frontmatter that was not a mapping: its lines were left
    out of the index with a warning saying "indexed without frontmatter". A mapping after a blank line
    is still frontmatter."""
    root = corpus(tmp_path, write_tree, {
        "rule.md": "---\n\nThe ferry schedule changes every spring.\n\n---\n\n# Harbour\n\nBoats.\n",
        "kept.md": "---\n\ntitle: Kept\nstatus: live\n---\n\n# Doc\n\nText.\n",
    })
    endpoint = closed_endpoint()
    r = index(run_folio, root, endpoint)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    data, _ = query_json(run_folio, root, "ferry schedule spring", endpoint=endpoint)
    top = data["results"][0]
    assert (top["path"], top["start"], top["end"]) == ("rule.md", 1, 5)
    r = run_folio("ls", "--where", "status=live", cwd=root)
    assert r.stdout.split() == ["kept.md"], r.stdout


def test_a_yaml_error_warning_quotes_the_line_and_says_the_fix(tmp_path, write_tree, run_folio):
    """A KEP whose reviewers list held `  - @someone` warned `line 4: invalid YAML frontmatter (found
    character '@' that cannot start any token); indexed without frontmatter`: the user had to open the
    file to see what the parser meant, and the sentence gave no fix. It quotes the line, and says the
    frontmatter comes back once the YAML there is fixed."""
    root = corpus(tmp_path, write_tree, {
        "kep.md": "---\ntitle: Probes\nreviewers:\n  - @someone\nstatus: live\n---\n# Probes\n\nText.\n",
    })
    r = index(run_folio, root, closed_endpoint())
    assert r.returncode == 0, r.stderr
    assert ("warning: kep.md: line 4: invalid YAML frontmatter (found character '@' that cannot start any token) "
            "in `  - @someone`; indexed without frontmatter until the YAML there (or just above it) is fixed"
            ) in r.stderr.splitlines(), r.stderr
