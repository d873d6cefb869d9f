"""The core loop through the real CLI against the deterministic fake server:
index, query, status, config, exit codes, incremental no-op, model changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

DOCS = {
    "finance/revenue.md": "---\nid: rev-2\nstatus: live\n---\n# Revenue\n\nOverview of money.\n\n"
    "## Recognition\n\nWhen is revenue recognised? Income is booked at delivery.\n\n"
    "### Timing\n\nEarnings are recognized when the goods arrive.\n",
    "ops/runbook.md": "# Runbook\n\n## Restart\n\nTo restart the service, begin with a drain.\n\n"
    "## Delete caches\n\nErase the cache directory to remove stale files.\n",
    "notes/car.md": "Preamble text about a vehicle before any heading.\n\n# Cars\n\nAn automobile is large.\n",
}


def backdate(root, seconds=10):
    """Move every mtime out of the racy window, so a no-op run really is one."""
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(root):
        if ".folio" in dirpath:
            continue
        for f in files:
            os.utime(os.path.join(dirpath, f), (past, past))


@pytest.fixture
def indexed(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=64)
    root = write_tree(tmp_path / "corpus", DOCS)
    backdate(root)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    return root, srv


def test_query_prints_ranked_references_with_trail(indexed, run_folio):
    root, _srv = indexed
    r = run_folio("query", "when is income booked", cwd=root)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("#1  ")
    score, ref = lines[0].split()[1:3]
    assert float(score) > 0  # hybrid: the planes' shares, in spreads of their own best scores
    assert ref == "finance/revenue.md:9-11"
    assert lines[1].strip() == "Revenue > Recognition"


def test_query_json_contract(indexed, run_folio):
    root, srv = indexed
    r = run_folio("query", "erase the cache directory", "--json", "-l", "2", cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["query"] == "erase the cache directory"
    assert data["mode"] == "hybrid"  # the default wherever the index holds vectors
    assert data["model"] == "default"
    assert data["root"] == str(root)
    assert isinstance(data["notices"], list)
    assert len(data["results"]) == 2
    top = data["results"][0]
    assert top["rank"] == 1 and top["path"] == "ops/runbook.md"
    assert (top["start"], top["end"]) == (7, 9)
    assert top["trail"] == ["Runbook", "Delete caches"]
    assert top["frontmatter"] == {}
    assert top["freshness"] == "current"
    assert data["results"][0]["score"] >= data["results"][1]["score"]


def test_frontmatter_travels_with_every_section(indexed, run_folio):
    root, _ = indexed
    data = json.loads(run_folio("query", "earnings recognized on arrival", "--json", cwd=root).stdout)
    top = data["results"][0]
    assert top["path"] == "finance/revenue.md"
    assert top["frontmatter"] == {"id": "rev-2", "status": "live"}


def test_preamble_is_a_section(indexed, run_folio):
    root, _ = indexed
    data = json.loads(run_folio("query", "preamble text about a vehicle", "--json", "-l", "1", cwd=root).stdout)
    top = data["results"][0]
    assert (top["path"], top["start"], top["end"], top["trail"]) == ("notes/car.md", 1, 1, [])


def test_second_index_opens_no_file_and_embeds_nothing(indexed, run_folio):
    root, srv = indexed
    before = srv.stats()["inputs"]
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["read"] == 0 and rep["embedded"] == 0 and rep["files"] == 3
    assert srv.stats()["inputs"] == before + 1  # the fingerprint probe only: is it still the same model?


def test_touched_but_identical_file_is_restamped_not_reembedded(indexed, run_folio):
    root, srv = indexed
    before = srv.stats()["inputs"]
    os.utime(root / "ops/runbook.md", (time.time() - 5, time.time() - 5))
    rep = json.loads(run_folio("index", "--json", cwd=root).stdout)
    assert rep["restamped"] == 1 and rep["embedded"] == 0
    assert srv.stats()["inputs"] == before + 1  # the fingerprint probe only
    rep = json.loads(run_folio("index", "--json", cwd=root).stdout)
    assert rep["read"] == 0


def test_edit_reembeds_only_changed_section_and_deleted_file_goes(indexed, run_folio):
    root, srv = indexed
    p = root / "ops/runbook.md"
    p.write_text(p.read_text().replace("begin with a drain", "start by draining traffic"))
    (root / "notes/car.md").unlink()
    backdate(root)
    rep = json.loads(run_folio("index", "--json", cwd=root).stdout)
    assert rep["changed"] == 1 and rep["deleted"] == 1
    assert rep["embedded"] == 1  # only the Restart section's text changed
    assert rep["reused"] == 2
    data = json.loads(run_folio("query", "automobile", "--json", "-l", "10", cwd=root).stdout)
    assert all(h["path"] != "notes/car.md" for h in data["results"])


def test_subdirectory_finds_corpus_and_prints_paths_from_cwd(indexed, run_folio):
    root, _ = indexed
    r = run_folio("query", "erase the cache directory", "-l", "1", cwd=root / "finance")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[2] == "../ops/runbook.md:7-9"
    data = json.loads(run_folio("query", "erase the cache", "--json", "-l", "1", cwd=root / "finance").stdout)
    assert data["results"][0]["path"] == "ops/runbook.md"
    assert data["root"] == str(root)


def test_index_without_root_in_subdirectory_never_nests(indexed, run_folio):
    root, _ = indexed
    r = run_folio("index", cwd=root / "ops")
    assert r.returncode == 0, r.stderr
    assert not (root / "ops" / ".folio").exists()


def test_status_reports_the_index(indexed, run_folio):
    root, _ = indexed
    r = run_folio("status", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["version"] == 1  # as every --json object
    assert s["files"] == 3 and s["sections"] == 8 and s["dim"] == 64
    assert s["model"] == "default" and s["changed"] == 0
    assert s["frontmatter_keys"] == {"id": 1, "status": 1}
    (root / "ops/runbook.md").write_text("# Changed\n")
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["changed"] == 1
    text = run_folio("status", cwd=root).stdout
    assert "sections  8" in text and "1 changed since indexing" in text


def test_no_index_is_one_sentence_exit_1(tmp_path, run_folio):
    r = run_folio("query", "anything", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("folio: no folio index here")
    assert "Traceback" not in r.stderr
    assert r.stdout == ""


def test_usage_error_exits_2(tmp_path, run_folio):
    r = run_folio("query", cwd=tmp_path)
    assert r.returncode == 2
    r = run_folio("query", "x", "--limit", "0", cwd=tmp_path)
    assert r.returncode == 2
    r = run_folio("frobnicate", cwd=tmp_path)
    assert r.returncode == 2


def test_every_exit_1_or_2_ends_stderr_with_one_folio_sentence(tmp_path, write_tree, run_folio):
    """The rule SKILL.md gives agents, where it was broken: `folio doctor` (text) with a failed probe
    put its verdict on stdout only, and `folio` alone ended stderr with its help's command list."""
    from helpers import free_port

    write_tree(tmp_path, {"a.md": "# A\n\nText.\n"})
    url = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    r = run_folio("doctor", "--endpoint", url, cwd=tmp_path)
    assert r.returncode == 1
    last = r.stderr.rstrip("\n").splitlines()[-1]
    assert last == "folio: 1 of 8 probes failed: reachable: each FAIL line says what to change", r.stderr
    assert "1 of 8 probes failed: reachable" in r.stdout  # the report's footer, as before
    r = run_folio(cwd=tmp_path)
    assert r.returncode == 2 and not r.stdout
    assert "query" in r.stderr  # the help, then the sentence
    assert r.stderr.rstrip("\n").splitlines()[-1].startswith("folio: name a command"), r.stderr


def test_version_and_module_entry_point(tmp_path, run_folio):
    r = run_folio("--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("folio, version ")
    r2 = subprocess.run([sys.executable, "-m", "folio", "--version"], capture_output=True, text=True)
    assert r2.stdout == r.stdout


@pytest.mark.parametrize("args", [["--help"], ["config"], ["query", "--help"]])
def test_lean_startup_imports_neither_numpy_nor_httpx(tmp_path, args):
    code = (f"import sys; sys.argv=['folio', *{args!r}]\n"
            "from folio.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "bad=[m for m in ('numpy','httpx') if m in sys.modules]\n"
            "print('IMPORTED', bad, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert "IMPORTED []" in r.stderr, r.stderr


def test_names_changed_same_space_keeps_vectors(indexed, run_folio):
    root, srv = indexed
    before = srv.stats()["inputs"]
    # Same server, another spelling of its address: the fingerprint proves the space is the same.
    other = srv.url.replace("127.0.0.1", "localhost")
    r = run_folio("index", "--endpoint", other, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "the same vector space" in r.stderr
    assert json.loads(r.stdout)["embedded"] == 0
    assert srv.stats()["inputs"] == before + 1  # only the probe


def test_space_changed_reembeds_everything_and_says_what_built_it(indexed, fake_server, run_folio):
    root, _ = indexed
    other = fake_server(dim=32, space="b")
    r = run_folio("index", "--endpoint", other.url, "--model", "other-model", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "the index was built by default at" in r.stderr
    assert "this run uses other-model at" in r.stderr and "re-embedding every section" in r.stderr
    assert json.loads(r.stdout)["embedded"] == 8
    data = json.loads(run_folio("query", "erase the cache", "--json", cwd=root).stdout)
    assert data["model"] == "other-model" and data["results"][0]["path"] == "ops/runbook.md"


def test_a_query_in_a_drifted_space_ranks_lexically_and_says_why(indexed, run_folio):
    root, srv = indexed
    srv.control(space="z")  # the same name now serves another model
    r = run_folio("query", "erase the cache", "--json", cwd=root)
    assert r.returncode == 0, r.stderr  # the one rule for a server that gives no usable query vector
    d = json.loads(r.stdout)
    assert d["mode"] == "lexical" and d["results"][0]["path"] == "ops/runbook.md"
    [notice] = [n for n in d["notices"] if "another vector space" in n]
    assert "run `folio index` to re-embed" in notice and "ranking lexically" in notice
    assert "Traceback" not in r.stderr


def test_index_notices_a_server_restarted_on_another_model(indexed, run_folio):
    root, srv = indexed
    srv.control(space="z")
    (root / "ops/runbook.md").write_text("# Runbook\n\nA new line.\n")
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "another vector space" in r.stderr
    assert json.loads(r.stdout)["embedded"] == 6
    assert run_folio("query", "automobile", cwd=root).returncode == 0


def test_records_over_the_servers_token_limit_are_divided_by_its_counts(tmp_path, write_tree, fake_server,
                                                                        run_folio):
    # ~4 bytes per token: a 6000-character section is ~1500 tokens, past the server's 512. folio
    # learns the 512 (a probe the model's context long, taken whole) and divides that section by
    # the server's counts; the character budget stays the user's 8000.
    para = "word " * 100 + "\n\n"
    srv = fake_server(dim=32, max_tokens=512)
    root = write_tree(tmp_path / "c", {"long.md": "# Long\n\n" + para * 12, "short.md": "# Short\n\nshort.\n"})
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "refused" not in r.stderr  # nothing the server would refuse is ever sent
    rep = json.loads(r.stdout)
    assert (rep["budget"], rep["tokens"], rep["dead_rows"]) == (8000, 512, 0)
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (s["budget"], s["tokens"]) == (8000, 512) and s["truncated"] == 0
    assert s["sections"] == 1 + 4 and s["embedded"] == s["sections"]  # 1,200 words: 4 records of <= 512 tokens
    assert "512 tokens an input" in run_folio("status", cwd=root).stdout
    assert srv.stats()["status"] == {"200": 2}  # the probes (with one of 512 tokens), then the records


def test_a_new_budget_divides_every_file_again_keeping_unchanged_sections(tmp_path, write_tree, fake_server,
                                                                          run_folio):
    srv = fake_server(dim=32)
    para = "word " * 60 + "\n\n"
    root = write_tree(tmp_path / "c", {"long.md": "# Long\n\n" + para * 10, "short.md": "# Short\n\nshort.\n"})
    backdate(root)  # nothing changes on disk: only the budget does
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    r = run_folio("index", "--max-chars", "1000", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "every file is divided again" in r.stderr
    rep = json.loads(r.stdout)
    assert rep["read"] == 2 and rep["reused"] == 1  # the short section keeps its vector
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["budget"] == 1000 and s["sections"] >= 1 + 3 and s["embedded"] == s["sections"]
    again = json.loads(run_folio("index", "--json", cwd=root).stdout)
    assert again["read"] == 0 and again["embedded"] == 0  # and the run after is a no-op again


def test_mid_run_refusal_is_bisected_and_redivided(tmp_path, write_tree, fake_server, run_folio):
    # A server that counts no tokens for folio (no /tokenize): a record it refuses is found by
    # bisecting the batch and divided on its own; the run finishes, every other record is sent as
    # the budget divides it, and the fresh index keeps no dead row.
    srv = fake_server(dim=32, max_tokens=300, no_tokenize=True)
    files = {f"f{i}.md": f"# Doc {i}\n\nplain words here.\n" for i in range(5)}
    files["dense.md"] = "# Dense\n\n" + "\n".join("x" * 60 for _ in range(30)) + "\n"
    root = write_tree(tmp_path / "c", files)
    r = run_folio("index", "--endpoint", srv.url, "--max-chars", "1900", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["embedded"] == s["sections"] and s["dead_rows"] == 0 and s["budget"] == 1900
    assert s["tokens"] == 0 and "counts no tokens" in run_folio("status", cwd=root).stdout
    notice = next(ln for ln in r.stderr.splitlines() if ln.startswith("dense.md:1-32 was "))
    # what folio did, not the server's advice (which reads like an order: folio already recovered)
    assert "folio divided it into" in notice and "nothing to do" in notice
    assert "increase" not in notice and "physical batch" not in notice
    assert s["sections"] > 5 + 1 and s["truncated"] == 0


def test_server_down_mid_run_keeps_committed_batches(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32, fail_after=20)  # probe, calibration, then 8 requests per commit
    files = {f"d{i:03}.md": f"# Doc {i}\n\n" + "\n\n".join(f"## S{j}\n\ntext {i} {j}" for j in range(40))
             for i in range(30)}
    root = write_tree(tmp_path / "c", files)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 1
    assert r.stderr.startswith("folio: ") and "Traceback" not in r.stderr
    srv.control(fail=None, fail_after=None)
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert 0 < s["embedded"] < 30 * 41  # committed batches survived
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["embedded"] == s["sections"] == 30 * 41


def test_rebuild_embeds_with_the_endpoint_and_model_the_index_recorded(tmp_path, write_tree, fake_server, run_folio):
    # Indexed with --endpoint (recorded with the vectors: plain `folio index` and queries use it), a
    # `folio index --rebuild` with no setting naming another goes back to that server, as a plain run
    # does: it went to the default endpoint, found nothing there and left a lexical-only index.
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", DOCS)
    r = run_folio("index", "--endpoint", srv.url, "--model", "fake", cwd=root)
    assert r.returncode == 0, r.stderr
    r = run_folio("index", "--rebuild", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert not rep["lexical_only"] and rep["embedded"] == rep["sections"] > 0, (rep, r.stderr)
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (s["endpoint"], s["model"], s["embedded"]) == (srv.url, "fake", s["sections"]), s
    # a setting naming another endpoint still wins, as for any run
    other = fake_server(dim=16, space="b")
    r = run_folio("index", "--rebuild", "--json", cwd=root, env={"FOLIO_ENDPOINT": other.url})
    assert r.returncode == 0, r.stderr
    assert json.loads(run_folio("status", "--json", cwd=root).stdout)["dim"] == 16
